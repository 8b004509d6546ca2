"""psyche-localnet's JSON-RPC front end: many connections at once are all served (an earlier
HTTP server could leave some unserved while others were kept alive), batches, bad requests."""

import asyncio
import json
import socket

import httpx
import pytest

pytestmark = pytest.mark.slow


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


def test_batches_and_bad_requests(localnet):
    with httpx.Client(timeout=30) as c:
        batch = [{"jsonrpc": "2.0", "id": 1, "method": "getHealth"},
                 {"jsonrpc": "2.0", "id": 2, "method": "noSuchMethod"}]
        replies = c.post(localnet.rpc_url, json=batch).json()
        assert replies[0]["result"] == "ok" and replies[1]["error"]["code"] == -32601
        bad = c.post(localnet.rpc_url, content=b"{not json").json()
        assert bad["error"]["code"] == -32700
        assert c.get(localnet.rpc_url + "/health").text == "ok"
    # a malformed request head gets a clear 400 and the connection is closed
    host, port = localnet.rpc_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        reply = s.recv(4096).decode()
    assert reply.startswith("HTTP/1.1 400") and json.loads(reply.split("\r\n\r\n", 1)[1])
