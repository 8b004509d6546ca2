"""The run spec's canonical bytes and the checks a chain client makes with them (no chain
needed): equal specs give equal bytes, other bytes are refused, a client's own spec must be the
run's, and a running client stops when the run's spec hash changes under it."""

import asyncio
import json
from dataclasses import replace

import pytest
from solders.keypair import Keypair

from psyche_client.backends.base import FatalBackendError
from psyche_client.backends.solana import SolanaBackend
from psyche_client.chain.program import COORDINATOR_DISCRIMINATOR
from psyche_client.chain.run_spec import SpecMismatch, check_own_spec
from psyche_client.training.spec import RunSpec, SpecError
from psyche_coordinator_core import RunConfig, apply, new_run, to_bytes

SPEC = RunSpec.from_dict({"model": {"vocab_size": 256}, "optimizer": {"lr": 0.002},
                          "data": {"kind": "http", "urls": ["http://d/1.bin"]},
                          "p2p": {"relays": ["https://relay.example"]}})


def test_canonical_bytes_round_trip_and_are_the_hash_input():
    raw = SPEC.canonical_bytes()
    assert RunSpec.from_canonical_bytes(raw) == SPEC
    assert b" " not in raw and raw.index(b'"checkpoint"') < raw.index(b'"data"')  # sorted
    assert len(SPEC.spec_hash()) == 32
    assert replace(SPEC, optimizer=replace(SPEC.optimizer, lr=0.001)).spec_hash() != \
        SPEC.spec_hash()


@pytest.mark.parametrize("raw", [
    json.dumps(SPEC.to_dict(), sort_keys=True).encode(),  # spaces: not canonical
    json.dumps(SPEC.to_dict(), separators=(",", ":")).encode(),  # unsorted
    b"\xff", b"[]", b'{"model":{},"extra":{}}', b"{",
])
def test_other_bytes_are_not_a_spec(raw):
    with pytest.raises(SpecError):
        RunSpec.from_canonical_bytes(raw)


def test_relays_must_be_urls_and_stun_servers_host_port():
    for bad in (["relay:3340"], [""], ["ftp://x"], "http://x", [3]):
        with pytest.raises(SpecError, match="p2p.relays"):
            RunSpec.from_dict({"p2p": {"relays": bad}})
    for bad in (["stun.example"], [":3478"], ["h:0"], ["h:x"], "h:1", [3478]):
        with pytest.raises(SpecError, match="p2p.stun"):
            RunSpec.from_dict({"p2p": {"stun": bad}})
    assert RunSpec.from_dict({"p2p": {"stun": ["10.0.0.1:3478"]}}).p2p.stun == ("10.0.0.1:3478",)


def test_a_clients_own_spec_must_be_the_runs():
    check_own_spec(SPEC, SPEC.spec_hash(), "r")
    check_own_spec(None, bytes(32), "r")
    with pytest.raises(SpecMismatch, match="simulated training"):
        check_own_spec(None, SPEC.spec_hash(), "r")
    with pytest.raises(SpecMismatch, match=SPEC.spec_hash().hex()[:16]):
        check_own_spec(SPEC, bytes(32), "r")


def test_the_backend_stops_when_the_runs_spec_changes():
    state = new_run("v", RunConfig(), 1)
    ours = apply(state, 1, "update", spec_hash=SPEC.spec_hash())
    theirs = apply(state, 1, "update", spec_hash=bytes(range(32)))
    backend = SolanaBackend("http://127.0.0.1:9", "ws://127.0.0.1:9", "v", Keypair(),
                            spec_hash=SPEC.spec_hash())

    async def go():
        backend._offer(COORDINATOR_DISCRIMINATOR + to_bytes(ours))
        assert (await backend.next_state()).spec_hash == SPEC.spec_hash()
        backend._offer(COORDINATOR_DISCRIMINATOR + to_bytes(theirs))
        with pytest.raises(FatalBackendError, match="spec changed to 000102"):
            await backend.next_state()
        await backend.coordinator.close()
    asyncio.run(go())
