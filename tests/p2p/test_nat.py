"""Peers behind NATs, in network namespaces made by the test (tests/p2p/netlab.py): the relay
and a STUN server (coturn) on the "internet", three home networks whose links have 50 ms of
delay and 1 % loss each way. Two peers behind endpoint-independent NATs learn their public
addresses from STUN and end on a direct path; a peer behind a symmetric NAT ends relayed; a
fourth peer, beside the first on its home network, may reach that one peer only (no relay, no
other peer), and still every peer gets every other's results, through forwarding. Skips only
where namespaces cannot be made (no root); a missing tool (nftables, coturn) is an error that
names it."""

import json
import os
import subprocess
import sys
import time

import pytest

from tests.p2p import netlab

pytest.importorskip("iroh")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RELAY_PORT, STUN_PORT, P2P_PORT = 3340, 3478, 29400


def start_stun(lab, ip=None):
    """coturn as a STUN server on the internet namespace's `ip` (default: its first)."""
    proc = subprocess.Popen(["ip", "netns", "exec", lab.public, "turnserver", "-S", "-n",
                             "--no-cli", "--no-tls", "--no-dtls", "-L", ip or lab.public_ip, "-p",
                             str(STUN_PORT), "--log-file", "stdout"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if f":{STUN_PORT}" in netlab.sh("ss", "-Hunl", ns=lab.public):
            return proc
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("coturn did not listen within 20 s")


def run_peers(lab, hosts, args, seconds=30):
    """One nat_peer per host (`args[i]`: its own extra arguments), each knowing the others by
    key: their final JSON lines."""
    seeds = [os.urandom(32) for _ in hosts]
    from psyche_client.identity import Identity
    ids = [Identity(s).public.hex() for s in seeds]
    procs = [subprocess.Popen(
        ["ip", "netns", "exec", host, sys.executable, "-m", "tests.p2p.nat_peer",
         "--seed", seed.hex(), "--seconds", str(seconds),
         *[a.format(*ids) for a in extra], *[p for p in ids if p != me]],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for host, seed, me, extra in zip(hosts, seeds, ids, args)]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=seconds + 120)
        assert p.returncode == 0, stderr[-3000:]
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return ids, out


def test_nat_kinds_end_direct_or_relayed_and_forwarding_reaches_a_cut_off_peer(nat_lab):
    from psyche_client.p2p.relay_server import start_relay

    (a, d), (b,), (c,) = nat_lab.home("eim", hosts=2), nat_lab.home("eim"), nat_lab.home("sym")
    addr_a, addr_d = nat_lab.address(a), nat_lab.address(d)
    nat_lab.block(d, allow=[addr_a])  # D reaches A, and nothing else: not the relay, not B or C
    stun = start_stun(nat_lab)
    try:
        with start_relay(nat_lab.public_ip, RELAY_PORT, netns=nat_lab.public) as relay:
            common = ["--relay", relay, "--stun", f"{nat_lab.public_ip}:{STUN_PORT}"]
            ids, results = run_peers(nat_lab, [a, b, c, d], [
                [*common, "--known", "{3}@" + f"{addr_d}:{P2P_PORT}"],
                common, common,
                ["--relay", relay, "--known", "{0}@" + f"{addr_a}:{P2P_PORT}"]])
    finally:
        stun.kill()
        stun.wait()
    (ia, ib, ic, _), (ra, rb, rc, rd) = ids, results
    print(json.dumps(results, indent=1))
    # each learnt its router's public address; the EIM routers kept the port
    assert ra["public"] == f"10.{nat_lab.net}.1.2:{P2P_PORT}"
    assert rb["public"] == f"10.{nat_lab.net}.2.2:{P2P_PORT}"
    assert rc["public"] and rc["public"].startswith(f"10.{nat_lab.net}.3.2:")
    assert ra["paths"][ib] == rb["paths"][ia] == "direct", (ra, rb)
    for r, other in ((ra, ic), (rb, ic), (rc, ia), (rc, ib)):
        assert r["paths"][other] == "relay", r
    assert rd["paths"][ia] == "direct" and rd["paths"][ib] is rd["paths"][ic] is None, rd
    # everyone got everyone's results (D's, and those to D, only through A), missed ones sent
    # again once a path was up; but for the last two, which a peer that started a little later
    # may publish after the receiver stopped counting (5 s after its own last one)
    published = {r["id"]: r["published"] for r in results}
    for r in results:
        for trainer in set(ids) - {r["id"]}:
            assert r["received"].get(trainer, 0) >= published[trainer] - 2, (trainer, r)
    assert ra["forwarded"] > 0
