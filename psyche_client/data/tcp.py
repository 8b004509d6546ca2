"""Tokens from a TCP data server (see psyche_client/server/data_server.py for the protocol)."""

import json
import socket
import struct

import numpy as np

from .provider import DataError, check_range
from .token_files import DTYPES

REQUEST_DOMAIN = b"psyche-data-request"
MAX_HEADER = 64 << 10


def request_message(run_id: str, start: int, end: int) -> bytes:
    return REQUEST_DOMAIN + run_id.encode() + struct.pack(">QQ", start, end)


def send_frame(sock, payload: bytes) -> None:
    sock.sendall(struct.pack(">I", len(payload)) + payload)


def recv_exact(sock, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise DataError("data server closed the connection")
        buf += chunk
    return bytes(buf)


def recv_frame(sock, limit: int) -> bytes:
    (n,) = struct.unpack(">I", recv_exact(sock, 4))
    if n > limit:
        raise DataError(f"frame of {n} bytes exceeds {limit}")
    return recv_exact(sock, n)


class TcpDataProvider:
    def __init__(self, address: str, run_id: str, identity, seq_len: int, token_size: int,
                 timeout: float = 30):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise DataError(f"data server address {address!r}: expected host:port")
        self.addr, self.run_id, self.identity = (host, int(port)), run_id, identity
        self.seq_len, self.token_size, self.timeout = seq_len, token_size, timeout

    def get_samples(self, start: int, end: int) -> np.ndarray:
        n = check_range(start, end)
        req = {"run_id": self.run_id, "signer": self.identity.public.hex(), "start": start,
               "end": end,
               "signature": self.identity.sign(request_message(self.run_id, start, end)).hex()}
        try:
            with socket.create_connection(self.addr, timeout=self.timeout) as sock:
                send_frame(sock, json.dumps(req).encode())
                head = json.loads(recv_frame(sock, MAX_HEADER))
                if not head.get("ok"):
                    raise DataError(f"data server refused [{start}, {end}]: {head.get('error')}")
                if (head.get("rows"), head.get("seq_len"), head.get("token_size")) != \
                        (n, self.seq_len, self.token_size):
                    raise DataError(f"data server answered with shape {head}, expected "
                                    f"{n}x{self.seq_len} of {self.token_size}-byte tokens")
                body = recv_frame(sock, n * self.seq_len * self.token_size)
        except OSError as e:
            raise DataError(f"data server {self.addr[0]}:{self.addr[1]}: {e}") from None
        if len(body) != n * self.seq_len * self.token_size:
            raise DataError("data server sent a short batch")
        tokens = np.frombuffer(body, DTYPES[self.token_size]).astype(np.int64)
        return tokens.reshape(n, self.seq_len)
