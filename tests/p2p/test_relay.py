"""The run's relay (scripts/relay: iroh-relay 1.4.1, the version the binding speaks) on
loopback: peers that know each other only by key find each other through it, and move to a
direct path when one works (here, loopback always does). The tests that start the relay are
`slow` (the processes part): one relay process per module."""

import asyncio
import time

import pytest

pytest.importorskip("iroh")

from psyche_client.identity import Identity  # noqa: E402
from psyche_client.p2p.errors import P2PError  # noqa: E402
from psyche_client.p2p.iroh_node import IrohNode  # noqa: E402
from psyche_client.p2p.relay_server import RelayServerError, find_binary, start_relay  # noqa: E402

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def relay():
    try:
        find_binary()
    except RelayServerError as e:
        pytest.skip(f"the relay cannot be built here: {e}")
    with start_relay() as url:
        yield url


def run(coro, timeout=90):
    return asyncio.run(asyncio.wait_for(coro, timeout))


@pytest.mark.slow
def test_peers_known_only_by_key_meet_through_the_relay_then_go_direct(relay):
    async def main():
        ids = [Identity.generate() for _ in range(2)]
        keys = [i.public.hex() for i in ids]
        inbox = []
        a = IrohNode(keys[0], secret_key=ids[0].seed, relay_url=relay, timeout=20)
        # the contributor's default: every interface, on a fixed port
        b = IrohNode(keys[1], on_announcement=inbox.append, host="0.0.0.0", port=0,
                     secret_key=ids[1].seed, relay_url=relay, timeout=20)
        await a.start()
        await b.start()
        try:
            # no ticket: the key (the p2p id) and the run's relay are all a knows of b
            a.set_peers({keys[1]: None})
            b.set_peers({keys[0]: None})
            h = b.add(b"r" * 100_000)
            assert await a.fetch(keys[1], h) == b"r" * 100_000
            assert await a.announce({"type": "hello"}) == 1
            end = time.monotonic() + 20
            while not inbox or a.path_kind(keys[1]) != "direct":
                assert time.monotonic() < end, (inbox, a.path_kind(keys[1]))
                await asyncio.sleep(0.1)
            assert inbox[0]["from"] == a.endpoint_id
        finally:
            await asyncio.gather(a.close(), b.close())
    run(main())


def test_without_a_relay_a_peer_known_only_by_key_is_unknown():
    async def main():
        ids = [Identity.generate() for _ in range(2)]
        a = IrohNode(ids[0].public.hex(), secret_key=ids[0].seed)
        await a.start()
        try:
            a.set_peers({ids[1].public.hex(): None})
            assert a.peers == {}
            with pytest.raises(P2PError, match="unknown peer"):
                await a.fetch(ids[1].public.hex(), "00" * 32)
        finally:
            await a.close()
    run(main())


@pytest.mark.slow
def test_a_peer_id_that_is_not_a_key_is_left_out(relay):
    async def main():
        me = Identity.generate()
        a = IrohNode(me.public.hex(), secret_key=me.seed, relay_url=relay)
        await a.start()
        try:
            a.set_peers({"not-hex": None, "ab" * 31: None})
            assert a.peers == {}
        finally:
            await a.close()
    run(main())


def test_the_client_refuses_a_relay_it_cannot_use(tmp_path):
    """--iroh-relay is the iroh transport's and must be a URL: refused by name before the
    client starts anything."""
    from click.testing import CliRunner

    from psyche_client.cli.client import main
    key = tmp_path / "client.key"
    Identity.generate().save(key)
    base = ["train", "--run-id", "r", "--server-addr", "127.0.0.1:9",
            "--identity-secret-key-path", str(key)]
    res = CliRunner().invoke(main, [*base, "--p2p", "ws", "--iroh-relay", "http://127.0.0.1:1"])
    assert res.exit_code == 2 and "--iroh-relay is the iroh transport's" in res.output
    res = CliRunner().invoke(main, [*base, "--iroh-relay", "relay.example:3340"])
    assert res.exit_code == 2 and "must be an http:// or https:// URL" in res.output
