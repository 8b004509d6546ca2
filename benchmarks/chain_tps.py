"""Transactions per second through psyche-localnet over JSON-RPC, with 256 clients.

Starts the psyche-localnet binary on free ports (release build by default, built if missing),
funds a payer and 256 client keypairs at genesis, creates a run (create_account +
init_coordinator, set_paused(false)), lets all clients join_run and send warmup_witness (both as
concurrent bursts) until the run trains (RoundTrain, 256 participants), then measures, with the
same client code for every kind (pre-signed solders transactions, skip_preflight, at most
--concurrency requests in flight, one per HTTP connection; by default solana-py's
AsyncClient.send_raw_transaction, one transaction per request; --client httpx --batch K:
hand-built JSON-RPC batches of K):

  tick      --ticks ticks signed by the 256 clients in turn (nothing due: the round lasts 1 h);
  witness   --rounds rounds: the round's 32 elected witnesses send their witness (blooms of all
            256 trainers) at once; a round admits only its elected witnesses, once each, so each
            burst is 32 transactions; the last one ends the round's training phase, a tick after
            round_witness_time (1 s) starts the next round;
  transfer  the baseline: system transfers between the funded clients, --ticks of them per
            repeat, and a burst of 32 after every witness burst.

Tick and transfer bursts alternate --repeat times. The node executes a transaction inside
sendTransaction, so the last reply of a burst is when all of it has landed; landed transactions
are counted afterwards with getSignatureStatuses (not timed). CPU time of the node and of this
process is sampled per burst (both share the machine).

    python benchmarks/chain_tps.py [--ticks 2000] [--concurrency 32] [--rounds 10] [--repeat 3]
    python benchmarks/chain_tps.py --client httpx --batch 32    # less client, more node

--compare [REF] measures this tree's node against one with REF's front end (default: the commit
before the front end moved to hyper/axum), in the same run: REF's localnet crate over this
commit's program and core (so that only the front end differs), unpacked and built under
~/.cache/psyche/chain-tps (once per pair of commits), then --pairs times, in both client modes
(solana-py one transaction per request, httpx batches of 32), the two nodes run the whole
benchmark one after the other (order alternating). Ratios new/old of the median tx/s of each kind
go to benchmarks/results/chain_tps.json, whose headline holds the lower of the two modes.
"""

import argparse
import asyncio
import base64
import copy
import gc
import json
import logging
import os
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
CACHE = Path.home() / ".cache" / "psyche" / "chain-tps"
RESULTS = REPO / "benchmarks" / "results" / "chain_tps.json"
# (client, transactions per request) of --compare
MODES = [("solana-py", 1), ("httpx", 32)]
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
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Bench:
    def __init__(self, coord: Coordinator, node_pid: int, args):
        self.coord, self.client, self.pid, self.rpc = coord, coord.client, node_pid, coord.rpc_url
        self.batch, self.raw = args.batch, args.client == "httpx"
        # --concurrency lanes, one HTTP connection each with one request in flight, opened one
        # after another (see open()) and never expired
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1,
                              keepalive_expiry=None)
        self.lanes = []
        for _ in range(args.concurrency):
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

    async def close(self):
        for http, _ in self.lanes:
            await http.aclose()

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
        http, client = await self.free.get()
        t = time.perf_counter()
        try:
            if not self.raw:
                try:
                    return [(await client.send_raw_transaction(raws[0], opts=SEND)).value]
                except Exception as e:
                    errors.append(f"{type(e).__name__}: {e}")
                    return [None]
            calls = [{"jsonrpc": "2.0", "id": i, "method": "sendTransaction",
                      "params": [base64.b64encode(raw).decode(),
                                 {"encoding": "base64", "skipPreflight": True}]}
                     for i, raw in enumerate(raws)]
            reply = (await http.post(self.rpc, json=calls if len(calls) > 1 else calls[0])).json()
        finally:
            latencies.append(time.perf_counter() - t)
            self.free.put_nowait((http, client))
        out = []
        for r in sorted(reply if isinstance(reply, list) else [reply], key=lambda r: r["id"]):
            if "result" in r:
                out.append(Signature.from_string(r["result"]))
            else:
                errors.append(r["error"]["message"])
                out.append(None)
        return out

    async def burst(self, kind: str, txs: list) -> dict:
        """Sends pre-signed transactions, `batch` per request, one request per lane at a time."""
        latencies, errors = [], []
        chunks = [txs[i:i + self.batch] for i in range(0, len(txs), self.batch)]
        gc.collect()  # not in the middle of a burst: building it left garbage behind
        cpu_node, cpu_me = cpu_seconds(self.pid), time.process_time()
        t0 = time.perf_counter()
        replies = await asyncio.gather(*(self.send(c, errors, latencies) for c in chunks))
        sigs = [s for chunk in replies for s in chunk]
        wall = time.perf_counter() - t0
        cpu_node, cpu_me = cpu_seconds(self.pid) - cpu_node, time.process_time() - cpu_me
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


