"""Forwarding: a result reaches every peer as long as the peers' graph is connected, not only
the peers its trainer can reach.

Each node that fetched and checked a result announces it again, to every peer but those it
heard it from; a node that hears of a result fetches its payload from whichever announcer has
it, trying the next one when a fetch fails. An announcement carries the trainer's signed header
and the payload's hash, so a forwarder cannot alter a result: the receiver checks both before it
accepts anything (`iroh_results.fetch_result`). Forwarders also share the upload of a payload
with its trainer. Only a checked result is forwarded, so garbage dies at the first honest hop.

Memory stays bounded: results are remembered by commitment (the newest `SEEN_LIMIT`), and a
result's payload leaves the node's store `KEEP_SECONDS` after it came (a step's results are
applied two rounds later; nobody asks for them after that), or earlier when the payloads kept
pass `KEEP_BYTES`. By arrival, not by the step a result claims: a signed result for a far
future step would otherwise push every other payload out."""

import asyncio
import logging
import time
from collections import OrderedDict

logger = logging.getLogger(__name__)

SEEN_LIMIT = 4096  # results remembered (delivered or given up) by commitment
KEEP_SECONDS = 600.0  # how long a result's payload is served after it came
KEEP_BYTES = 2 << 30  # and at most this much of them
# An announcer not in the peer list yet (the list lags behind who is up, e.g. while clients
# reconnect to a restarted coordinator) cannot be fetched from: a result whose announcers are
# all unknown waits this long for one of them (or another announcer) before trying anyway.
UNKNOWN_PEER_WAIT = 10.0


class ResultForwarding:
    """Fetches announced results from any announcer, delivers each once, forwards it.

    `fetch(msg)` fetches and checks the result of an announcement whose "from" is the peer to
    fetch from (raising on any failure); `deliver(result)` hands a checked result to the client.
    """

    def __init__(self, node, fetch, deliver, announcement, clock=time.monotonic,
                 keep_seconds=KEEP_SECONDS, keep_bytes=KEEP_BYTES):
        self.node, self._fetch, self._deliver = node, fetch, deliver
        self._clock, self.keep_seconds, self.keep_bytes = clock, keep_seconds, keep_bytes
        self._announcement = announcement  # result, blob -> the announcement dict
        self._seen = OrderedDict()  # commitment hex -> None: delivered or our own
        self._sources = {}  # commitment hex -> [announcement dicts] not yet tried
        self._heard = {}  # commitment hex -> set of peers that announced it
        self._blobs = OrderedDict()  # blob hex -> (arrival, bytes): result payloads served
        self._kept = 0  # bytes of those
        self._tasks = set()
        self.forwarded = 0  # results this node announced for others (tests, logs)

    async def publish(self, result) -> int:
        """Serve our own result's payload and announce it; returns how many peers took it."""
        blob = self._keep(result.payload)
        self._remember(result.commitment.hex())
        return await self.node.announce(self._announcement(result, blob))

    def on_announcement(self, msg: dict) -> None:
        key, sender = msg.get("commitment"), msg.get("from")
        if not isinstance(key, str) or not isinstance(sender, str) or key in self._seen:
            return
        if key not in self._heard and len(self._heard) >= SEEN_LIMIT:
            self._heard.pop(next(iter(self._heard)))  # announcers of results never fetched
        self._heard.setdefault(key, set()).add(sender)
        pending = self._sources.get(key)
        if pending is not None:  # a fetch is running: it tries this announcer next if needed
            pending.append(msg)
            return
        self._sources[key] = [msg]
        task = asyncio.ensure_future(self._fetch_one(key))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _fetch_one(self, key: str) -> None:
        pending = self._sources[key]
        deadline = self._clock() + UNKNOWN_PEER_WAIT
        try:
            while pending:
                msg = await self._next(pending, deadline)
                try:
                    result = await self._fetch(msg)
                except Exception as e:  # unreachable peer, bad blob, forged header: next one
                    logger.warning(f"could not fetch result for step {msg.get('step')} from "
                                   f"{str(msg.get('from'))[:16]}: {type(e).__name__}: {e}")
                    continue
                self._remember(key)
                self._deliver(result)
                await self._forward(key, result)
                return
        finally:
            # given up until another announcer shows up (then fetched again), or done
            self._sources.pop(key, None)
            if key in self._seen:
                self._heard.pop(key, None)

    async def _next(self, pending: list, deadline: float, step=0.25) -> dict:
        """The next announcement to fetch from: the first whose announcer is in the node's peer
        list, waiting for one until `deadline`; after that, the oldest."""
        knows = getattr(self.node, "knows", None)
        while knows is not None:
            for i, msg in enumerate(pending):
                if knows(msg.get("from")):
                    return pending.pop(i)
            if self._clock() >= deadline:
                break
            await asyncio.sleep(step)
        return pending.pop(0)

    async def _forward(self, key, result) -> None:
        blob = self._keep(result.payload)
        heard = self._heard.get(key, set())
        sent = await self.node.announce(self._announcement(result, blob), exclude=heard)
        if sent:
            self.forwarded += 1
        logger.debug("forwarded result of step %s by %s to %d peers", result.step,
                     result.trainer.hex()[:8], sent)

    def _remember(self, key: str) -> None:
        self._seen[key] = None
        while len(self._seen) > SEEN_LIMIT:
            self._seen.popitem(last=False)

    def _keep(self, payload: bytes) -> str:
        now = self._clock()
        blob = self.node.add(payload)
        if blob not in self._blobs:
            self._blobs[blob] = (now, len(payload))
            self._kept += len(payload)
        while len(self._blobs) > 1:
            old, (came, size) = next(iter(self._blobs.items()))
            if now - came <= self.keep_seconds and self._kept <= self.keep_bytes:
                break
            del self._blobs[old]
            self._kept -= size
            self.node.store.remove(old)
        return blob

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
