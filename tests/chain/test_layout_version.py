"""A coordinator account of another layout version: the client stops with a named error
instead of misreading it (no chain needed: the decoding is the client's own)."""

import asyncio
import struct

import pytest
from solders.keypair import Keypair

from psyche_client.backends.base import FatalBackendError
from psyche_client.backends.solana import SolanaBackend
from psyche_client.chain.program import (
    COORDINATOR_DISCRIMINATOR,
    ChainError,
    Coordinator,
    LayoutVersionMismatch,
)
from psyche_coordinator_core import LayoutError, RunConfig, new_run, to_bytes
from psyche_coordinator_core.canonical import VERSION_OFFSET

AT = 8 + VERSION_OFFSET


def account(version: int = None, size: int = None) -> bytes:
    data = bytearray(COORDINATOR_DISCRIMINATOR + to_bytes(new_run("v", RunConfig(), 1)))
    if version is not None:
        data[AT:AT + 4] = struct.pack("<I", version)
    return bytes(data[:size] if size else data)


@pytest.fixture
def coordinator():
    c = Coordinator("http://127.0.0.1:9", Keypair())
    yield c
    asyncio.run(c.close())


def test_this_version_decodes(coordinator):
    assert coordinator.decode_state(account()).run_id == "v"


@pytest.mark.parametrize("version, size", [(0, None), (0, 8 + 133_640), (2, 8 + 137_856),
                                           (3, 8 + 137_984), (4, 8 + 162_592),
                                           (5, 8 + 178_976), (6, 8 + 179_104),
                                           (7, 8 + 179_136), (9, None), (9, 200)])
def test_another_version_is_a_named_error(coordinator, version, size):
    # version 1 had zero padding at offset 92 and 4,216 fewer bytes; version 2 had no client
    # phases (128 fewer bytes); version 3 no contributor points (24,608 fewer bytes); version 4
    # no accusers (16,384 fewer bytes); version 5 no accused masks (128 fewer bytes); version 6
    # no spec hash (32 fewer bytes); version 7 no client bloom bits (8,192 fewer bytes); 9 is
    # from the future
    with pytest.raises(LayoutVersionMismatch, match="layout version (1|2|3|4|5|6|7|9), this "
                                                    "client reads version 8") as e:
        coordinator.decode_state(account(version, size))
    assert isinstance(e.value, LayoutError) and e.value.version in (1, 2, 3, 4, 5, 6, 7, 9)


def test_other_accounts_are_not_version_errors(coordinator):
    with pytest.raises(ChainError, match="not an initialized"):
        coordinator.decode_state(bytes(8) + account()[8:])
    with pytest.raises(ChainError, match="expected"):
        coordinator.decode_state(account()[:-1])


def test_the_backend_stops_on_another_version():
    backend = SolanaBackend("http://127.0.0.1:9", "ws://127.0.0.1:9", "v", Keypair())

    async def go():
        backend._offer(account(1))
        with pytest.raises(FatalBackendError, match="LayoutVersionMismatch"):
            await backend.next_state()
        await backend.coordinator.close()
    asyncio.run(go())
