"""state.toml and data.toml: the files a run creator writes. Errors name the file and field.

state.toml:
    run_id = "my-run"          # 1 to 32 bytes
    run_seed = 1234            # optional; default derived from run_id
    [config]                   # RunConfig fields (see psyche_coordinator_core.config)
    warmup_time = 10 ...       # flops_per_token: estimated from [model] when not set here
    max_clients = 64           # the join settings: capacity (RunFull beyond it), clients
    max_syncing = 2            # syncing at once (0: mid-epoch joins off), rounds of applied
    kept_rounds = 64           # results kept for syncing peers, rounds a synced client trains
    sync_warmup_rounds = 2     # before its results count (docs/coordinator.md)
    [checkpoint]               # optional: the coordinator's initial checkpoint (kind =
    kind = "Dummy"             # "Dummy" | "Hub" | "P2P" | "Stored", repo, revision, hash, step)
    store = "s3://bucket/run"  # and the run's snapshot store (training/spec.py CheckpointSpec):
    endpoint = "http://127.0.0.1:7070"  # store URL, S3 endpoint, snapshots kept
    keep = 3

data.toml (TCP data server):
    dir = "data/tokens"        # directory of .bin/.npy token files
    token_size = 2             # bytes per token: 2 (u16) or 4 (u32)
    seq_len = 512
    shuffle_seed = "<64 hex>"  # optional
"""

import hashlib
import tomllib
from dataclasses import dataclass
from pathlib import Path

from psyche_coordinator_core import Checkpoint, CoordinatorError, RunConfig, new_run
from psyche_coordinator_core.ops_json import checkpoint_from_json

from ..training.flops import flops_per_token
from ..training.spec import STORE_KEYS, ModelSpec, RunSpec, SpecError


class StateFileError(ValueError):
    pass


def _read_toml(path) -> dict:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise StateFileError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as e:
        raise StateFileError(f"{path}: not valid TOML: {e}") from None


def load_state_file(path, init_min_clients=None, init_warmup_time=None):
    """The initial coordinator state described by a state.toml, resumed (WaitingForMembers)."""
    data = _read_toml(path)
    unknown = sorted(set(data) - {"run_id", "run_seed", "config", "checkpoint", "model",
                                  "optimizer", "data", "p2p"})
    if unknown:
        raise StateFileError(f"{path}: unknown key {unknown[0]!r}")
    run_id = data.get("run_id")
    if not isinstance(run_id, str):
        raise StateFileError(f"{path}: run_id must be a string of 1 to 32 bytes")
    default_seed = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "little")
    seed = data.get("run_seed", default_seed)
    config = data.get("config", {})
    if not isinstance(config, dict):
        raise StateFileError(f"{path}: [config] must be a table")
    config = dict(config)
    if init_min_clients is not None:
        config["init_min_clients"] = init_min_clients
        config["min_clients"] = min(config.get("min_clients", 1), init_min_clients)
    if init_warmup_time is not None:
        config["warmup_time"] = init_warmup_time
    if "flops_per_token" not in config and isinstance(data.get("model"), dict):
        config["flops_per_token"] = _model_flops(data["model"], config.get("max_seq_len"))
    try:
        cfg = RunConfig.from_dict(config)
        ck = _initial_checkpoint(data.get("checkpoint"))
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise CoordinatorError("InvalidOperation", "run_seed must be an integer in [0, 2^64)")
        return new_run(run_id, cfg, seed, ck)
    except CoordinatorError as e:
        raise StateFileError(f"{path}: {e.detail or e.code}") from None


def _model_flops(table: dict, seq_len) -> int:
    """flops_per_token estimated from [model] (training/flops.py), or 0 (unknown) when the table
    is not a valid model: load_run_spec names what is wrong with it."""
    try:
        spec = ModelSpec(**table).validate()
    except (TypeError, ValueError):
        return 0
    return flops_per_token(spec, seq_len if isinstance(seq_len, int) and seq_len > 0 else None)


def _initial_checkpoint(table) -> Checkpoint:
    """The coordinator's keys of [checkpoint]; the store keys are the run spec's."""
    if table is None:
        return Checkpoint()
    if not isinstance(table, dict):
        raise CoordinatorError("InvalidOperation", "[checkpoint] must be a table")
    own = {k: v for k, v in table.items() if k not in STORE_KEYS}
    return checkpoint_from_json(own) if own else Checkpoint()


def load_run_spec(path, state):
    """The training spec of state.toml ([model], [optimizer], [data], [p2p], the store keys of
    [checkpoint]), or None when it has no [model] table (clients then simulate training).
    Relative data and store paths are resolved against the state file's directory, so every
    client on this machine finds them."""
    data = _read_toml(path)
    if "model" not in data:
        return None
    tables = {k: data.get(k, {}) for k in ("model", "optimizer", "data", "p2p")}
    base = Path(path).resolve().parent
    ck = data.get("checkpoint", {})
    if isinstance(ck, dict):
        ck = {k: v for k, v in ck.items() if k in STORE_KEYS}
        store = ck.get("store")
        if isinstance(store, str) and store and "://" not in store:
            ck["store"] = str((base / store).resolve())  # a local store, like the data dirs
    tables["checkpoint"] = ck
    d = dict(tables["data"]) if isinstance(tables["data"], dict) else tables["data"]
    if isinstance(d, dict):
        for key in ("dir", "heldout_dir"):
            if isinstance(d.get(key), str) and d[key]:
                d[key] = str((base / d[key]).resolve())
        tables["data"] = d
    try:
        return RunSpec.from_dict(tables, max_seq_len=state.config.max_seq_len)
    except SpecError as e:
        raise StateFileError(f"{path}: {e}") from None


@dataclass(frozen=True)
class DataConfig:
    dir: Path
    token_size: int
    seq_len: int
    shuffle_seed: bytes


def load_data_file(path) -> DataConfig:
    data = _read_toml(path)
    base = Path(path).parent
    unknown = sorted(set(data) - {"dir", "token_size", "seq_len", "shuffle_seed"})
    if unknown:
        raise StateFileError(f"{path}: unknown key {unknown[0]!r}")
    if not isinstance(data.get("dir"), str):
        raise StateFileError(f"{path}: dir must be the path of a directory of token files")
    d = (base / data["dir"]).resolve()
    if not d.is_dir():
        raise StateFileError(f"{path}: dir {d} is not a directory")
    if data.get("token_size") not in (2, 4):
        raise StateFileError(f"{path}: token_size must be 2 (u16) or 4 (u32)")
    seq_len = data.get("seq_len")
    if not isinstance(seq_len, int) or not 1 <= seq_len <= 1 << 20:
        raise StateFileError(f"{path}: seq_len must be an integer in [1, 1048576]")
    seed_hex = data.get("shuffle_seed", "00" * 32)
    try:
        seed = bytes.fromhex(seed_hex)
        assert len(seed) == 32
    except (ValueError, TypeError, AssertionError):
        raise StateFileError(f"{path}: shuffle_seed must be 64 hex characters") from None
    return DataConfig(d, data["token_size"], seq_len, seed)
