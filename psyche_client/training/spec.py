"""What clients need to train a run, beyond the coordinator state: the model, the optimizer,
where the data lives, where snapshots are stored and the run's relays. It comes from
state.toml's [model], [optimizer], [data], [checkpoint] and [p2p] tables (the store keys of
[checkpoint]: the coordinator's own keys stay with the coordinator); the server hands it to
every client after the hello; on a chain the run creator writes its canonical bytes to the
run's spec account and their SHA-256 to the coordinator state (`spec_hash`), and every client
reads and checks them there. Without a [model] table clients simulate training (the coordinator
loop alone)."""

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, fields


class SpecError(ValueError):
    pass


@dataclass(frozen=True)
class ModelSpec:
    vocab_size: int = 2048
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 4
    intermediate_size: int = 512
    max_seq_len: int = 128
    tie_embeddings: bool = False
    dtype: str = "float32"  # "float32" or "bfloat16"

    def validate(self) -> "ModelSpec":
        def need(name, ok, allowed):
            v = getattr(self, name)
            if not ok(v):
                raise ValueError(f"model.{name} = {v!r}: must be {allowed}")
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads",
                     "intermediate_size", "max_seq_len"):
            need(name, lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                 "a positive integer")
        need("hidden_size", lambda v: v % self.num_heads == 0, "a multiple of num_heads")
        need("num_heads", lambda v: v % self.num_kv_heads == 0, "a multiple of num_kv_heads")
        need("dtype", lambda v: v in ("float32", "bfloat16"), '"float32" or "bfloat16"')
        return self

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class OptimizerSpec:
    kind: str = "distro"
    lr: float = 3e-3
    warmup_steps: int = 10  # linear warmup from 0
    momentum_decay: float = 0.999
    weight_decay: float = 0.0
    chunk: int = 64
    topk: int = 32
    quantize_1bit: bool = True
    rice: bool = False  # entropy-coded indices on the wire
    # train on the parameters plus this client's own update still in flight (round h is applied
    # while h+2 trains), as Psyche's error_correction; local only, removed before compressing
    lookahead: bool = True
    # each trainer clips its batch's gradient to this global L2 norm before folding it into its
    # momentum; 0 = off. Without it one batch's spike (31x the median norm on
    # benchmarks/byzantine) ruled the momentum (decay 0.999) for rounds, and the screen left that
    # honest trainer's results out as outliers. 5 cuts only such spikes there (99 % of batches
    # stayed under 4); Psyche's reference and DeMo clip at 1.0, which there cut about 40 % of the
    # steps and let the verifiers judge two honest results bad
    grad_clip: float = 5.0
    # after warmup: "constant", or "cosine" down to final_lr_fraction * lr at the run's
    # total_steps (DeMo's recipe: cosine to 0.1)
    schedule: str = "constant"
    final_lr_fraction: float = 0.1
    # robust aggregation: each result's values of a parameter are scaled down to an L2 norm of at
    # most clip x the median of the round's results' norms for it, so one undetected outlier
    # cannot move the model much; 0 = off. No effect with quantize_1bit (every 1-bit result has
    # the same norm). Default 3 from benchmarks/byzantine (full-precision values): the screen
    # below already leaves out norms over 10x the median, and on all-honest runs the loss ratio
    # clip/plain was 0.997, 0.997, 1.015 over seeds 1337, 7, 42 with clip 3 (mean 1.003) against
    # 1.012, 1.018, 1.006 with clip 2 (mean 1.012)
    clip: float = 3.0
    # apply-time screen (training/screen.py): leave out of the mean a result whose norm is over
    # 10x the round's median or that points against the round's majority; the same results on
    # every client. Off = the reference's plain mean over the consensus set
    screen: bool = True

    def validate(self):
        if self.kind != "distro":
            raise SpecError('optimizer.kind must be "distro"')
        if not 0 < self.lr < 1:
            raise SpecError("optimizer.lr must be in (0, 1)")
        if not 0 <= self.momentum_decay < 1:
            raise SpecError("optimizer.momentum_decay must be in [0, 1)")
        if self.schedule not in ("constant", "cosine"):
            raise SpecError('optimizer.schedule must be "constant" or "cosine"')
        if not 0 <= self.final_lr_fraction <= 1:
            raise SpecError("optimizer.final_lr_fraction must be in [0, 1]")
        if not isinstance(self.lookahead, bool):
            raise SpecError("optimizer.lookahead must be true or false")
        if not isinstance(self.screen, bool):
            raise SpecError("optimizer.screen must be true or false")
        if (isinstance(self.clip, bool) or not isinstance(self.clip, (int, float))
                or not math.isfinite(self.clip) or not (self.clip == 0 or self.clip >= 1)):
            raise SpecError(f"optimizer.clip = {self.clip!r}: must be 0 (off) or a number >= 1 "
                            "(the bound on a result's norm, in medians of the round's norms)")
        if (isinstance(self.grad_clip, bool) or not isinstance(self.grad_clip, (int, float))
                or not math.isfinite(self.grad_clip) or self.grad_clip < 0):
            raise SpecError(f"optimizer.grad_clip = {self.grad_clip!r}: must be 0 (off) or a "
                            "positive number (the largest L2 norm of a batch's gradient)")
        if self.chunk < 1 or self.topk < 1 or self.warmup_steps < 0:
            raise SpecError("optimizer.chunk and topk must be >= 1, warmup_steps >= 0")
        return self

    def lr_at(self, step: int, total_steps: int | None = None) -> float:
        """The learning rate of `step`; every client must get the same float (it scales the
        sign update), so the cosine uses only correctly rounded arithmetic, not the libm."""
        if self.warmup_steps and step < self.warmup_steps:
            return self.lr * step / self.warmup_steps
        if self.schedule == "constant" or not total_steps:
            return self.lr
        t = min(1.0, max(0, step - self.warmup_steps) / max(1, total_steps - self.warmup_steps))
        f = self.final_lr_fraction
        return self.lr * (f + (1 - f) * 0.5 * (1 + _cos_pi(t)))


