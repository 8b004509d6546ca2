"""Simulated training (`--dummy-training-delay-secs`): wait, then produce the batch's
deterministic result, so the whole coordination loop runs without a model."""

import asyncio

from .results import dummy_payload


class DummyTrainer:
    def __init__(self, run_id: str, delay: float = 1.0):
        self.run_id, self.delay = run_id, delay

    async def prepare(self, epoch: int, state) -> None:
        await asyncio.sleep(0)

    async def train(self, step: int, batch, state) -> bytes:
        await asyncio.sleep(self.delay)
        return dummy_payload(self.run_id, step, batch)
