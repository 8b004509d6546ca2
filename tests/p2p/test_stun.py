"""The STUN client (psyche_client/p2p/stun.py) against a real STUN server, coturn, on
loopback, behind a UDP forwarder that loses the first requests: the client sends the same
transaction again (RFC 5389's retransmission) and learns the forwarder's address; a server
that never answers gives None within the timeout."""

import asyncio
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest

from psyche_client.p2p.stun import public_address

pytest.importorskip("aiostun")


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def coturn():
    """coturn as a plain STUN server on a free loopback port: its port."""
    if shutil.which("turnserver") is None:
        if os.geteuid() == 0:
            pytest.fail("coturn (turnserver) is missing: scripts/test installs it; "
                        "apt-get install coturn")
        pytest.skip("coturn (turnserver) is missing; scripts/test installs it as root")
    port = free_udp_port()
    proc = subprocess.Popen(["turnserver", "-S", "-n", "--no-cli", "--no-tls", "--no-dtls",
                             "-L", "127.0.0.1", "-p", str(port), "--log-file", "stdout"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while f"127.0.0.1:{port}" not in subprocess.run(
                ["ss", "-Hunl"], capture_output=True, text=True).stdout:
            assert time.monotonic() < deadline, "coturn did not listen within 20 s"
            time.sleep(0.05)
        yield port
    finally:
        proc.kill()
        proc.wait()


class LossyForwarder:
    """Forwards datagrams from one client to `upstream` and back, dropping the first `drop`
    requests. `.requests` holds every request it received, dropped or not."""

    def __init__(self, upstream: int, drop: int):
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(("127.0.0.1", 0))
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.bind(("127.0.0.1", 0))
        self.back.connect(("127.0.0.1", upstream))
        self.port, self.back_port = self.front.getsockname()[1], self.back.getsockname()[1]
        self.drop, self.requests, self.client, self.stopped = drop, [], None, False
        for sock, fn in ((self.front, self._forward), (self.back, self._answer)):
            sock.settimeout(0.2)
            threading.Thread(target=self._loop, args=(sock, fn), daemon=True).start()

    def _loop(self, sock, fn):
        while not self.stopped:
            try:
                data, addr = sock.recvfrom(2048)
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            fn(data, addr)

    def _forward(self, data, addr):
        self.client = addr
        self.requests.append(data)
        if len(self.requests) > self.drop:
            self.back.send(data)

    def _answer(self, data, _addr):
        if self.client:
            self.front.sendto(data, self.client)

    def close(self):
        self.stopped = True
        self.front.close()
        self.back.close()


@pytest.mark.slow
def test_lost_requests_are_sent_again_as_the_same_transaction(coturn):
    fwd = LossyForwarder(coturn, drop=2)
    try:
        got = asyncio.run(public_address([f"127.0.0.1:{fwd.port}"], free_udp_port(), timeout=6))
    finally:
        fwd.close()
    assert got == f"127.0.0.1:{fwd.back_port}"  # the address coturn saw: the forwarder's
    assert len(fwd.requests) == 3
    assert len({r[8:20] for r in fwd.requests}) == 1  # one transaction ID, sent three times


def test_a_server_that_never_answers_gives_none_within_the_timeout():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))
        t0 = time.monotonic()
        got = asyncio.run(public_address([f"127.0.0.1:{silent.getsockname()[1]}"],
                                         free_udp_port(), timeout=1.0))
        took = time.monotonic() - t0
        silent.settimeout(0)
        sent = []
        while True:
            try:
                sent.append(silent.recv(2048))
            except BlockingIOError:
                break
    assert got is None and took < 3
    assert len(sent) == 2  # at 0 s and 0.5 s; the next would be at 1.5 s, past the timeout
