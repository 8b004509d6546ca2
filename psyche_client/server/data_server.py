"""The TCP data server (data.toml): serves token batches to the run's clients.

Frames are a 4-byte big-endian length and a payload. The client sends one JSON request
  {"run_id", "signer": hex32, "start", "end", "signature": ed25519 over
   "psyche-data-request" || run_id || start u64 BE || end u64 BE}
and gets a JSON header {"ok": true, "rows", "seq_len", "token_size"} then a frame of the rows'
little-endian tokens, or {"ok": false, "error": "..."}. Only signers the `authorize` callback
accepts (the current epoch's clients) are served."""

import asyncio
import json
import struct

from psyche_coordinator_core.ops_json import loads as read_json

from ..data.local import LocalDataProvider
from ..data.provider import DataError
from ..data.tcp import MAX_HEADER, request_message
from ..data.token_files import DTYPES
from ..identity import verify


class DataServer:
    def __init__(self, data_config, run_id: str, authorize=lambda signer: True):
        self.cfg, self.run_id, self.authorize = data_config, run_id, authorize
        self.provider = LocalDataProvider(data_config.dir, data_config.token_size,
                                          data_config.seq_len, data_config.shuffle_seed)
        self.server = None

    async def start(self, host: str, port: int) -> int:
        self.server = await asyncio.start_server(self._serve, host, port)
        return self.server.sockets[0].getsockname()[1]

    def _answer(self, raw: bytes):
        try:
            req = read_json(raw)
            signer = bytes.fromhex(req["signer"])
            start, end = req["start"], req["end"]
            signature = bytes.fromhex(req["signature"])
            if type(start) is not int or type(end) is not int or not (
                    0 <= start < 1 << 64 and 0 <= end < 1 << 64):
                raise ValueError  # signed as u64s: wider ones cannot be (struct.error)
        except (ValueError, KeyError, TypeError):
            return {"ok": False, "error": "malformed request"}, None
        if req.get("run_id") != self.run_id:
            return {"ok": False, "error": f"this server serves run {self.run_id!r}"}, None
        message = request_message(self.run_id, start, end)
        if len(signer) != 32 or not verify(signer, message, signature):
            return {"ok": False, "error": "bad signature"}, None
        if not self.authorize(signer):
            return {"ok": False, "error": "not a client of this run's current epoch"}, None
        try:
            rows = self.provider.get_samples(start, end)
        except DataError as e:
            return {"ok": False, "error": str(e)}, None
        body = rows.astype(DTYPES[self.cfg.token_size]).tobytes()
        return {"ok": True, "rows": len(rows), "seq_len": self.cfg.seq_len,
                "token_size": self.cfg.token_size}, body

    async def _serve(self, reader, writer):
        try:
            (n,) = struct.unpack(">I", await reader.readexactly(4))
            if n > MAX_HEADER:
                head, body = {"ok": False, "error": f"request of {n} bytes is too large"}, None
            else:
                head, body = self._answer(await reader.readexactly(n))
            payload = json.dumps(head).encode()
            writer.write(struct.pack(">I", len(payload)) + payload)
            if body is not None:
                writer.write(struct.pack(">I", len(body)) + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
