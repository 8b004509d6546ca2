"""Transactions per second through psyche-localnet over JSON-RPC, with 256 clients.

Starts the psyche-localnet binary on free ports (release build by default, built if missing),
funds a payer and 256 client keypairs at genesis, creates a run (create_account +
init_coordinator, set_paused(false)), lets all clients join_run and send warmup_witness (both as
concurrent bursts) until the run trains (RoundTrain, 256 participants), then measures, with the
same client code for every kind (pre-signed solders transactions, skip_preflight, at most
--concurrency requests in flight, one per HTTP connection; by default solana-py's
AsyncClient.send_raw_transaction, one transaction per request; --client httpx --batch K:
hand-built JSON-RPC batches of K; --client rust [--batch K]: the same requests, built
beforehand and sent by benchmarks/rpc_sender.rs, a few µs of CPU per request where
Python's clients take more than the node, whose two cores they share):

  tick      --ticks ticks signed by the 256 clients in turn (nothing due: the round lasts 1 h);
  witness   --rounds rounds: the round's 32 elected witnesses send their witness (blooms of all
            256 trainers) at once; a round admits only its elected witnesses, once each, so each
            burst is 32 transactions; the last one ends the round's training phase, a tick after
            round_witness_time (1 s) starts the next round;
  transfer  the baseline: system transfers between the funded clients, --ticks of them per
            repeat, and a burst of 32 after every witness burst.

Tick and transfer bursts alternate --repeat times. The node executes a transaction inside
sendTransaction, so the last reply of a burst is when all of it has landed; landed transactions
are counted afterwards with getSignatureStatuses (not timed). CPU time of the node and of the
client (this process, and rpc_sender's threads) is sampled per burst (they share the machine).

    python benchmarks/chain_tps.py [--ticks 2000] [--concurrency 32] [--rounds 10] [--repeat 3]
    python benchmarks/chain_tps.py --client httpx --batch 32    # less client, more node
    python benchmarks/chain_tps.py --client rust                # the node sets the rate

--compare [REF] measures this tree's node against one with REF's front end (default: the commit
before the front end moved to hyper/axum), in the same run: REF's localnet crate over this
commit's program and core (so that only the front end differs), unpacked and built under
~/.cache/psyche/chain-tps (once per REF and state of HEAD's program and workspace). Per client
mode (--modes; default rpc_sender with one and with 32 transactions per request, then
solana-py) both nodes run at once, set up alike, and take --pairs turns:
a tick burst, a transfer burst and --rounds witness rounds (each with its 32 transfers; a
32-transaction burst lasts ~30 ms, too short to compare alone) on one node, then on the other
(which goes first alternates); then --serial lone requests of transfers, one on each node in
turn (the front end's cost per request, which bursts hide; "one at a time", also compared
request pair by request pair). Bursts a few seconds apart share whatever else the
machine does, so the ratio within a pair is steadier than between whole runs (one node alone
moves ±10 % from run to run here). benchmarks/results/chain_tps.json: per kind the median of
the pairs' new/old tx/s with a 95 % bootstrap interval; the headline holds the lowest of the
modes whose client took under half the CPU per transaction of either node (there the node,
not the client, sets the rate; solana-py's takes ~4x the node's and stays in the modes'
figures).
"""

import argparse
import asyncio
import base64
import copy
import gc
import hashlib
import json
import logging
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
from solana.rpc.async_api import AsyncClient  # noqa: E402
from solana.rpc.types import TxOpts  # noqa: E402
from solders.keypair import Keypair  # noqa: E402
from solders.message import Message  # noqa: E402
from solders.signature import Signature  # noqa: E402
from solders.system_program import TransferParams, transfer  # noqa: E402
from solders.transaction import Transaction  # noqa: E402

from psyche_client.chain.localnet import LocalnetError, find_binary, parse_ready  # noqa: E402
from psyche_client.chain.program import ACCOUNT_SPACE, Coordinator, ProgramError  # noqa: E402
from psyche_coordinator_core import RoundCommittee, RunConfig, RunState, bloom_of  # noqa: E402

CLIENTS = 256
# The last commit whose node served HTTP with a thread per connection (httparse) and PubSub
# with a thread per websocket (tungstenite): the baseline of --compare.
OLD_FRONT_END = "6dba7cd"
# what the old node takes from HEAD (the rest of the workspace, unbuilt by -p psyche-localnet)
BUILT_FROM_HEAD = ("Cargo.toml", "Cargo.lock", "programs", "patches")
CACHE = Path.home() / ".cache" / "psyche" / "chain-tps"
RESULTS = REPO / "benchmarks" / "results" / "chain_tps.json"
# (client, transactions per request) of --compare: rpc_sender, where the node sets the rate,
# one and 32 transactions per request; and solana-py's client, what a Python user sees
MODES = [("rust", 1), ("rust", 32), ("solana-py", 1)]
CLIENT_KINDS = ("solana-py", "httpx", "rust")  # --client, and the clients of --modes
SEND = TxOpts(skip_preflight=True, skip_confirmation=True)
CONFIG = RunConfig(
    warmup_time=600, cooldown_time=10, max_round_train_time=3600, round_witness_time=1,
    epoch_time=86400, total_steps=10**6, min_clients=1, init_min_clients=CLIENTS,
    witness_nodes=0,  # 32 witnesses at 256 clients (witness_nodes may not exceed min_clients)
    global_batch_size_start=CLIENTS, global_batch_size_end=CLIENTS,
    waiting_for_members_extra_time=1).validate()