def _cos_pi(t: float) -> float:
    """cos(pi * t) for t in [0, 1] from +, -, *, / alone (bit-identical on every IEEE-754
    machine, unlike math.cos): fold onto [0, 1/2], then a Taylor series to double precision."""
    if t > 0.5:
        return -_cos_pi(1.0 - t)
    x = math.pi * t  # in [0, pi/2]: 20 terms leave an error far below 1e-16
    x2, term, total = x * x, 1.0, 1.0
    for n in range(1, 21):
        term = -term * x2 / ((2 * n - 1) * (2 * n))
        total += term
    return total


@dataclass(frozen=True)
class DataSpec:
    kind: str = "dummy"  # "server" (TCP data server), "local", "http" or "dummy"
    address: str = ""  # server: host:port
    dir: str = ""  # local: directory of token files on every client
    urls: tuple = ()  # http: token file URLs
    token_size: int = 2
    shuffle_seed: str = "00" * 32
    heldout_dir: str = ""  # local token files for held-out loss (every client)
    heldout_urls: tuple = ()
    heldout_sequences: int = 32
    # the data manifest (data/manifest.py): what the tokens are, by chunk hashes. `manifest` is
    # its URL (kind "http") or path (kind "local"); the token files are named relative to it.
    # `create-run` fills in manifest_sha256 from the manifest when it is left out
    manifest: str = ""
    manifest_sha256: str = ""

    def validate(self):
        if self.kind not in ("server", "local", "http", "dummy"):
            raise SpecError('data.kind must be "server", "local", "http" or "dummy"')
        if self.kind == "server" and ":" not in self.address:
            raise SpecError("data.address must be host:port for a data server")
        if self.kind == "local" and not self.dir:
            raise SpecError("data.dir must name a directory of token files")
        if self.kind == "http" and not self.urls:
            raise SpecError("data.urls must list token file URLs")
        if self.token_size not in (2, 4):
            raise SpecError("data.token_size must be 2 or 4")
        for name in ("shuffle_seed", "manifest_sha256"):
            value = getattr(self, name)
            if name == "manifest_sha256" and not value:
                continue
            try:
                if not isinstance(value, str) or len(bytes.fromhex(value)) != 32:
                    raise ValueError
            except ValueError:
                raise SpecError(f"data.{name} must be 64 hex characters") from None
        if self.manifest_sha256 and not self.manifest:
            raise SpecError("data.manifest_sha256 without data.manifest: name where it is")
        if self.manifest and self.kind not in ("local", "http"):
            raise SpecError('data.manifest is for kind "local" or "http" (token files)')
        if self.manifest and (self.kind == "http") != self.manifest.startswith(
                ("http://", "https://")):
            raise SpecError("data.manifest must be a URL for kind \"http\", a path for "
                            "kind \"local\"")
        return self


# keys of state.toml's [checkpoint] table that belong to the run spec (the rest: the
# coordinator's initial checkpoint)
STORE_KEYS = ("store", "endpoint", "keep")


@dataclass(frozen=True)
class CheckpointSpec:
    """Where the run's snapshots are stored: read by every client (no credentials), written by
    elected checkpointers with write credentials of their own (never in the spec)."""
    store: str = ""  # a local path, file:///PATH or s3://BUCKET/PREFIX; "" = no store
    endpoint: str = ""  # the S3-compatible server's URL (s3:// stores), e.g. http://host:port
    keep: int = 3  # snapshots kept in the store: a checkpointer prunes to the last `keep`

    def validate(self):
        if not isinstance(self.store, str) or not isinstance(self.endpoint, str):
            raise SpecError("checkpoint.store and checkpoint.endpoint must be strings")
        if self.endpoint and not self.store.startswith("s3://"):
            raise SpecError("checkpoint.endpoint is only for an s3:// store")
        if not isinstance(self.keep, int) or isinstance(self.keep, bool) or self.keep < 1:
            raise SpecError("checkpoint.keep must be an integer >= 1")
        return self