async def run(args, path: Path):
    payer = Keypair()
    clients = [Keypair() for _ in range(CLIENTS)]
    log(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; node {path}")
    proc, rpc = start(path, [(payer, 1000)] + [(kp, 10) for kp in clients])
    coord = Coordinator(rpc, payer)
    b = Bench(coord, proc.pid, args)
    try:
        await b.open()
        log(f"node ready at {rpc}, {args.concurrency} connections open; creating the run")
        account = Keypair()
        instance = coord.instance_key("tps")
        rent = await coord.rent_exempt(ACCOUNT_SPACE)
        await coord.send([coord.ix_create_account(account.pubkey(), rent),
                          coord.ix_init_coordinator("tps", account.pubkey(), payer.pubkey(),
                                                    payer.pubkey(), True, CONFIG, 7)],
                         signers=[account])
        await coord.send([coord.ix_set_paused(payer.pubkey(), instance, account.pubkey(), False)])
        acct = account.pubkey()

        log(f"{CLIENTS} clients join, then warmup_witness (setup bursts, also measured)")
        h = await b.blockhash()
        await b.burst("join_run (setup)", [
            b.sign(kp, [coord.ix_join_run(kp.pubkey(), instance, acct, bytes([i]) * 32)], h)
            for i, kp in enumerate(clients)])
        st = await b.tick_until(payer, instance, acct,
                                lambda s: s.run_state != RunState.WaitingForMembers)
        index = {c.signer: i for i, c in enumerate(st.clients)}
        assert len(index) == CLIENTS, f"{len(index)} clients in the epoch"
        await b.burst("warmup_witness (setup)", [
            b.sign(kp, [coord.ix_warmup_witness(kp.pubkey(), instance, acct,
                                                index[bytes(kp.pubkey())])], h)
            for kp in clients])
        st = await b.tick_until(payer, instance, acct, lambda s: s.run_state == RunState.RoundTrain)
        log(f"RoundTrain at step {st.step} with {len(st.clients)} clients")

        ticks = [coord.ix_tick(kp.pubkey(), instance, acct) for kp in clients]
        seq = 0
        for rep in range(args.repeat):
            # a client ticks once per blockhash, so a burst of N ticks needs N/256 blockhashes
            log(f"repeat {rep + 1}/{args.repeat}: collecting blockhashes for {args.ticks} ticks")
            hashes = [await b.blockhash()]
            while len(hashes) * CLIENTS < args.ticks:
                hashes.append(await b.blockhash(other_than=hashes[-1]))
            txs = [b.sign(clients[i % CLIENTS], [ticks[i % CLIENTS]], hashes[i // CLIENTS])
                   for i in range(args.ticks)]
            await b.burst("tick", txs)
            h = await b.blockhash()
            txs = []
            for i in range(args.ticks):
                seq += 1
                src, dst = clients[i % CLIENTS], clients[(i + 1) % CLIENTS]
                ix = transfer(TransferParams(from_pubkey=src.pubkey(), to_pubkey=dst.pubkey(),
                                             lamports=1000 + seq))
                txs.append(b.sign(src, [ix], h))
            await b.burst("system transfer", txs)

        log(f"{args.rounds} witness rounds, each followed by a burst of 32 transfers")
        # what a witness of a full round attests: every trainer and one commitment each
        participants = bloom_of(bytes(kp.pubkey()).hex() for kp in clients)
        broadcast = bloom_of(bytes([i]).hex() * 32 for i in range(CLIENTS))
        by_signer = {bytes(kp.pubkey()): kp for kp in clients}
        for _ in range(args.rounds):
            st = await coord.fetch_state(acct)
            assert st.run_state == RunState.RoundTrain, st.run_state
            elected = RoundCommittee(st.current_round, st.config.witness_nodes, 0).witness_indices()
            h = await b.blockhash()
            txs = []
            for i in elected:
                kp = by_signer[st.clients[i].signer]
                txs.append(b.sign(kp, [coord.ix_witness(kp.pubkey(), instance, acct, i, st.step,
                                                         participants, broadcast, bytes(32),
                                                         bytes(32))], h))
            await b.burst(f"witness ({len(elected)} elected)", txs)
            txs = []
            for i in range(len(elected)):
                seq += 1
                src, dst = clients[i], clients[i + 1]
                ix = transfer(TransferParams(from_pubkey=src.pubkey(), to_pubkey=dst.pubkey(),
                                             lamports=1000 + seq))
                txs.append(b.sign(src, [ix], h))
            await b.burst(f"system transfer ({len(elected)})", txs)
            step = st.step
            await b.tick_until(payer, instance, acct, lambda s: s.step == step + 1
                               and s.run_state == RunState.RoundTrain)
        load = os.getloadavg()[0]
    finally:
        await b.close()
        await coord.close()
        proc.terminate()
        proc.wait()
    return b.rows, load


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
    tree's client's transactions. Unpacked with git archive and built once per (REF, HEAD)
    under CACHE, with its own cargo target directory."""
    sha = git("rev-parse", "--verify", f"{ref}^{{commit}}")
    head = git("rev-parse", "HEAD")
    tag = f"{sha[:12]}-on-{head[:12]}"
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


def merged(runs: list) -> dict:
    """Burst rows of several runs of one node, kind by kind."""
    rows = {}
    for run_rows in runs:
        for kind, rs in run_rows.items():
            rows.setdefault(kind, []).extend(rs)
    return rows


def compare(args, parser):
    """The old node (args.compare) against this tree's, each run `pairs` times per mode."""
    if args.binary:
        parser.error("--compare builds both nodes: leave out --binary")
    old_sha, old = build_at(args.compare)
    try:
        new = find_binary(rebuild=True, profile="release")  # this tree, rebuilt if stale
    except LocalnetError as e:
        sys.exit(f"chain_tps: {e}")
    new_rev = git("describe", "--always", "--dirty", "--abbrev=12")
    log(f"old node: {old_sha[:12]} ({old}); new node: {new_rev} ({new})")
    runs = {}  # (mode, which) -> [rows per run]
    for pair in range(args.pairs):
        for client, batch in MODES:
            margs = copy.copy(args)
            margs.client, margs.batch = client, batch
            order = ("old", "new") if pair % 2 == 0 else ("new", "old")
            for which in order:
                log(f"\n== pair {pair + 1}/{args.pairs}, {client} x{batch}: {which} node")
                rows, load = asyncio.run(run(margs, old if which == "old" else new))
                report(rows, load, margs)
                runs.setdefault((f"{client} x{batch}", which), []).append(rows)
    modes, headline = {}, {}
    for client, batch in MODES:
        mode = f"{client} x{batch}"
        rows = {w: merged(runs[(mode, w)]) for w in ("old", "new")}
        s = {w: {k: summary(rows[w], k) for k in rows[w]} for w in ("old", "new")}
        kinds = {"tick": "tick", "transfer": "system transfer",
                 "witness": next(k for k in s["new"] if k.startswith("witness"))}
        ratios = {f"{name}_tps_new_vs_old": s["new"][k]["tps"] / s["old"][k]["tps"]
                  for name, k in kinds.items()}
        ratios.update({f"{name}_node_cpu_per_tx_new_vs_old":
                       s["new"][k]["node_us"] / s["old"][k]["node_us"]
                       for name, k in kinds.items()})
        modes[mode] = {"ratios": ratios, "old": s["old"], "new": s["new"]}
        for key in ("tick_tps_new_vs_old", "witness_tps_new_vs_old", "transfer_tps_new_vs_old"):
            headline[key] = round(min(headline.get(key, ratios[key]), ratios[key]), 4)
    result = {
        "headline": headline,
        "what": "tx/s of this tree's psyche-localnet over the old front end's, median over "
                "bursts, per client mode; the headline holds the lower of the two modes",
        "old_front_end_commit": old_sha, "old_built_on": git("rev-parse", "HEAD"),
        "new": new_rev, "pairs": args.pairs,
        "ticks": args.ticks, "rounds": args.rounds, "repeat": args.repeat,
        "concurrency": args.concurrency,
        "machine": f"{os.cpu_count()} CPUs", "modes": modes,
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print("\nnew / old (median tx/s over bursts; node CPU per transaction):")
    for mode, m in modes.items():
        print(f"  {mode}: " + ", ".join(f"{k} {v:.3f}" for k, v in m["ratios"].items()))
    print(f"headline (lower of the modes): {headline}; written to {RESULTS}")


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
    p.add_argument("--client", choices=["solana-py", "httpx"], default="solana-py",
                   help="solana-py: AsyncClient.send_raw_transaction, one transaction per "
                   "request (default); httpx: hand-built JSON-RPC requests, --batch per request")
    p.add_argument("--batch", type=int, default=1,
                   help="sendTransaction calls per JSON-RPC request (a batch), httpx only")
    p.add_argument("--rounds", type=int, default=10, help="witness rounds (default 10)")
    p.add_argument("--repeat", type=int, default=3,
                   help="tick and transfer bursts, alternating (default 3)")
    p.add_argument("--compare", nargs="?", const=OLD_FRONT_END, metavar="REF",
                   help="measure this tree's node against one with REF's front end (REF's "
                   "localnet crate on this commit's program), in the same run (default REF: "
                   f"{OLD_FRONT_END}, the last thread-per-connection front end); writes "
                   f"{RESULTS.relative_to(REPO)}")
    p.add_argument("--pairs", type=int, default=2,
                   help="--compare: runs of each node per client mode (default 2)")
    args = p.parse_args()
    # find_binary says when it builds the node (the first time takes minutes)
    logging.basicConfig(format="%(message)s", stream=sys.stdout)
    logging.getLogger("psyche_client.chain.localnet").setLevel(logging.INFO)
    if args.batch != 1 and args.client != "httpx":
        p.error("--batch needs --client httpx")
    if args.compare:
        compare(args, p)
        return
    rows, load = asyncio.run(run(args, binary(args.binary)))
    report(rows, load, args)


if __name__ == "__main__":
    main()
