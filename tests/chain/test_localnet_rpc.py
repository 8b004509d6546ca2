"""psyche-localnet's JSON-RPC front end: many connections at once are all served (an earlier
HTTP server could leave some unserved while others were kept alive), batches, bad requests."""

import asyncio
import json
import os
import resource
import socket
import time

import httpx
import pytest

from .localnet import start_localnet

pytestmark = pytest.mark.slow


def address(localnet):
    host, port = localnet.rpc_url.removeprefix("http://").split(":")
    return host, int(port)


async def exchange(reader, writer, body: bytes, length=None):
    """One POST on an open connection: (status, JSON reply, head lines)."""
    writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(body) if length is None else length}\r\n\r\n"
                 .encode() + body)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    size = next(int(h.split(":")[1]) for h in lines if h.lower().startswith("content-length"))
    return status, json.loads(await reader.readexactly(size)), lines


def rpc(method: str, i: int) -> bytes:
    """A JSON-RPC request without parameters."""
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": method}).encode()


def until_closed(localnet, data: bytes) -> bytes:
    """Sends raw bytes on a new connection; all the node answers before it closes it."""
    with socket.create_connection(address(localnet), timeout=30) as s:
        s.sendall(data)
        reply = b""
        while chunk := s.recv(4096):
            reply += chunk
    return reply


def test_many_connections_at_once_are_all_served(localnet):
    async def one(i):
        # a client of its own: its own keep-alive connection
        async with httpx.AsyncClient(timeout=30) as c:
            r = await c.post(localnet.rpc_url, json={"jsonrpc": "2.0", "id": i,
                                                     "method": "getSlot"})
            first = r.json()["result"]
            await asyncio.sleep(0.2)  # hold the connection open while the others arrive
            r = await c.post(localnet.rpc_url, json={"jsonrpc": "2.0", "id": i,
                                                     "method": "getHealth"})
            return first, r.json()["result"]

    async def go():
        return await asyncio.gather(*(one(i) for i in range(32)))
    results = asyncio.run(go())
    assert all(h == "ok" and isinstance(s, int) for s, h in results)


def test_idle_keep_alive_connections_leave_new_ones_served(localnet):
    """The old failure: connections kept alive by earlier clients took the server's workers, and
    a client arriving later waited unserved. 300 idle keep-alive connections, then 32 new ones
    are all answered, and the idle ones still are afterwards."""
    host, port = address(localnet)

    async def ask(reader, writer):
        body = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'
        return (await exchange(reader, writer, body))[1]["result"]

    async def go():
        idle = [await asyncio.open_connection(host, port) for _ in range(300)]
        try:
            for conn in idle:
                assert await ask(*conn) >= 0  # served once, then left open
            async def newcomer():
                conn = await asyncio.open_connection(host, port)
                try:
                    return await ask(*conn)
                finally:
                    conn[1].close()
            late = await asyncio.wait_for(asyncio.gather(*(newcomer() for _ in range(32))), 30)
            again = await asyncio.wait_for(asyncio.gather(*(ask(*c) for c in idle)), 30)
            return late, again
        finally:
            for _, writer in idle:
                writer.close()
    late, again = asyncio.run(go())
    assert len(late) == 32 and len(again) == 300


def test_batches_and_bad_requests(localnet):
    with httpx.Client(timeout=30) as c:
        batch = [{"jsonrpc": "2.0", "id": 1, "method": "getHealth"},
                 {"jsonrpc": "2.0", "id": 2, "method": "noSuchMethod"}]
        replies = c.post(localnet.rpc_url, json=batch).json()
        assert replies[0]["result"] == "ok" and replies[1]["error"]["code"] == -32601
        bad = c.post(localnet.rpc_url, content=b"{not json").json()
        assert bad["error"]["code"] == -32700
        assert c.get(localnet.rpc_url + "/health").text == "ok"
    # a malformed request head gets a 400 and the connection is closed (HTTP's own error,
    # from hyper: there is no JSON-RPC request to answer)
    assert until_closed(localnet, b"NOT HTTP AT ALL\r\n\r\n").startswith(b"HTTP/1.1 400")
    # a request head over 64 KiB is refused with 431, and the connection closed
    big = (b"POST / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (70 << 10)
           + b"\r\nContent-Length: 2\r\n\r\n{}")
    assert until_closed(localnet, big).startswith(b"HTTP/1.1 431")


def test_get_program_accounts(localnet):
    """What a leaderboard reads on chain: every account of the program, filtered by size and
    by bytes at an offset (the contributor accounts of one run: dataSize 381, memcmp at 9)."""
    def call(params):
        with httpx.Client(timeout=30) as c:
            return c.post(localnet.rpc_url, json={"jsonrpc": "2.0", "id": 1,
                                                  "method": "getProgramAccounts",
                                                  "params": params}).json()
    # the session's chain may hold other tests' runs: only the shape is checked
    every = call([localnet.program_id, {"encoding": "base64"}])["result"]
    assert isinstance(every, list)
    for entry in every:
        assert entry["account"]["owner"] == localnet.program_id
        assert entry["account"]["data"][1] == "base64"
    nobody = "11111111111111111111111111111111"  # no run has this instance key
    reply = call([localnet.program_id, {"encoding": "base64", "withContext": True, "filters": [
        {"dataSize": 381}, {"memcmp": {"offset": 9, "bytes": nobody}}]}])["result"]
    assert reply["value"] == [] and isinstance(reply["context"]["slot"], int)
    assert call([localnet.program_id, {"filters": [{"bogus": 1}]}])["error"]["code"] == -32602