def log(msg):
    print(msg, flush=True)


def binary(path: str = None) -> Path:
    if path:
        return Path(path)
    try:
        return find_binary(rebuild=False, profile="release")
    except LocalnetError as e:
        sys.exit(f"chain_tps: {e}")


def start(path: Path, funded):
    """The node on free ports, `funded` keypairs credited at genesis. Its stdout (natively the
    program's msg! lines, one per instruction) goes to a temporary file, not a pipe."""
    out = tempfile.TemporaryFile(mode="w+")
    cmd = [str(path), "--rpc-port", "0", "--ws-port", "0"]
    for kp, sol in funded:
        cmd += ["--airdrop", f"{kp.pubkey()}={sol}"]
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        out.seek(0)
        ready = parse_ready(out.read(4096))
        if ready:
            return proc, ready[1]
        time.sleep(0.05)
    proc.kill()
    out.seek(0)
    sys.exit(f"psyche-localnet did not start:\n{out.read()[-2000:]}")


def cpu_seconds(pid: int) -> float:
    """CPU time of the process's live threads, in ns steps (schedstat; /proc/PID/stat counts
    10 ms ticks, as much as a 32-transaction burst takes). A thread that ended takes its time
    with it: the connections, and so the old node's threads, stay open through a burst."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # ended meanwhile
    return total / 1e9


class Bench:
    def __init__(self, coord: Coordinator, node_pid: int, args):
        self.coord, self.client, self.pid, self.rpc = coord, coord.client, node_pid, coord.rpc_url
        self.batch, self.raw = args.batch, args.client == "httpx"
        # --client rust: the lanes are rpc_sender's (opened in open()), Python's none
        self.sender = Sender(self.rpc, args.concurrency) if args.client == "rust" else None
        # --concurrency lanes, one HTTP connection each with one request in flight, opened one
        # after another (see open()) and never expired
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1,
                              keepalive_expiry=None)
        self.lanes = []
        for _ in range(0 if self.sender else args.concurrency):
            http = httpx.AsyncClient(timeout=60, limits=limits)
            client = AsyncClient(self.rpc, timeout=60)
            client._provider.session = http  # solana-py over that connection
            self.lanes.append((http, client))
        self.free = asyncio.Queue()
        self.rows = {}  # kind -> list of burst results

    async def open(self):
        """Opens the connections one at a time, before any burst, so no burst pays for a
        connection set-up. (The localnet's first HTTP server, tiny_http 0.12, could also leave
        connections that arrived together unserved; see benchmarks/README.md.)"""
        for lane in self.lanes:
            await lane[1].get_slot()
            self.free.put_nowait(lane)
        if self.sender:
            self.sender.open()

    async def close(self):
        for http, _ in self.lanes:
            await http.aclose()
        if self.sender:
            self.sender.close()

    def cpu(self, start: bool) -> tuple[float, float]:
        """CPU seconds of (the node, the client): this process, and rpc_sender's threads with
        --client rust. This process's own reading of /proc stays outside the client's
        interval: its time is read last at a `start`, first at an end."""
        def sender():
            return cpu_seconds(self.sender.proc.pid) if self.sender else 0.0

        if start:
            node, client = cpu_seconds(self.pid), sender()
            return node, client + time.process_time()
        me = time.process_time()
        client = me + sender()
        return cpu_seconds(self.pid), client

    async def blockhash(self, other_than=None):
        """The latest blockhash; with `other_than`, waits for the next slot's."""
        while True:
            h = (await self.client.get_latest_blockhash()).value.blockhash
            if h != other_than:
                return h
            await asyncio.sleep(0.05)

    @staticmethod
    def sign(kp: Keypair, ixs, blockhash) -> bytes:
        return bytes(Transaction([kp], Message.new_with_blockhash(ixs, kp.pubkey(), blockhash),
                                 blockhash))

    async def send(self, raws: list, errors: list, latencies: list) -> list:
        """Sends transactions in one request on a free lane; their signatures (None: refused
        before landing, e.g. a bad blockhash or a duplicate). Records the round trip."""
        if self.sender:
            got = self.sender.send([body(raws)])
            latencies.extend(got["lat"])
            return signatures(got["replies"][0], errors)
        http, client = await self.free.get()
        t = time.perf_counter()
        try:
            if not self.raw:
                try:
                    return [(await client.send_raw_transaction(raws[0], opts=SEND)).value]
                except Exception as e:
                    errors.append(f"{type(e).__name__}: {e}")
                    return [None]
            reply = (await http.post(self.rpc, content=body(raws),
                                     headers={"Content-Type": "application/json"})).json()
        finally:
            latencies.append(time.perf_counter() - t)
            self.free.put_nowait((http, client))
        return signatures(reply, errors)

    async def burst(self, kind: str, txs: list) -> dict:
        """Sends pre-signed transactions, `batch` per request, one request per lane at a time."""
        latencies, errors = [], []
        chunks = [txs[i:i + self.batch] for i in range(0, len(txs), self.batch)]
        bodies = [body(c) for c in chunks] if self.sender else None
        gc.collect()  # not in the middle of a burst: building it left garbage behind
        cpu0 = self.cpu(start=True)
        t0 = time.perf_counter()
        if self.sender:
            # its own clock: from handing out the first body to the last reply (this side's
            # file, pipe and JSON are the same for both nodes, and would pull ratios to 1)
            got = self.sender.send(bodies)
            wall = got["wall"]
        else:
            replies = await asyncio.gather(*(self.send(c, errors, latencies) for c in chunks))
            wall = time.perf_counter() - t0
        cpu1 = self.cpu(start=False)
        cpu_node, cpu_me = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
        if self.sender:
            latencies = got["lat"]
            replies = [signatures(r, errors) for r in got["replies"]]
        sigs = [s for chunk in replies for s in chunk]
        sent = [s for s in sigs if s is not None]
        landed = failed = 0
        for i in range(0, len(sent), 256):
            for st in (await self.client.get_signature_statuses(sent[i:i + 256])).value:
                if st is not None:
                    landed += st.err is None
                    failed += st.err is not None
        r = dict(n=len(txs), landed=landed, failed=failed, refused=len(errors), wall=wall,
                 lat=latencies, cpu_node=cpu_node, cpu_me=cpu_me)
        self.rows.setdefault(kind, []).append(r)
        note = f", first refusal: {errors[0]}" if errors else ""
        log(f"  {kind}: {len(txs)} tx in {wall:.3f} s = {len(txs) / wall:,.0f} tx/s, landed "
            f"{landed}, failed {failed}, refused {len(errors)}; node CPU {cpu_node:.2f} s, "
            f"client CPU {cpu_me:.2f} s{note}")
        return r

    async def tick_until(self, payer, instance, account, done, timeout=30.0):
        """Ticks (setup, not measured) until `done(state)`; returns that state."""
        deadline = time.monotonic() + timeout
        while True:
            st = await self.coord.fetch_state(account)
            if done(st):
                return st
            if time.monotonic() > deadline:
                sys.exit(f"the run did not advance: {st.run_state.name} at step {st.step}")
            try:
                await self.coord.send([self.coord.ix_tick(payer.pubkey(), instance, account)])
            except ProgramError as e:
                if e.name != "AlreadyProcessed":  # the same tick again within one slot
                    raise
            await asyncio.sleep(0.2)


