"""Network namespaces that stand in for the internet and home routers, made and removed by a
test: a "public" namespace (the internet: the chain, the relay, the data and STUN servers on
its address), and home networks behind NATing routers, with netem delay and loss on the
links between them.

    internet (10.N.0.1 on lo; routes to every router)
      └── home link ── router i (wan 10.N.i.2; nftables masquerade; lan 192.168.i.1)
                            └── veth ── host i.j (192.168.i.(j+1), default via the router)

A home link is a veth pair, or with delay or loss a user-space delay line (tests/p2p/delayline.py:
two TAP devices and a process that copies frames between them late or not at all), since the
kernels here are built without `tc netem`.

A router's NAT is endpoint-independent ("eim": Linux masquerade keeps a source port's mapping
for every destination while it can) or symmetric ("sym": `masquerade random,fully-random`,
another port per flow). Either way the router drops unsolicited packets from the internet to
itself, as a home router does: without that, a peer's early hole-punching packet leaves a
conntrack entry that makes masquerade move our mapping to another port.

Needs root, `ip` (iproute2), `nft` (nftables) and /dev/net/tun; `available()` says why not."""

import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_COUNTER = itertools.count(1)

ROUTER_RULES = """flush ruleset
table ip nat {{
  chain postrouting {{
    type nat hook postrouting priority srcnat; policy accept;
    oifname "wan" masquerade{flags}
  }}
}}
table inet filter {{
  chain input {{
    type filter hook input priority filter; policy accept;
    iifname "wan" ct state new drop
  }}
}}
"""


def available():
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (Debian: iproute2, nftables)"
    if not os.path.exists("/dev/net/tun"):
        return "no /dev/net/tun (the delay lines are TAP devices)"
    probe = f"plab{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot make a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def sh(*cmd, ns=None, input=None):
    """Runs a command (in namespace `ns`); raises with its stderr when it fails."""
    full = (["ip", "netns", "exec", ns] if ns else []) + [str(c) for c in cmd]
    out = subprocess.run(full, capture_output=True, text=True, input=input)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(full)}: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout


class Lab:
    """The namespaces of one test; `close()` (or the context manager) removes them all."""

    def __init__(self, delay_ms=0, loss_pct=0.0, rate=None):
        n = os.getpid() % 200 + 20 + next(_COUNTER)  # a /16 of its own per lab
        self.prefix, self.net = f"pl{os.getpid() % 10000}x{n}", n
        self.delay_ms, self.loss_pct = delay_ms, loss_pct
        self.rate = rate  # e.g. "1gbit": each home link shaped so, both ways (tbf)
        self.public = f"{self.prefix}-pub"
        self.public_ip = f"10.{n}.0.1"
        self.namespaces = []
        self.homes = 0
        self._lines = []  # delay line processes
        self._extra = []  # more addresses of the internet namespace
        self._add_ns(self.public)
        sh("ip", "addr", "add", f"{self.public_ip}/32", "dev", "lo", ns=self.public)
        sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=self.public)

    def public_address(self) -> str:
        """One more address of the internet namespace (10.N.0.k), for a service that some
        hosts may reach and others not."""
        k = 1 + len(self._extra) + 1
        ip = f"10.{self.net}.0.{k}"
        sh("ip", "addr", "add", f"{ip}/32", "dev", "lo", ns=self.public)
        self._extra.append(ip)
        return ip

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _add_ns(self, name):
        sh("ip", "netns", "add", name)
        self.namespaces.append(name)
        sh("ip", "link", "set", "lo", "up", ns=name)

    def _link(self, a_ns, a_if, b_ns, b_if):
        """An Ethernet link between two namespaces: a veth pair, or a delay line."""
        if not (self.delay_ms or self.loss_pct):
            sh("ip", "link", "add", a_if, "netns", a_ns, "type", "veth", "peer", "name", b_if,
               "netns", b_ns)
            return
        tmp = f"{b_if[:8]}{len(self._lines)}{os.getpid() % 1000}"  # unique until it is moved
        proc = subprocess.Popen([sys.executable, "-m", "tests.p2p.delayline", f"{a_ns}:{a_if}",
                                 f"{b_ns}:{tmp}", str(self.delay_ms), str(self.loss_pct)],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        self._lines.append(proc)
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the delay line did not start: {proc.stderr.read()[-2000:]}")
        sh("ip", "link", "set", tmp, "name", b_if, ns=b_ns)

    def home(self, nat="eim", hosts=1) -> list:
        """A home network behind a router with `nat` ("eim" or "sym"), holding `hosts`
        machines: their namespaces (each reaches the internet through the router)."""
        if nat not in ("eim", "sym"):
            raise ValueError("nat must be eim or sym")
        self.homes += 1
        i, n = self.homes, self.net
        router = f"{self.prefix}-r{i}"
        self._add_ns(router)
        up, wan = f"{self.prefix}u{i}", "wan"
        self._link(self.public, up, router, wan)
        if self.rate:
            for ns, dev in ((self.public, up), (router, wan)):
                sh("tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", self.rate, "burst",
                   "1mb", "latency", "100ms", ns=ns)
        sh("ip", "addr", "add", f"10.{n}.{i}.1/24", "dev", up, ns=self.public)
        sh("ip", "link", "set", up, "up", ns=self.public)
        sh("ip", "addr", "add", f"10.{n}.{i}.2/24", "dev", wan, ns=router)
        sh("ip", "link", "set", wan, "up", ns=router)
        sh("ip", "route", "add", "default", "via", f"10.{n}.{i}.1", ns=router)
        sh("sysctl", "-qw", "net.ipv4.ip_forward=1", ns=router)
        sh("nft", "-f", "-", ns=router,
           input=ROUTER_RULES.format(flags=" random,fully-random" if nat == "sym" else ""))
        sh("ip", "link", "add", "lan", "netns", router, "type", "bridge")
        sh("ip", "addr", "add", f"192.168.{i}.1/24", "dev", "lan", ns=router)
        sh("ip", "link", "set", "lan", "up", ns=router)
        out = []
        for j in range(1, hosts + 1):
            host = f"{self.prefix}-h{i}x{j}"
            self._add_ns(host)
            port = f"{self.prefix}p{i}x{j}"
            sh("ip", "link", "add", port, "netns", router, "type", "veth", "peer", "name", "eth0",
               "netns", host)
            sh("ip", "link", "set", port, "master", "lan", ns=router)
            sh("ip", "link", "set", port, "up", ns=router)
            sh("ip", "addr", "add", f"192.168.{i}.{j + 1}/24", "dev", "eth0", ns=host)
            sh("ip", "link", "set", "eth0", "up", ns=host)
            sh("ip", "route", "add", "default", "via", f"192.168.{i}.1", ns=host)
            out.append(host)
        return out

    def router(self, i: int) -> str:
        """The namespace of home i's router (its internet side is 10.N.i.2)."""
        return f"{self.prefix}-r{i}"

    def forward_port(self, i: int, port: int, host_ip: str) -> None:
        """Home i's router forwards TCP `port` on its internet side to `host_ip` (a port
        forwarded by hand, as a contributor may do)."""
        sh("nft", "-f", "-", ns=self.router(i), input=f"""table ip nat {{
  chain prerouting {{
    type nat hook prerouting priority dstnat; policy accept;
    iifname "wan" tcp dport {port} dnat to {host_ip}:{port}
  }}
}}
""")

    def address(self, host) -> str:
        """A home host's own (private) address."""
        return sh("ip", "-4", "-o", "addr", "show", "dev", "eth0", ns=host).split()[3].split("/")[0]

    def block(self, host, allow=()):
        """`host` reaches nothing but the addresses in `allow` (and its own network's router,
        for the routes): its other outgoing packets are dropped."""
        rules = "\n".join(f"    ip daddr {a} accept" for a in allow)
        sh("nft", "-f", "-", ns=host, input=f"""table inet block {{
  chain output {{
    type filter hook output priority filter; policy drop;
    oifname "lo" accept
    ct state established,related accept
{rules}
  }}
}}
""")

    def close(self):
        for proc in self._lines:
            proc.kill()
            proc.wait()
        self._lines = []
        for name in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        self.namespaces = []