def test_history_and_program_logs_as_solana_py_reads_them(localnet):
    """What explorers and Anchor clients read, parsed by solana-py and solders (not our code):
    `getTransaction` with its meta, `getSignaturesForAddress`, `getBlock`, and the program's own
    log lines (Anchor's `AnchorError ...`) in a simulation."""
    from solana.rpc.async_api import AsyncClient
    from solana.rpc.commitment import Confirmed
    from solders.keypair import Keypair
    from solders.pubkey import Pubkey
    from solders.system_program import TransferParams, transfer
    from solders.transaction import Transaction

    from psyche_client.chain.program import Coordinator

    async def go():
        c = AsyncClient(localnet.rpc_url)
        payer, to = Keypair(), Keypair()
        await c.confirm_transaction((await c.request_airdrop(payer.pubkey(), 10**9)).value,
                                    Confirmed)

        async def tx(ixs, signers):
            blockhash = (await c.get_latest_blockhash()).value.blockhash
            return Transaction.new_signed_with_payer(ixs, payer.pubkey(), signers, blockhash)
        pay = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=to.pubkey(),
                                      lamports=1000))
        sent = (await c.send_transaction(await tx([pay], [payer]))).value
        got = (await c.get_transaction(sent, max_supported_transaction_version=0)).value
        meta = got.transaction.meta
        status = (await c.get_signature_statuses([sent])).value[0]
        assert got.slot == status.slot and meta.err is None and meta.fee == 5000
        assert (meta.pre_balances[1], meta.post_balances[1]) == (0, 1000)
        assert meta.pre_balances[0] - meta.post_balances[0] == 1000 + 5000
        assert any("11111111111111111111111111111111 success" in line
                   for line in meta.log_messages)
        listed = (await c.get_signatures_for_address(to.pubkey())).value
        assert [s.signature for s in listed] == [sent]
        block = (await c.get_block(got.slot, max_supported_transaction_version=0)).value
        assert sent in [t.transaction.signatures[0] for t in block.transactions]
        assert block.block_time == got.block_time and block.parent_slot <= got.slot

        # simulation checks signatures only when asked (sigVerify), as a validator does, so
        # that a client can simulate before it signs
        from solders.message import Message
        unsigned = Transaction.new_unsigned(Message.new_with_blockhash(
            [pay], payer.pubkey(), (await c.get_latest_blockhash()).value.blockhash))
        assert (await c.simulate_transaction(unsigned)).value.err is None
        checked = (await c.simulate_transaction(unsigned, sig_verify=True)).value
        assert "SignatureFailure" in str(checked.err)

        # an instruction on accounts that are no run's: Anchor says which, in the logs
        coordinator = Coordinator(localnet.rpc_url, payer)
        try:
            ix = coordinator.ix_set_paused(payer.pubkey(), Pubkey.new_unique(),
                                           Pubkey.new_unique(), True)
        finally:
            await coordinator.close()
        logs = (await c.simulate_transaction(await tx([ix], [payer]))).value.logs
        assert any(line.startswith("Program log: AnchorError caused by account: "
                                   "coordinator_instance") and "AccountNotInitialized" in line
                   for line in logs), logs
        await c.close()
    asyncio.run(go())


def test_logs_and_program_subscriptions(localnet):
    """logsSubscribe (all, or the transactions naming one account) and programSubscribe (a
    program's accounts as transactions change them, with getProgramAccounts' filters), as a
    dashboard uses them, over the PubSub websocket."""
    import websockets
    from solders.keypair import Keypair

    from psyche_client.chain.program import ACCOUNT_SPACE, Coordinator
    from tests.chain.test_program_client import create_run

    async def go():
        owner, account = Keypair(), Keypair()
        c = Coordinator(localnet.rpc_url, owner)
        await c.airdrop(owner.pubkey(), 100 * 10**9)
        async with websockets.connect(localnet.ws_url) as ws:
            async def call(i, method, params):
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                                          "params": params}))
                while True:
                    reply = json.loads(await ws.recv())
                    if reply.get("id") == i:
                        return reply
            mentions = (await call(1, "logsSubscribe",
                                   [{"mentions": [str(account.pubkey())]}]))["result"]
            every = (await call(2, "logsSubscribe", ["all"]))["result"]
            program = (await call(3, "programSubscribe", [
                localnet.program_id, {"encoding": "base64",
                                      "filters": [{"dataSize": ACCOUNT_SPACE}]}]))["result"]
            bad = await call(4, "logsSubscribe", [{"mentions": []}])
            assert bad["error"]["code"] == -32602
            await create_run(c, "subs", account)
            got = {}  # subscription -> its notifications, until none came for a second
            while True:
                try:
                    msg = json.loads(await asyncio.wait_for(ws.recv(), 1 if got else 30))
                except asyncio.TimeoutError:
                    break
                got.setdefault(msg["params"]["subscription"], []).append(
                    msg["params"]["result"]["value"])
            logs = got[mentions][0]
            assert logs["err"] is None and logs in got[every]
            assert any(f"Program {localnet.program_id} success" in line for line in logs["logs"])
            # the coordinator account (dataSize); not the run's instance PDA, also the program's
            assert [v["pubkey"] for v in got[program]] == [str(account.pubkey())]
            assert (await call(5, "logsUnsubscribe", [mentions]))["result"] is True
            assert (await call(6, "programUnsubscribe", [program]))["result"] is True
        await c.close()
    asyncio.run(go())


