"""The local testnet on a local Solana chain: psyche-localnet in place of the server, the run
created with `psyche-solana-client create-run`, clients on the chain backend."""

import asyncio
import logging
import os
import socket
import sys
import tomllib
from pathlib import Path

import tomli_w
from solders.keypair import Keypair

from ..chain.keys import load_keypair, save_keypair
from ..chain.localnet import LocalnetError, command, find_binary, parse_ready
from .testnet import Testnet, TestnetOptions

log = logging.getLogger(__name__)

CLI = [sys.executable, "-u", "-m", "psyche_client.cli.solana_client"]
FUND_SOL = 100  # each client pays its own transaction fees
OWNER_SOL = 1000  # the run creator pays ~1.2 SOL of rent for the coordinator account


def chain_state_file(state_path: Path, workdir: Path) -> Path:
    """The run's state.toml for clients without a server: a `[data] kind = "server"` run reads
    the token files of its data.toml directly (every client is on this machine)."""
    data = tomllib.loads(state_path.read_text())
    table = data.get("data", {})
    if table.get("kind") != "server":
        return state_path
    data_toml = state_path.parent / "data.toml"
    files = tomllib.loads(data_toml.read_text())
    local = {"kind": "local", "dir": str((state_path.parent / files["dir"]).resolve()),
             "token_size": files.get("token_size", table.get("token_size", 2)),
             "shuffle_seed": files.get("shuffle_seed", "00" * 32)}
    manifest = Path(local["dir"]).parent / "manifest.json"
    if manifest.is_file():  # psyche-data tokenize wrote one; create-run pins its hash
        local["manifest"] = str(manifest.resolve())
    for key in ("heldout_dir", "heldout_sequences"):
        if key in table:
            value = table[key]
            if key == "heldout_dir":
                value = str((state_path.parent / value).resolve())
            local[key] = value
    data["data"] = local
    out = workdir / "state.toml"
    out.write_text(tomli_w.dumps(data))
    return out


class ChainTestnet(Testnet):
    coordinator_name = "psyche-localnet"

    def __init__(self, opts: TestnetOptions):
        super().__init__(opts)
        try:
            self.binary = find_binary()
        except LocalnetError as e:
            raise SystemExit(f"error: {e}")
        self.state_file = chain_state_file(opts.state_path, self.workdir)
        self.rpc = self.ws = None
        self.p2p_ports = {}

    def server_cmd(self):
        return command(self.binary)

    def shows(self, name, line) -> bool:
        # Anchor logs every instruction's name (twice: preflight, then execution).
        return not (name == "server" and line.startswith("Instruction: "))

    def on_line(self, name, line):
        if name == "server":
            ready = parse_ready(line)
            if ready and not self.listening.done():
                _, self.rpc, self.ws = ready
                self.listening.set_result(0)
        elif "run finished" in line:
            self.finished.set()

    def keypair(self, name) -> Path:
        path = self.workdir / f"{name}.json"
        if not path.exists():
            save_keypair(Keypair(), path)
        return path

    async def cli(self, *args) -> bool:
        proc = await asyncio.create_subprocess_exec(
            *CLI, *args, "--rpc", self.rpc, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        out, _ = await proc.communicate()
        for line in out.decode(errors="replace").splitlines():
            self.echo("creator", line)
        return proc.returncode == 0

    def pubkey(self, path: Path) -> str:
        return str(load_keypair(path).pubkey())

    async def prepare(self) -> bool:
        owner = self.keypair("owner")
        log.info("chain at %s; creating run %r", self.rpc, self.run_id)
        if not await self.cli("airdrop", "--keypair", str(owner), "--sol", str(OWNER_SOL)):
            return False
        for n in range(1, self.opts.num_clients + 1):
            key = self.keypair(f"client-{n}")
            if not await self.cli("airdrop", "--keypair", str(owner), "--to", self.pubkey(key),
                                  "--sol", str(FUND_SOL)):
                return False
        return await self.cli("create-run", "--keypair", str(owner), "--state",
                              str(self.state_file))

    def p2p_port(self, n) -> int:
        """Client n's p2p port on loopback: picked free once, kept across its restarts, so that
        the others can be told where it is."""
        if n not in self.p2p_ports:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.bind(("127.0.0.1", 0))
                self.p2p_ports[n] = s.getsockname()[1]
        return self.p2p_ports[n]

    def client_cmd(self, n):
        # the spec comes from the chain; each peer is its key on chain at a loopback port that
        # every client is told (--p2p-peer): no relay, no shared directory
        peers = [a for m in range(1, self.opts.num_clients + 1) if m != n for a in (
            "--p2p-peer", f"{bytes(load_keypair(self.keypair(f'client-{m}')).pubkey()).hex()}"
                          f"@127.0.0.1:{self.p2p_port(m)}")]
        return [*CLI, "train", "--rpc", self.rpc, "--ws", self.ws,
                "--keypair", str(self.keypair(f"client-{n}")), "--run-id", self.run_id,
                "--bind-p2p-host", "127.0.0.1", "--bind-p2p-port", str(self.p2p_port(n)), *peers,
                "--dummy-training-delay-secs", str(self.opts.dummy_training_delay_secs),
                "--torch-threads", "1", "--metrics-file", str(self.workdir / f"client-{n}.jsonl")]
