"""A link with delay and loss between two network namespaces, in user space: what `tc netem`
does, for kernels built without it (this project's test machines: CONFIG_NET_SCH_NETEM is not
set, while TUN/TAP is).

    python -m tests.p2p.delayline NS_A:IF_A NS_B:IF_B DELAY_MS LOSS_PCT

makes two TAP devices, moves IF_A into namespace NS_A and IF_B into NS_B (the caller gives them
addresses), prints "ready", and then copies every Ethernet frame from one to the other after
DELAY_MS, dropping each with probability LOSS_PCT % (each direction on its own). It runs until
killed; the devices go with it."""

import asyncio
import fcntl
import os
import random
import struct
import subprocess
import sys

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000


def tap(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


def copy(loop, src: int, dst: int, delay: float, loss: float, rng: random.Random) -> None:
    def write(frame):
        try:
            os.write(dst, frame)
        except OSError:  # the device is down or its queue full: the frame is lost, as on a wire
            pass

    def readable():
        while True:
            try:
                frame = os.read(src, 65536)
            except BlockingIOError:
                return
            if rng.random() >= loss:
                loop.call_later(delay, write, frame)
    loop.add_reader(src, readable)


async def main(a: str, b: str, delay_ms: float, loss_pct: float) -> None:
    (ns_a, if_a), (ns_b, if_b) = a.split(":"), b.split(":")
    fds = []
    for ns, name in ((ns_a, if_a), (ns_b, if_b)):
        fds.append(tap(name))
        subprocess.run(["ip", "link", "set", name, "netns", ns], check=True)
    loop = asyncio.get_running_loop()
    rng = random.Random()
    copy(loop, fds[0], fds[1], delay_ms / 1000, loss_pct / 100, rng)
    copy(loop, fds[1], fds[0], delay_ms / 1000, loss_pct / 100, rng)
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    a, b, delay, loss = sys.argv[1:]
    asyncio.run(main(a, b, float(delay), float(loss)))