def test_64_connections_with_valid_malformed_and_oversized_requests(localnet):
    """64 connections at once: every valid request answered; every malformed one answered with
    its JSON-RPC error, its connection kept; an oversized body refused with 413 before it is
    read, and only that connection closed; the node's memory stays bounded."""
    host, port = address(localnet)
    status_file = f"/proc/{localnet.process.pid}/status"

    def rss_mib():
        with open(status_file) as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        return kib / 1024

    async def one(i):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            assert (await exchange(reader, writer, rpc("getSlot", i)))[1]["result"] >= 0
            status, reply, _ = await exchange(reader, writer, b'{"jsonrpc": "2.0", "id": 1,')
            assert status == 200 and reply["error"]["code"] == -32700  # not JSON
            _, reply, _ = await exchange(reader, writer, b'{"jsonrpc": "2.0", "id": 2}')
            assert reply["error"]["code"] == -32600  # no method
            _, reply, _ = await exchange(reader, writer, rpc("noSuchMethod", 3))
            assert reply["error"]["code"] == -32601
            if i % 4 == 3:  # 5 MiB announced, nothing sent: refused at once, and closed
                status, reply, lines = await exchange(reader, writer, b"", length=5 << 20)
                assert status == 413 and "connection: close" in (h.lower() for h in lines)
                assert await reader.read() == b""
                return "refused"
            assert (await exchange(reader, writer, rpc("getHealth", i)))[1]["result"] == "ok"
            return "served"
        finally:
            writer.close()

    async def go():
        return await asyncio.gather(*(one(i) for i in range(64)))
    before = rss_mib()
    for _ in range(3):
        outcomes = asyncio.run(go())
        assert outcomes.count("served") == 48 and outcomes.count("refused") == 16
    grown = rss_mib() - before
    assert grown < 64, f"the node grew by {grown:.0f} MiB over 192 connections"


def test_out_of_descriptors_the_node_waits_says_so_once_and_serves_again():
    """With the node's descriptor limit reached, a new connection waits in the listen backlog:
    each front-end thread says once that accepting fails (not every 50 ms while it retries),
    the connections it holds are still answered, and as they close the waiting ones are
    served."""
    with start_localnet() as net:
        pid = net.process.pid
        host, port = address(net)
        httpx.post(net.rpc_url, json={"jsonrpc": "2.0", "id": 0, "method": "getSlot"})
        time.sleep(0.2)  # the front-end threads' own descriptors are open by now
        limit = len(os.listdir(f"/proc/{pid}/fd")) + 4  # room for about 4 connections
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))

        async def go():
            conns = [await asyncio.open_connection(host, port) for _ in range(12)]
            asked = [asyncio.ensure_future(exchange(*conn, rpc("getSlot", i)))
                     for i, conn in enumerate(conns)]
            await asyncio.sleep(1.0)  # ~20 retries per front-end thread
            served = [i for i, a in enumerate(asked) if a.done()]
            assert 0 < len(served) < len(conns), f"{len(served)} of {len(conns)} served"
            failed = [line for line in net.output if "accept failed" in line]
            assert 1 <= len(failed) <= os.cpu_count(), failed
            # a connection it holds is still served
            assert (await exchange(*conns[served[0]], rpc("getSlot", 99)))[1]["result"] >= 0
            # each connection closes once answered, making room for a waiting one
            for i in served:
                conns[i][1].close()
            waiting = {asked[i]: i for i in range(len(conns)) if i not in served}
            while waiting:
                done, _ = await asyncio.wait(waiting, timeout=30,
                                             return_when=asyncio.FIRST_COMPLETED)
                assert done, f"{len(waiting)} connections never served"
                for a in done:
                    conns[waiting.pop(a)][1].close()
            return [a.result() for a in asked]

        replies = asyncio.run(go())
        assert all(reply["result"] >= 0 for _, reply, _ in replies)
        deadline = time.monotonic() + 5
        while not any("accepting again" in line for line in net.output):
            assert time.monotonic() < deadline, list(net.output)[-5:]
            time.sleep(0.05)