def parse_stun_server(server: str) -> tuple:
    """"host:port" -> (host, port); ValueError otherwise. The one check of a STUN server's
    address: the spec's [p2p] stun, --stun and the STUN client (p2p/stun.py) use it."""
    host, sep, port = server.rpartition(":") if isinstance(server, str) else ("", "", "")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"STUN server {server!r}: expected host:port")
    return host, int(port)


@dataclass(frozen=True)
class P2PSpec:
    """How the run's clients reach each other: the iroh relays they all use (a client's own
    --iroh-relay overrides them) and the STUN servers that tell a client behind a NAT its
    public address (its own --stun overrides them)."""
    relays: tuple = ()  # http:// or https:// URLs
    stun: tuple = ()  # "host:port" of STUN servers (RFC 5389)

    def validate(self):
        if not all(isinstance(r, str) and r.split("://")[0] in ("http", "https")
                   and len(r.split("://", 1)) == 2 and r.split("://", 1)[1] for r in self.relays):
            raise SpecError("p2p.relays must be a list of http:// or https:// relay URLs")
        try:
            if not isinstance(self.stun, tuple):
                raise ValueError
            for s in self.stun:
                parse_stun_server(s)
        except ValueError:
            raise SpecError('p2p.stun must be a list of "host:port" STUN servers') from None
        return self


@dataclass(frozen=True)
class RunSpec:
    model: ModelSpec = field(default_factory=ModelSpec)
    optimizer: OptimizerSpec = field(default_factory=OptimizerSpec)
    data: DataSpec = field(default_factory=DataSpec)
    checkpoint: CheckpointSpec = field(default_factory=CheckpointSpec)
    p2p: P2PSpec = field(default_factory=P2PSpec)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["data"]["urls"] = list(self.data.urls)
        d["data"]["heldout_urls"] = list(self.data.heldout_urls)
        d["p2p"]["relays"] = list(self.p2p.relays)
        d["p2p"]["stun"] = list(self.p2p.stun)
        return d

    def canonical_bytes(self) -> bytes:
        """The bytes stored on chain and hashed: compact JSON with sorted keys (Python's
        shortest float repr), so equal specs give equal bytes wherever they are written."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, allow_nan=False).encode()

    def spec_hash(self) -> bytes:
        return hashlib.sha256(self.canonical_bytes()).digest()

    @classmethod
    def from_canonical_bytes(cls, raw: bytes) -> "RunSpec":
        """A spec from its canonical bytes: SpecError for anything else (so bytes that parse
        but are not canonical cannot pass for a spec that hashes differently)."""
        try:
            spec = cls.from_dict(json.loads(raw.decode()))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise SpecError(f"the run spec is not JSON: {e}") from None
        if not isinstance(spec, cls) or spec.canonical_bytes() != raw:
            raise SpecError("the run spec's bytes are not canonical")
        return spec

    @classmethod
    def from_dict(cls, d: dict, max_seq_len: int = None) -> "RunSpec":
        if not isinstance(d, dict):
            raise SpecError("a run spec must be a table")
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise SpecError(f"the run spec has unknown table {unknown[0]!r}")

        def build(kind, table, name):
            if not isinstance(table, dict):
                raise SpecError(f"[{name}] must be a table")
            known = {f.name for f in fields(kind)}
            unknown = sorted(set(table) - known)
            if unknown:
                raise SpecError(f"[{name}] has unknown key {unknown[0]!r} "
                                f"(known: {', '.join(sorted(known))})")
            vals = {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}
            try:
                return kind(**vals)
            except TypeError as e:
                raise SpecError(f"[{name}]: {e}") from None
        try:
            spec = cls(build(ModelSpec, d.get("model", {}), "model").validate(),
                       build(OptimizerSpec, d.get("optimizer", {}), "optimizer").validate(),
                       build(DataSpec, d.get("data", {}), "data").validate(),
                       build(CheckpointSpec, d.get("checkpoint", {}), "checkpoint").validate(),
                       build(P2PSpec, d.get("p2p", {}), "p2p").validate())
        except ValueError as e:
            raise SpecError(str(e)) from None
        if max_seq_len is not None and spec.model.max_seq_len != max_seq_len:
            raise SpecError(f"model.max_seq_len ({spec.model.max_seq_len}) must equal "
                            f"config.max_seq_len ({max_seq_len})")
        return spec