def body(raws: list) -> str:
    """The JSON-RPC request sending these transactions: one call, or a batch of them."""
    calls = [{"jsonrpc": "2.0", "id": i, "method": "sendTransaction",
              "params": [base64.b64encode(raw).decode(),
                         {"encoding": "base64", "skipPreflight": True}]}
             for i, raw in enumerate(raws)]
    return json.dumps(calls if len(calls) > 1 else calls[0], separators=(",", ":"))


def signatures(reply, errors: list) -> list:
    """The signatures a sendTransaction reply (or batch) names, in the calls' order; None
    for each call refused, its message appended to `errors`."""
    out = []
    for r in sorted(reply if isinstance(reply, list) else [reply], key=lambda r: r["id"]):
        if "result" in r:
            out.append(Signature.from_string(r["result"]))
        else:
            errors.append(r["error"]["message"])
            out.append(None)
    return out


class Sender:
    """benchmarks/rpc_sender.rs, built with rustc under CACHE (once per version of its
    source) and run beside the node: `send` hands it a burst of request bodies and returns
    its report (wall time, round trips, replies)."""

    SOURCE = REPO / "benchmarks" / "rpc_sender.rs"

    def __init__(self, rpc: str, connections: int):
        self.addr = rpc.split("//", 1)[1].rstrip("/")  # host:port
        self.connections, self.proc = connections, None
        self.dir = tempfile.TemporaryDirectory(prefix="chain-tps-")

    @classmethod
    def binary(cls) -> Path:
        out = CACHE / f"rpc-sender-{hashlib.sha256(cls.SOURCE.read_bytes()).hexdigest()[:12]}"
        if not out.exists():
            CACHE.mkdir(parents=True, exist_ok=True)
            log(f"building {out} with rustc")
            tmp = out.with_suffix(".tmp")
            # panic=abort: a thread that panics ends it, and `send` reports that at once
            subprocess.run(["rustc", "--edition", "2021", "-C", "opt-level=3", "-C",
                            "panic=abort", "-o", str(tmp), str(cls.SOURCE)], check=True)
            tmp.rename(out)
        return out

    def open(self):
        """Starts it; it opens its connections one after another before saying ready."""
        self.proc = subprocess.Popen([str(self.binary()), self.addr, str(self.connections)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            sys.exit(f"rpc_sender did not start (exit {self.proc.wait()})")

    def send(self, bodies: list) -> dict:
        path = Path(self.dir.name) / "burst"
        path.write_text("\n".join(bodies) + "\n")
        self.proc.stdin.write(f"{path}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            sys.exit(f"rpc_sender failed (exit {self.proc.wait()}); its error is above")
        return json.loads(line)

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait()
        self.dir.cleanup()


def summary(rows, kind):
    """tx/s per burst (median, min, max), latency percentiles (ms), CPU per transaction (us)."""
    rs = rows[kind]
    rates = [r["n"] / r["wall"] for r in rs]
    lat = sorted(x for r in rs for x in r["lat"])
    n = sum(r["n"] for r in rs)
    return dict(
        bursts=len(rs), n=n, landed=sum(r["landed"] for r in rs),
        bad=sum(r["failed"] + r["refused"] for r in rs),
        tps=statistics.median(rates), lo=min(rates), hi=max(rates),
        burst_ms=statistics.median(r["wall"] for r in rs) * 1e3,
        p50=lat[len(lat) // 2] * 1e3, p90=lat[int(len(lat) * 0.9)] * 1e3,
        node_us=sum(r["cpu_node"] for r in rs) / n * 1e6,
        me_us=sum(r["cpu_me"] for r in rs) / n * 1e6)


class Session:
    """One node, set up for measuring: started with the payer and the 256 clients funded, the
    run created and trained into (all clients joined and warmed up), connections open. Each
    method then sends one measured burst, recorded in `bench.rows`."""

    def __init__(self, args, path: Path):
        self.args, self.path = args, path
        self.payer, self.clients = Keypair(), [Keypair() for _ in range(CLIENTS)]
        self.by_signer = {bytes(kp.pubkey()): kp for kp in self.clients}
        self.seq = 0  # transfers sent: each one's lamports differ, so no two are the same tx
        self.proc = self.coord = self.bench = None

    async def open(self) -> "Session":
        self.proc, rpc = start(self.path, [(self.payer, 1000)]
                               + [(kp, 10) for kp in self.clients])
        self.coord = coord = Coordinator(rpc, self.payer)
        self.bench = b = Bench(coord, self.proc.pid, self.args)
        payer = self.payer
        await b.open()
        log(f"node ready at {rpc}, {self.args.concurrency} connections open; creating the run")
        account = Keypair()
        self.instance = instance = coord.instance_key("tps")
        rent = await coord.rent_exempt(ACCOUNT_SPACE)
        await coord.send([coord.ix_create_account(account.pubkey(), rent),
                          coord.ix_init_coordinator("tps", account.pubkey(), payer.pubkey(),
                                                    payer.pubkey(), True, CONFIG, 7)],
                         signers=[account])
        await coord.send([coord.ix_set_paused(payer.pubkey(), instance, account.pubkey(), False)])
        self.acct = acct = account.pubkey()

        log(f"{CLIENTS} clients join, then warmup_witness (setup bursts, also measured)")
        h = await b.blockhash()
        await b.burst("join_run (setup)", [
            b.sign(kp, [coord.ix_join_run(kp.pubkey(), instance, acct, bytes([i]) * 32)], h)
            for i, kp in enumerate(self.clients)])
        st = await b.tick_until(payer, instance, acct,
                                lambda s: s.run_state != RunState.WaitingForMembers)
        index = {c.signer: i for i, c in enumerate(st.clients)}
        assert len(index) == CLIENTS, f"{len(index)} clients in the epoch"
        await b.burst("warmup_witness (setup)", [
            b.sign(kp, [coord.ix_warmup_witness(kp.pubkey(), instance, acct,
                                                index[bytes(kp.pubkey())])], h)
            for kp in self.clients])
        st = await b.tick_until(payer, instance, acct, lambda s: s.run_state == RunState.RoundTrain)
        log(f"RoundTrain at step {st.step} with {len(st.clients)} clients")
        self.ticks = [coord.ix_tick(kp.pubkey(), instance, acct) for kp in self.clients]
        # what a witness of a full round attests: every trainer and one commitment each
        self.participants = bloom_of(bytes(kp.pubkey()).hex() for kp in self.clients)
        self.broadcast = bloom_of(bytes([i]).hex() * 32 for i in range(CLIENTS))
        return self

    async def close(self):
        try:
            if self.bench is not None:
                await self.bench.close()
            if self.coord is not None:
                await self.coord.close()
        finally:
            if self.proc is not None:
                self.proc.terminate()
                self.proc.wait()

    def _transfers(self, n: int, h) -> list:
        txs = []
        for i in range(n):
            self.seq += 1
            src, dst = self.clients[i % CLIENTS], self.clients[(i + 1) % CLIENTS]
            ix = transfer(TransferParams(from_pubkey=src.pubkey(), to_pubkey=dst.pubkey(),
                                         lamports=1000 + self.seq))
            txs.append(self.bench.sign(src, [ix], h))
        return txs

    async def tick_burst(self) -> dict:
        """--ticks ticks, the clients in turn; a client ticks once per blockhash, so the burst
        needs ticks/256 blockhashes (one per slot), collected before it."""
        b, n = self.bench, self.args.ticks
        hashes = [await b.blockhash()]
        while len(hashes) * CLIENTS < n:
            hashes.append(await b.blockhash(other_than=hashes[-1]))
        return await b.burst("tick", [b.sign(self.clients[i % CLIENTS], [self.ticks[i % CLIENTS]],
                                             hashes[i // CLIENTS]) for i in range(n)])

    async def transfer_burst(self) -> dict:
        h = await self.bench.blockhash()
        return await self.bench.burst("system transfer", self._transfers(self.args.ticks, h))

    async def lone_request(self, h) -> tuple[float, float, float]:
        """One request of transfers (`batch` of them, signed beforehand) with nothing else in
        flight, where the front end's cost per request shows (a burst hides it): its round
        trip, and the CPU seconds it took the node and the client."""
        errors, latency, txs = [], [], self._transfers(self.bench.batch, h)
        cpu0 = self.bench.cpu(start=True)
        sigs = await self.bench.send(txs, errors, latency)
        cpu1 = self.bench.cpu(start=False)
        if errors or None in sigs:
            sys.exit(f"a lone request was refused: {errors[:1]}")
        return latency[0], cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]

    async def witness_round(self) -> tuple[dict, dict]:
        """The round's elected witnesses at once (blooms of all 256 trainers), then a burst of
        as many transfers; ticks (not measured) until the next round trains."""
        b, coord, acct = self.bench, self.coord, self.acct
        st = await coord.fetch_state(acct)
        assert st.run_state == RunState.RoundTrain, st.run_state
        elected = RoundCommittee(st.current_round, st.config.witness_nodes, 0).witness_indices()
        h = await b.blockhash()
        txs = []
        for i in elected:
            kp = self.by_signer[st.clients[i].signer]
            txs.append(b.sign(kp, [coord.ix_witness(kp.pubkey(), self.instance, acct, i, st.step,
                                                     self.participants, self.broadcast, bytes(32),
                                                     bytes(32))], h))
        witness = await b.burst(f"witness ({len(elected)} elected)", txs)
        transfers = await b.burst(f"system transfer ({len(elected)})",
                                  self._transfers(len(elected), h))
        step = st.step
        await b.tick_until(self.payer, self.instance, acct,
                           lambda s: s.step == step + 1 and s.run_state == RunState.RoundTrain)
        return witness, transfers


async def run(args, path: Path):
    log(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; node {path}")
    s = Session(args, path)
    try:
        await s.open()
        for rep in range(args.repeat):
            log(f"repeat {rep + 1}/{args.repeat}")
            await s.tick_burst()
            await s.transfer_burst()
        log(f"{args.rounds} witness rounds, each followed by a burst of 32 transfers")
        for _ in range(args.rounds):
            await s.witness_round()
        load = os.getloadavg()[0]
    finally:
        await s.close()
    return s.bench.rows, load


def report(rows, load, args):
    kinds = list(rows)
    witness = next(k for k in kinds if k.startswith("witness"))
    burst = next(k for k in kinds if k.startswith("system transfer ("))
    base = {k: "system transfer" for k in kinds}
    base[witness] = base[burst] = burst
    s = {k: summary(rows, k) for k in kinds}
    print(f"\nclient {args.client}, {args.batch} tx per request, {args.concurrency} requests in "
          f"flight at most (one per connection); load average at the end: "
          f"{load:.2f}; tx/s is per burst (median [min-max] over bursts); x baseline against "
          f"'{base['tick']}' (or '{burst}' for the witness bursts)")
    print(f"{'kind':<26} {'bursts':>6} {'tx':>6} {'landed':>6} {'bad':>4} {'tx/s':>7} "
          f"{'[min-max]':>13} {'x base':>6} {'burst ms':>8} {'p50 ms':>7} {'p90 ms':>7} "
          f"{'node us/tx':>10} {'client us/tx':>12}")
    for k in kinds:
        x = s[k]
        ratio = x["tps"] / s[base[k]]["tps"] if base[k] in s else float("nan")
        print(f"{k:<26} {x['bursts']:>6} {x['n']:>6} {x['landed']:>6} {x['bad']:>4} "
              f"{x['tps']:>7,.0f} {x['lo']:>6,.0f}-{x['hi']:<6,.0f} {ratio:>6.2f} "
              f"{x['burst_ms']:>8.1f} {x['p50']:>7.2f} {x['p90']:>7.2f} {x['node_us']:>10.0f} "
              f"{x['me_us']:>12.0f}")
    print("burst ms: from the first send to the last reply, when all of the burst has landed "
          "(median); p50/p90: one request's round trip on its connection; us/tx: CPU time per "
          "transaction")


def git(*args) -> str:
    return subprocess.run(["git", *args], cwd=REPO, check=True, capture_output=True,
                          text=True).stdout.strip()


def build_at(ref: str):
    """The release node with commit `ref`'s front end: (REF's full sha, binary). REF's
    `localnet/` crate (the RPC and PubSub servers and the chain around the runtime) over HEAD's
    other sources (the program, the core, the workspace), so that both nodes run the same
    program and only the front end differs: since REF the program has moved (its id, the
    config's layout, the elections), and a node built wholly from REF no longer runs this
    tree's client's transactions. Unpacked with git archive and built once per REF and HEAD
    under CACHE, with its own cargo target directory; HEAD's part is named by the git objects
    of BUILT_FROM_HEAD, so commits that leave those alone share one build."""
    sha = git("rev-parse", "--verify", f"{ref}^{{commit}}")
    head = git("rev-parse", "HEAD")
    # keyed by what the build takes from HEAD (not HEAD itself: a commit elsewhere reuses it)
    base = hashlib.sha256(git("rev-parse", *(f"HEAD:{p}" for p in BUILT_FROM_HEAD)).encode())
    tag = f"{sha[:12]}-on-{base.hexdigest()[:12]}"
    out = CACHE / f"psyche-localnet-{tag}"
    if out.exists():
        return sha, out
    src = CACHE / "src" / tag
    if not (src / "Cargo.toml").exists():
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir(parents=True)
        def unpack(commit, *paths):
            archive = subprocess.run(["git", "archive", commit, *paths], cwd=REPO, check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)

        unpack(head)
        shutil.rmtree(src / "localnet")
        unpack(sha, "localnet")
    log(f"building psyche-localnet with {sha[:12]}'s front end on {head[:12]} (release; the "
        "first time takes minutes)")
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "psyche-localnet"], cwd=src,
                   check=True, env={**os.environ, "CARGO_TARGET_DIR": str(CACHE / "target")})
    shutil.copy2(CACHE / "target" / "release" / "psyche-localnet", out)
    return sha, out


def interval(ratios: list, draws: int = 10000) -> tuple[float, float]:
    """A 95 % interval of the median of paired ratios (percentile bootstrap, fixed seed)."""
    rng = random.Random(0)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(draws))
    return meds[int(draws * 0.025)], meds[int(draws * 0.975) - 1]


async def paired(args, nodes: dict) -> dict:
    """Both nodes up at once, set up alike; then --pairs times one turn on each node back to
    back (a tick burst, a transfer burst, --rounds witness rounds; which goes first
    alternates), so whatever else the machine does weighs on both; then --serial lone
    requests on each node in turn. -> ({kind: [((old tx/s, old node CPU s/tx, client CPU
    s/tx), (the same of new)) per pair]}, [old/new round trip per pair of lone requests])."""
    sessions = {}
    try:
        for which, path in nodes.items():
            log(f"-- {which} node: {path}")
            sessions[which] = Session(args, path)  # closed below even if its set-up fails
            await sessions[which].open()
        pairs, lone = {}, []  # lone: old/new round trip of each pair of lone requests
        for i in range(args.pairs):
            order = ("old", "new") if i % 2 == 0 else ("new", "old")
            log(f"pair {i + 1}/{args.pairs} ({order[0]} first)")
            got = {}
            for which in order:
                s = sessions[which]
                turn = {"tick": [await s.tick_burst()], "transfer": [await s.transfer_burst()],
                        "witness": [], "transfer (32)": []}
                for _ in range(args.rounds):
                    witness, transfers = await s.witness_round()
                    turn["witness"].append(witness)
                    turn["transfer (32)"].append(transfers)
                got[which] = turn
            for kind in got["old"]:  # a turn's tx over its bursts' time, CPU per tx
                def total(w, key):
                    return sum(b[key] for b in got[w][kind])

                pairs.setdefault(kind, []).append(tuple(
                    (total(w, "n") / total(w, "wall"), total(w, "cpu_node") / total(w, "n"),
                     total(w, "cpu_me") / total(w, "n")) for w in ("old", "new")))
            # --serial lone requests, old and new in turn (order alternating): each request's
            # pair is a few ms apart, closer than any burst's
            hashes = {w: await s.bench.blockhash() for w, s in sessions.items()}
            each = {"old": [], "new": []}  # (round trip, node CPU, client CPU) per request
            for k in range(args.serial):
                for w in (order if k % 2 == 0 else order[::-1]):
                    each[w].append(await sessions[w].lone_request(hashes[w]))
            n = args.serial * args.batch
            pairs.setdefault("one at a time", []).append(tuple(
                (n / sum(r[0] for r in each[w]), sum(r[1] for r in each[w]) / n,
                 sum(r[2] for r in each[w]) / n) for w in ("old", "new")))
            lone.extend(old[0] / new[0] for old, new in zip(each["old"], each["new"]))
        for which, s in sessions.items():
            print(f"\n{which} node")
            report(s.bench.rows, os.getloadavg()[0], args)
        return pairs, lone
    finally:
        for s in sessions.values():
            await s.close()


def compare(args, parser):
    """The old node (args.compare) against this tree's, in paired turns per client mode."""
    if args.binary:
        parser.error("--compare builds both nodes: leave out --binary")
    old_sha, old = build_at(args.compare)
    try:
        new = find_binary(rebuild=True, profile="release")  # this tree, rebuilt if stale
    except LocalnetError as e:
        sys.exit(f"chain_tps: {e}")
    new_rev = git("describe", "--always", "--dirty", "--abbrev=12")
    log(f"old node: {old_sha[:12]} ({old}); new node: {new_rev} ({new})")
    modes, headline, headline_modes = {}, {}, []
    for client, batch in args.modes:
        margs = copy.copy(args)
        margs.client, margs.batch = client, batch
        mode = f"{client} x{batch}"
        log(f"\n== {mode}")
        pairs, lone = asyncio.run(paired(margs, {"old": old, "new": new}))
        kinds, client_vs_node = {}, {}
        for kind, ps in pairs.items():
            ratios = [n[0] / o[0] for o, n in ps]
            us = {w: round(statistics.median(p[i][1] for p in ps) * 1e6, 1)
                  for i, w in enumerate(("old", "new"))}
            client_us = round(statistics.median(p[i][2] for p in ps for i in (0, 1)) * 1e6, 1)
            client_vs_node[kind] = client_us / min(us.values())
            cpu = [n[1] / o[1] for o, n in ps]
            lo, hi = interval(ratios)
            kinds[kind] = {"new_vs_old": statistics.median(ratios), "interval_95": [lo, hi],
                           "node_cpu_per_tx_new_vs_old": round(statistics.median(cpu), 4),
                           "node_cpu_interval_95": [round(x, 4) for x in interval(cpu)],
                           "slower_in": sum(r < 1 for r in ratios), "pairs": len(ratios),
                           "old_tps": statistics.median(o[0] for o, _ in ps),
                           "new_tps": statistics.median(n[0] for _, n in ps),
                           "old_node_us_per_tx": us["old"], "new_node_us_per_tx": us["new"],
                           "client_us_per_tx": client_us,
                           "client_cpu_vs_node": round(client_vs_node[kind], 3),
                           "ratios": [round(r, 4) for r in ratios]}
        lo, hi = interval(lone, draws=2000)
        kinds["one at a time"]["per_request"] = {
            "new_vs_old": round(statistics.median(lone), 4), "interval_95": [lo, hi],
            "slower_in": sum(r < 1 for r in lone), "requests": len(lone)}
        modes[mode] = kinds
        # The front end sets a burst's rate only where the client needs well under the
        # node's CPU per transaction (here under half): else the client, on the same two
        # cores, takes them from the node and sets the rate itself.
        if not all(client_vs_node[k] < 0.5 for k in ("tick", "witness", "transfer")):
            continue
        headline_modes.append(mode)
        for name, key in (("tick", "tick"), ("witness", "witness"), ("transfer", "transfer"),
                          ("one at a time", "one_at_a_time")):
            # lone requests: compared request pair by request pair
            k = kinds[name].get("per_request", kinds[name])
            key = f"{key}_tps_new_vs_old"
            if key not in headline or k["new_vs_old"] < headline[key]:
                headline[key] = round(k["new_vs_old"], 4)
                headline[f"{key}_low"] = round(k["interval_95"][0], 4)
                headline[f"{key}_high"] = round(k["interval_95"][1], 4)
    result = {
        "headline": headline,
        "what": "tx/s of this tree's psyche-localnet over the old front end's: the median over "
                "paired turns (one on each node, back to back: a tick burst, a transfer "
                "burst, --rounds witness rounds with their 32 transfers; then --serial lone "
                "requests of transfers on each node in turn) of new/old tx/s, with "
                "a 95 % bootstrap interval of that median, per client mode; the headline holds "
                "the lowest of the modes in headline_modes (and that mode's interval): those "
                "whose client spent under half the CPU per transaction of either node in tick, "
                "witness and transfer bursts, so that the node set the rate (the client "
                "shares the machine's cores)",
        "headline_modes": headline_modes,
        "old_front_end_commit": old_sha, "old_built_on": git("rev-parse", "HEAD"),
        "new": new_rev, "pairs": args.pairs, "ticks": args.ticks, "rounds": args.rounds,
        "serial": args.serial,
        "concurrency": args.concurrency, "machine": f"{os.cpu_count()} CPUs", "modes": modes,
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print("\nnew / old tx/s, median over paired turns [95 % interval] (pairs where new was "
          "slower):")
    for mode, kinds in modes.items():
        print(f"  {mode}: " + ", ".join(
            f"{kind} {k['new_vs_old']:.3f} [{k['interval_95'][0]:.3f}-{k['interval_95'][1]:.3f}]"
            f" ({k['slower_in']}/{k['pairs']}; node us/tx {k['old_node_us_per_tx']:.0f} -> "
            f"{k['new_node_us_per_tx']:.0f}, x{k['node_cpu_per_tx_new_vs_old']:.3f}; client "
            f"{k['client_us_per_tx']:.0f})"
            for kind, k in kinds.items()))
        r = kinds["one at a time"]["per_request"]
        print(f"    one at a time, per request: {r['new_vs_old']:.3f} [{r['interval_95'][0]:.3f}"
              f"-{r['interval_95'][1]:.3f}] ({r['slower_in']}/{r['requests']})")
    if not headline:
        sys.exit(f"no mode left the node setting the rate (client CPU per tx under half the "
                 f"node's): no headline; figures in {RESULTS}")
    print(f"headline (lowest of {', '.join(headline_modes)}): {headline}; written to {RESULTS}")


def modes(text: str) -> list:
    """--modes: "rust:1,solana-py:1" -> [("rust", 1), ("solana-py", 1)]."""
    out = []
    for item in text.split(","):
        client, _, batch = item.partition(":")
        if client not in CLIENT_KINDS or not batch.isdigit() or int(batch) < 1:
            raise argparse.ArgumentTypeError(f"{item!r}: want CLIENT:BATCH, CLIENT one of "
                                             + ", ".join(CLIENT_KINDS))
        if client == "solana-py" and batch != "1":
            raise argparse.ArgumentTypeError(f"{item!r}: solana-py sends one per request")
        out.append((client, int(batch)))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", help="psyche-localnet binary (default: the release build under "
                   "$CARGO_TARGET_DIR or ~/.cache/psyche/cargo-target, built if missing)")
    p.add_argument("--ticks", type=int, default=2000,
                   help="ticks per tick burst, and transfers per transfer burst (default 2000)")
    p.add_argument("--concurrency", type=int, default=32,
                   help="requests in flight at most, each on its own HTTP connection (default 32)")
    p.add_argument("--client", choices=CLIENT_KINDS, default="solana-py",
                   help="solana-py: AsyncClient.send_raw_transaction, one transaction per "
                   "request (default); httpx: hand-built JSON-RPC requests, --batch per "
                   "request; rust: the same requests sent by benchmarks/rpc_sender.rs (built "
                   "with rustc), whose few µs per request leave the node's cores to the node")
    p.add_argument("--batch", type=int, default=1,
                   help="sendTransaction calls per JSON-RPC request (a batch), httpx and rust")
    p.add_argument("--rounds", type=int, default=None,
                   help="witness rounds (default 10; with --compare, per node and pair, "
                        "default 4)")
    p.add_argument("--repeat", type=int, default=3,
                   help="tick and transfer bursts, alternating (default 3)")
    p.add_argument("--compare", nargs="?", const=OLD_FRONT_END, metavar="REF",
                   help="measure this tree's node against one with REF's front end (REF's "
                   "localnet crate on this commit's program), in the same run (default REF: "
                   f"{OLD_FRONT_END}, the last thread-per-connection front end); writes "
                   f"{RESULTS.relative_to(REPO)}")
    p.add_argument("--serial", type=int, default=100,
                   help="--compare: lone requests per pair and node, old and new in turn "
                   "(default 100)")
    p.add_argument("--modes", type=modes, default=MODES,
                   help="--compare: client modes, CLIENT:BATCH separated by commas (default "
                   + ",".join(f"{c}:{b}" for c, b in MODES) + ")")
    p.add_argument("--pairs", type=int, default=12,
                   help="--compare: paired turns per client mode (default 12)")
    args = p.parse_args()
    # find_binary says when it builds the node (the first time takes minutes)
    logging.basicConfig(format="%(message)s", stream=sys.stdout)
    logging.getLogger("psyche_client.chain.localnet").setLevel(logging.INFO)
    if args.batch != 1 and args.client == "solana-py":
        p.error("--batch needs --client httpx or rust")
    if args.rounds is None:
        args.rounds = 4 if args.compare else 10
    if args.compare:
        compare(args, p)
        return
    rows, load = asyncio.run(run(args, binary(args.binary)))
    report(rows, load, args)


if __name__ == "__main__":
    main()
