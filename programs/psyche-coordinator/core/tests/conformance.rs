//! Replays every conformance vector (`tests/vectors/*.json` at the repository root, format in
//! `tests/vectors/README.md`) against the Rust core and checks the error code and every summary
//! field, the state hash included, after every step. Panics on the first mismatch with the vector
//! name, the step index and the field.
//!
//! The argument decoder mirrors `psyche_coordinator_core/ops_json.py` (`decode_args`,
//! `RunConfig.from_dict`, `checkpoint_from_json`), including the error code of every malformed
//! argument.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use psyche_coordinator_core::{
    self as core_, CheckpointArgs, CheckpointKind, CoordinatorError as E,
};
use psyche_coordinator_core::{CoordinatorState, Points, RunConfig, STATE_SIZE};
use serde_json::{Map, Value};

// ---------------------------------------------------------------- decoding (ops_json.py)

const BYTES_ARGS: [&str; 8] = [
    "signer",
    "p2p_identity",
    "identity",
    "participant_bloom",
    "broadcast_bloom",
    "broadcast_merkle",
    "param_hash",
    "spec_hash",
];

/// `ops_json.ARGS`: (op, every argument, the optional ones).
fn op_args(op: &str) -> Option<(&'static [&'static str], &'static [&'static str])> {
    Some(match op {
        "tick" | "pause" | "resume" => (&[], &[]),
        "join" => (&["signer", "p2p_identity", "identity"], &["identity"]),
        "withdraw" => (&["signer"], &[]),
        "warmup_witness" => (&["signer", "index"], &[]),
        "witness" => (
            &[
                "signer",
                "index",
                "step",
                "participant_bloom",
                "broadcast_bloom",
                "broadcast_merkle",
                "param_hash",
            ],
            &[],
        ),
        "health_check" => (&["signer", "index", "targets"], &[]),
        "evidence" => (&["signer", "index", "step", "target"], &[]),
        "checkpoint" => (
            &["signer", "index", "repo", "revision", "step", "param_hash"],
            &["revision"],
        ),
        "synced" => (&["signer", "index", "step", "param_hash"], &[]),
        "resync" => (&["signer", "index"], &[]),
        "settle" => (&["index"], &[]),
        "update" => (
            &["config", "checkpoint", "spec_hash"],
            &["config", "checkpoint", "spec_hash"],
        ),
        _ => return None,
    })
}

/// A checkpoint object as `checkpoint_from_json` returns it.
#[derive(Clone, Debug)]
struct Checkpoint {
    kind: CheckpointKind,
    repo: Vec<u8>,
    revision: Vec<u8>,
    hash: [u8; 32],
    step: u32,
}

impl Checkpoint {
    fn args(&self) -> CheckpointArgs<'_> {
        CheckpointArgs {
            kind: self.kind,
            repo: &self.repo,
            revision: &self.revision,
            hash: &self.hash,
            step: self.step,
        }
    }
}

#[derive(Debug)]
enum Args {
    Tick,
    Pause,
    Resume,
    Join {
        signer: Vec<u8>,
        p2p_identity: Vec<u8>,
        identity: Option<Vec<u8>>,
    },
    Settle {
        index: u32,
    },
    Withdraw {
        signer: Vec<u8>,
    },
    WarmupWitness {
        signer: Vec<u8>,
        index: u32,
    },
    Witness {
        signer: Vec<u8>,
        index: u32,
        step: u32,
        pb: Vec<u8>,
        bb: Vec<u8>,
        merkle: Vec<u8>,
        param_hash: Vec<u8>,
    },
    HealthCheck {
        signer: Vec<u8>,
        index: u32,
        targets: Vec<u16>,
    },
    Evidence {
        signer: Vec<u8>,
        index: u32,
        step: u32,
        target: u16,
    },
    Checkpoint {
        signer: Vec<u8>,
        index: u32,
        repo: Vec<u8>,
        revision: Vec<u8>,
        step: u32,
        param_hash: Vec<u8>,
    },
    Synced {
        signer: Vec<u8>,
        index: u32,
        step: u32,
        param_hash: Vec<u8>,
    },
    Resync {
        signer: Vec<u8>,
        index: u32,
    },
    Update {
        config: Option<RunConfig>,
        checkpoint: Option<Checkpoint>,
        spec_hash: Option<Vec<u8>>,
    },
}

/// Lowercase hex: pairs of `[0-9a-f]` and nothing else (ops_json's `HEX`).
fn hex_lower(v: &str) -> Option<Vec<u8>> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    let b = v.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    b.chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// A JSON integer (not a bool, not a float) in [0, limit).
fn int_below(v: &Value, limit: u64) -> Option<u64> {
    v.as_u64().filter(|&x| x < limit)
}

/// `RunConfig.from_dict(d)`: unknown key, non-integer or out-of-range value -> InvalidConfig;
/// a missing key takes the default.
fn config_from_dict(d: &Map<String, Value>) -> Result<RunConfig, E> {
    let mut c = RunConfig::DEFAULT;
    for (k, v) in d {
        // JSON integers only: a bool, a float (2.0), a string or a negative number is rejected,
        // as is anything past u64 (serde_json reads it as a float)
        let x = v.as_u64().ok_or(E::InvalidConfig)?;
        let narrow = E::InvalidConfig;
        match k.as_str() {
            "warmup_time" => c.warmup_time = x,
            "cooldown_time" => c.cooldown_time = x,
            "max_round_train_time" => c.max_round_train_time = x,
            "round_witness_time" => c.round_witness_time = x,
            "epoch_time" => c.epoch_time = x,
            "global_batch_size_warmup_tokens" => c.global_batch_size_warmup_tokens = x,
            "total_steps" => c.total_steps = x.try_into().map_err(|_| narrow)?,
            "max_seq_len" => c.max_seq_len = x.try_into().map_err(|_| narrow)?,
            "checkpoint_interval" => c.checkpoint_interval = x.try_into().map_err(|_| narrow)?,
            "min_clients" => c.min_clients = x.try_into().map_err(|_| narrow)?,
            "init_min_clients" => c.init_min_clients = x.try_into().map_err(|_| narrow)?,
            "witness_nodes" => c.witness_nodes = x.try_into().map_err(|_| narrow)?,
            "global_batch_size_start" => {
                c.global_batch_size_start = x.try_into().map_err(|_| narrow)?
            }
            "global_batch_size_end" => {
                c.global_batch_size_end = x.try_into().map_err(|_| narrow)?
            }
            "verification_percent" => c.verification_percent = x.try_into().map_err(|_| narrow)?,
            "checkpointer_percent" => c.checkpointer_percent = x.try_into().map_err(|_| narrow)?,
            "waiting_for_members_extra_time" => {
                c.waiting_for_members_extra_time = x.try_into().map_err(|_| narrow)?
            }
            "max_clients" => c.max_clients = x.try_into().map_err(|_| narrow)?,
            "max_syncing" => c.max_syncing = x.try_into().map_err(|_| narrow)?,
            "kept_rounds" => c.kept_rounds = x.try_into().map_err(|_| narrow)?,
            "sync_warmup_rounds" => c.sync_warmup_rounds = x.try_into().map_err(|_| narrow)?,
            "flops_per_token" => c.flops_per_token = x,
            "tokens_per_compute_point" => c.tokens_per_compute_point = x,
            "points_cap" => c.points_cap = x,
            "presence_points" => c.presence_points = x.try_into().map_err(|_| narrow)?,
            "evidence_quorum" => c.evidence_quorum = x.try_into().map_err(|_| narrow)?,
            "verify_sample" => c.verify_sample = x.try_into().map_err(|_| narrow)?,
            _ => return Err(E::InvalidConfig), // unknown field
        }
    }
    // every field's allowed range lies inside its width, so a value too wide for the field
    // (rejected above) is always out of range for validate() too: same code either way
    c.validate()?;
    Ok(c)
}

/// `checkpoint_from_json(d)`.
fn checkpoint_from_json(v: &Value) -> Result<Checkpoint, E> {
    let d = v.as_object().ok_or(E::InvalidOperation)?;
    if d.keys()
        .any(|k| !matches!(k.as_str(), "kind" | "repo" | "revision" | "hash" | "step"))
    {
        return Err(E::InvalidOperation);
    }
    let kind = d
        .get("kind")
        .and_then(Value::as_str)
        .and_then(CheckpointKind::from_name)
        .ok_or(E::InvalidCheckpoint)?;
    let text = |key: &str| match d.get(key) {
        None => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(_) => Err(E::InvalidOperation),
    };
    let (repo, revision) = (text("repo")?, text("revision")?);
    // hash: 64 lowercase hex digits, missing = zero; step: an integer in [0, 2^32), missing = 0
    let hash = match d.get("hash") {
        None => [0; 32],
        Some(v) => v
            .as_str()
            .and_then(hex_lower)
            .and_then(|h| h.try_into().ok())
            .ok_or(E::InvalidOperation)?,
    };
    let step = match d.get("step") {
        None => 0,
        Some(v) => int_below(v, 1 << 32).ok_or(E::InvalidOperation)? as u32,
    };
    Ok(Checkpoint {
        kind,
        repo,
        revision,
        hash,
        step,
    })
}

/// `decode_args(op, args)`.
fn decode_args(op: &str, args: &Value) -> Result<Args, E> {
    let (all, optional) = op_args(op).ok_or(E::InvalidOperation)?;
    let args = args.as_object().ok_or(E::InvalidOperation)?;
    let unknown = args.keys().any(|k| !all.contains(&k.as_str()));
    let missing = all
        .iter()
        .any(|k| !optional.contains(k) && !args.contains_key(*k));
    if unknown || missing {
        return Err(E::InvalidOperation);
    }
    // Decode in sorted key order (serde_json without preserve_order iterates keys sorted), as
    // ops_json.decode_args does: with two wrong arguments of different codes both name the same
    // (tests/fuzz/ops_json_edge_cases.json holds such cases).
    let mut bytes = std::collections::BTreeMap::new();
    let mut ints = std::collections::BTreeMap::new();
    let mut texts = std::collections::BTreeMap::new();
    let mut targets = None;
    let mut target = None;
    let mut config = None;
    let mut checkpoint = None;
    for (k, v) in args {
        let k = k.as_str();
        if BYTES_ARGS.contains(&k) {
            let raw = v
                .as_str()
                .filter(|s| *s == s.to_lowercase())
                .and_then(hex_lower)
                .ok_or(E::InvalidOperation)?;
            bytes.insert(k, raw);
        } else if k == "config" {
            let d = v.as_object().ok_or(E::InvalidOperation)?;
            config = Some(config_from_dict(d)?);
        } else if k == "checkpoint" {
            checkpoint = Some(checkpoint_from_json(v)?);
        } else if k == "targets" {
            let list = v.as_array().ok_or(E::InvalidOperation)?;
            let t: Option<Vec<u16>> = list
                .iter()
                .map(|t| int_below(t, 1 << 16).map(|x| x as u16))
                .collect();
            targets = Some(t.ok_or(E::InvalidOperation)?);
        } else if k == "target" {
            // a client index, u16 on the wire like health_check's targets
            let x = int_below(v, 1 << 16).ok_or(E::InvalidOperation)?;
            target = Some(x as u16);
        } else if k == "repo" || k == "revision" {
            let s = v.as_str().ok_or(E::InvalidOperation)?;
            texts.insert(k, s.as_bytes().to_vec());
        } else {
            // index, step: unsigned 32-bit on the wire
            let x = int_below(v, 1 << 32).ok_or(E::InvalidOperation)?;
            ints.insert(k, x as u32);
        }
    }
    let mut b = |k: &str| bytes.remove(k).expect("required bytes argument");
    let i = |k: &str| ints[k];
    Ok(match op {
        "tick" => Args::Tick,
        "pause" => Args::Pause,
        "resume" => Args::Resume,
        "join" => Args::Join {
            signer: b("signer"),
            p2p_identity: b("p2p_identity"),
            identity: bytes.remove("identity"),
        },
        "settle" => Args::Settle { index: i("index") },
        "withdraw" => Args::Withdraw {
            signer: b("signer"),
        },
        "warmup_witness" => Args::WarmupWitness {
            signer: b("signer"),
            index: i("index"),
        },
        "witness" => Args::Witness {
            signer: b("signer"),
            index: i("index"),
            step: i("step"),
            pb: b("participant_bloom"),
            bb: b("broadcast_bloom"),
            merkle: b("broadcast_merkle"),
            param_hash: b("param_hash"),
        },
        "health_check" => Args::HealthCheck {
            signer: b("signer"),
            index: i("index"),
            targets: targets.expect("targets"),
        },
        "evidence" => Args::Evidence {
            signer: b("signer"),
            index: i("index"),
            step: i("step"),
            target: target.expect("target"),
        },
        "checkpoint" => Args::Checkpoint {
            signer: b("signer"),
            index: i("index"),
            repo: texts.remove("repo").expect("repo"),
            revision: texts.remove("revision").unwrap_or_default(),
            step: i("step"),
            param_hash: b("param_hash"),
        },
        "synced" => Args::Synced {
            signer: b("signer"),
            index: i("index"),
            step: i("step"),
            param_hash: b("param_hash"),
        },
        "resync" => Args::Resync {
            signer: b("signer"),
            index: i("index"),
        },
        "update" => Args::Update {
            config,
            checkpoint,
            spec_hash: bytes.remove("spec_hash"),
        },
        _ => unreachable!(),
    })
}

fn apply(s: &mut CoordinatorState, now: u64, args: &Args) -> Result<(), E> {
    match args {
        Args::Tick => core_::tick(s, now),
        Args::Pause => core_::pause(s, now),
        Args::Resume => core_::resume(s, now),
        Args::Join {
            signer,
            p2p_identity,
            identity,
        } => core_::join(s, now, signer, p2p_identity, identity.as_deref()),
        Args::Settle { index } => core_::settle(s, now, *index),
        Args::Withdraw { signer } => core_::withdraw(s, now, signer),
        Args::WarmupWitness { signer, index } => core_::warmup_witness(s, now, signer, *index),
        Args::Witness {
            signer,
            index,
            step,
            pb,
            bb,
            merkle,
            param_hash,
        } => core_::witness(s, now, signer, *index, *step, pb, bb, merkle, param_hash),
        Args::HealthCheck {
            signer,
            index,
            targets,
        } => core_::health_check(s, now, signer, *index, targets),
        Args::Evidence {
            signer,
            index,
            step,
            target,
        } => core_::evidence(s, now, signer, *index, *step, *target),
        Args::Checkpoint {
            signer,
            index,
            repo,
            revision,
            step,
            param_hash,
        } => core_::checkpoint(s, now, signer, *index, repo, revision, *step, param_hash),
        Args::Synced {
            signer,
            index,
            step,
            param_hash,
        } => core_::synced(s, now, signer, *index, *step, param_hash),
        Args::Resync { signer, index } => core_::resync(s, now, signer, *index),
        Args::Update {
            config,
            checkpoint,
            spec_hash,
        } => {
            let ck = checkpoint.as_ref().map(Checkpoint::args);
            core_::update(s, now, config.as_ref(), ck.as_ref(), spec_hash.as_deref())
        }
    }
}

// ---------------------------------------------------------------- replay

/// The account: a heap buffer with the state's alignment.
struct Account(Vec<u64>);

impl Account {
    fn zeroed() -> Self {
        Account(vec![0u64; STATE_SIZE / 8])
    }
    fn state(&mut self) -> &mut CoordinatorState {
        bytemuck_cast(&mut self.0)
    }
    fn view(&self) -> &CoordinatorState {
        bytemuck::from_bytes(bytemuck::cast_slice(&self.0))
    }
    fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.0)
    }
}

fn bytemuck_cast(buf: &mut [u64]) -> &mut CoordinatorState {
    bytemuck::from_bytes_mut(bytemuck::cast_slice_mut(buf))
}

fn summary(s: &CoordinatorState, error: Option<E>) -> Vec<(&'static str, Value)> {
    let cur = s.current_round();
    vec![
        (
            "error",
            error.map_or(Value::Null, |e| Value::from(e.code())),
        ),
        ("run_state", Value::from(s.run_state().name())),
        ("epoch", Value::from(s.header.epoch)),
        ("step", Value::from(s.header.step)),
        ("clients", Value::from(s.clients().len())),
        ("pending", Value::from(s.pending().len())),
        ("round_height", Value::from(cur.height)),
        ("witnesses", Value::from(cur.witnesses().len())),
        ("healthy", Value::from(s.healthy_count())),
        ("hash", Value::from(hex::encode(core_::state_hash(s)))),
    ]
}

const EXPECT_KEYS: [&str; 10] = [
    "error",
    "hash",
    "run_state",
    "epoch",
    "step",
    "clients",
    "pending",
    "round_height",
    "witnesses",
    "healthy",
];

/// `points_to_json` of generate.py.
fn points_json(p: &Points) -> Value {
    serde_json::json!({
        "identity": hex::encode(p.identity),
        "presence_rounds": p.presence_rounds,
        "sequences": p.sequences,
        "tokens": p.tokens,
        "token_carry": p.token_carry,
        "presence_points": p.presence_points,
        "compute_points": p.compute_points,
    })
}

thread_local! {
    /// Accepted settle steps replayed with their ledger half (checked to be > 0).
    static SETTLES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn keys_of(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    k.sort();
    k
}

fn sorted(mut k: Vec<&'static str>) -> Vec<&'static str> {
    k.sort();
    k
}

/// Replays one vector file; returns its number of steps. `observe(i, state)` sees the state
/// before the first step (i = 0) and after step i - 1 (i = 1..=steps).
fn replay(path: &Path, observe: &mut dyn FnMut(usize, &CoordinatorState)) -> usize {
    let file = path.display();
    let doc: Value = serde_json::from_str(&fs::read_to_string(path).expect("read vector"))
        .unwrap_or_else(|e| panic!("{file}: not JSON: {e}"));
    assert_eq!(
        keys_of(&doc),
        sorted(vec![
            "name",
            "description",
            "initial",
            "initial_hash",
            "steps"
        ]),
        "{file}: top-level keys"
    );
    let name = doc["name"].as_str().expect("name");
    assert_eq!(
        Some(name),
        path.file_stem().and_then(|s| s.to_str()),
        "{file}: name != file name"
    );

    // initial state: new_run(run_id, RunConfig.from_dict(config), run_seed, checkpoint)
    let initial = &doc["initial"];
    let run_id = initial["run_id"].as_str().expect("run_id");
    let run_seed = initial["run_seed"].as_u64().expect("run_seed is a u64");
    let config = config_from_dict(initial["config"].as_object().expect("config object"))
        .unwrap_or_else(|e| panic!("{name}: initial config rejected: {e}"));
    let ck = checkpoint_from_json(&initial["checkpoint"])
        .unwrap_or_else(|e| panic!("{name}: initial checkpoint rejected: {e}"));
    let mut account = Account::zeroed();
    core_::new_run(
        account.state(),
        run_id.as_bytes(),
        &config,
        run_seed,
        &ck.args(),
    )
    .unwrap_or_else(|e| panic!("{name}: new_run failed: {e}"));
    // an account another version of the code made: only that number differs
    if let Some(v) = initial.get("layout_version") {
        let v = v.as_u64().and_then(|v| u32::try_from(v).ok());
        account.state().header.layout_version = v.expect("layout_version is a u32");
    }
    let initial_hash = doc["initial_hash"].as_str().expect("initial_hash");
    let got = hex::encode(core_::state_hash(account.view()));
    assert_eq!(got, initial_hash, "{name}: initial_hash mismatch");
    observe(0, account.view());

    let steps = doc["steps"].as_array().expect("steps");
    let mut prev_hash = initial_hash.to_string();
    // identity -> Points, credited by each accepted settle (the contributor accounts)
    let mut ledger: BTreeMap<[u8; 32], Points> = BTreeMap::new();
    for (n, step) in steps.iter().enumerate() {
        let op = step["op"].as_str().expect("op");
        let now = step["time"].as_u64().expect("time is a u64");
        let at = format!("{name} step {n} ({op} at {now})");
        assert_eq!(
            keys_of(step),
            sorted(vec!["time", "op", "args", "expect"]),
            "{at}: step keys"
        );
        let expect = &step["expect"];
        // an accepted settle also records the backend's half: what moved, and the entry after
        let settled = op == "settle" && expect["error"].is_null();
        let mut keys = EXPECT_KEYS.to_vec();
        if settled {
            keys.extend(["credited", "entry"]);
        }
        assert_eq!(keys_of(expect), sorted(keys), "{at}: expect keys");

        // the credit `settle` moves, read before the settle (as the program does)
        let moved = if settled {
            let index = step["args"]["index"].as_u64().expect("index") as u32;
            Some(core_::pending_credit(account.view(), index).expect("{at}: pending_credit"))
        } else {
            None
        };
        // apply to a heap copy of the account; a rejection must leave the copy untouched
        let mut next = Account(account.0.clone());
        let result = decode_args(op, &step["args"]).and_then(|a| apply(next.state(), now, &a));
        let error = result.err();
        if error.is_some() {
            assert!(
                next.bytes() == account.bytes(),
                "{at}: rejected op ({error:?}) changed the state bytes"
            );
        }
        for (field, got) in summary(next.view(), error) {
            let want = &expect[field];
            if &got != want {
                panic!("{at}: field `{field}`: got {got}, expected {want}");
            }
        }
        if let Some(moved) = moved {
            let entry = ledger
                .get(&moved.identity)
                .copied()
                .unwrap_or(Points::new(moved.identity));
            let entry = core_::credit(&entry, &moved, &next.view().config)
                .unwrap_or_else(|e| panic!("{at}: credit: {e}"));
            ledger.insert(moved.identity, entry);
            let got = serde_json::json!({
                "credited": {
                    "identity": hex::encode(moved.identity),
                    "presence": moved.presence,
                    "sequences": moved.sequences,
                },
                "entry": points_json(&entry),
            });
            assert_eq!(got["credited"], expect["credited"], "{at}: credited");
            assert_eq!(got["entry"], expect["entry"], "{at}: ledger entry");
            SETTLES.with(|c| c.set(c.get() + 1));
        }
        if error.is_some() {
            assert_eq!(
                expect["hash"].as_str(),
                Some(prev_hash.as_str()),
                "{at}: vector's rejected step changes the hash"
            );
        } else {
            account = next;
        }
        prev_hash = expect["hash"].as_str().expect("hash").to_string();
        observe(n + 1, account.view());
    }
    steps.len()
}

/// `tests/vectors` of this repository, or `$PSYCHE_VECTORS_DIR` (e.g. the output of
/// `python -m tests.vectors.generate --out DIR`).
fn vector_dir() -> PathBuf {
    match std::env::var_os("PSYCHE_VECTORS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/vectors"),
    }
}

#[test]
fn conformance_vectors() {
    let dir = vector_dir();
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 40,
        "only {} vector files in {}",
        files.len(),
        dir.display()
    );
    let mut steps = 0;
    for f in &files {
        steps += replay(f, &mut |_, _| {});
    }
    let settles = SETTLES.with(|c| c.get());
    assert!(settles > 0, "no accepted settle step replayed");
    // written to the process's stdout directly, so the line shows without --nocapture
    let line = format!(
        "replayed {} vectors, {} steps ({} settles checked against the ledger)\n",
        files.len(),
        steps,
        settles
    );
    std::io::Write::write_all(&mut std::io::stdout(), line.as_bytes()).expect("stdout");
}

/// `tick_deadline(state)` and the bitmask of `is_healthy(state, i)` over `clients`, before the
/// first step and after every step, as the Python core computes them (not recorded in the vector
/// files; generated with the venv and pasted here: replay each vector with `apply`, call
/// `tick_deadline` and `is_healthy` after every step).
/// (vector name, tick_deadline per state, is_healthy mask per state)
type Query = (&'static str, &'static [Option<u64>], &'static [u64]);

#[rustfmt::skip]
const QUERIES: [Query; 7] = [
    (
        "happy_path_single_client",
        &[None, None, Some(1700000003), Some(1700000008), Some(1700000009), Some(1700000007), Some(1700000012), Some(1700000010), Some(1700000015), Some(1700000013), Some(1700000018), Some(1700000016), Some(1700000021), Some(1700000019), Some(1700000024)],
        &[0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
    ),
    (
        "below_min_clients_warmup",
        &[None, None, None, None, Some(1700000003), Some(1700000008), Some(1700000008), Some(1700000008), Some(1700000003), None, None, None, None, Some(1700000010), Some(1700000024), Some(1700000024), Some(1700000024), Some(1700000025)],
        &[0, 0, 0, 0, 0, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7],
    ),
    (
        "warmup_zero_time",
        &[None, None, None, None, Some(1700000003), Some(1700000004), Some(1700000004), Some(1700000004), Some(1700000004), Some(1700000009)],
        &[0, 0, 0, 0, 0, 7, 7, 7, 7, 7],
    ),
    (
        "health_check_two_targets",
        &[None, None, None, None, Some(1700000003), Some(1700000003), Some(1700000003), Some(1700000003), Some(1700000008), Some(1700000008), Some(1700000008), Some(1700000008), Some(1700000008), Some(1700000008), Some(1700000009), Some(1700000009), Some(1700000009), Some(1700000009), Some(1700000009), Some(1700000009), Some(1700000007), Some(1700000012), Some(1700000012), Some(1700000012), Some(1700000012), Some(1700000012), Some(1700000012), Some(1700000010), Some(1700000015), Some(1700000015), Some(1700000015), Some(1700000015), Some(1700000015), Some(1700000015), Some(1700000013), Some(1700000013), Some(1700000018), Some(1700000018), Some(1700000018), Some(1700000018), Some(1700000016), Some(1700000021)],
        &[0, 0, 0, 0, 0, 0, 0, 0, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 15, 15, 15, 15, 15, 15, 15, 15, 63, 63, 63, 63, 63, 63],
    ),
    (
        "health_check_partial_bloom",
        &[None, None, None, None, Some(1700000003), Some(1700000003), Some(1700000008), Some(1700000008), Some(1700000008), Some(1700000008), Some(1700000009), Some(1700000009), Some(1700000009), Some(1700000009), Some(1700000007), Some(1700000012), Some(1700000012), Some(1700000012), Some(1700000012), Some(1700000010), Some(1700000015), Some(1700000015), Some(1700000015), Some(1700000015), Some(1700000015), Some(1700000014), Some(1700000019), Some(1700000019)],
        &[0, 0, 0, 0, 0, 0, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 11, 11],
    ),
    (
        "warmup_timeout",
        &[None, None, None, None, None, Some(1700000003), Some(1700000013), Some(1700000013), Some(1700000013), Some(1700000013), Some(1700000013), Some(1700000013), Some(1700000018), Some(1700000018), Some(1700000018), Some(1700000017), Some(1700000022), Some(1700000022)],
        &[0, 0, 0, 0, 0, 0, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15],
    ),
    (
        "sync_phases_to_active",
        &[None, None, None, None, Some(1700000003), Some(1700000008), Some(1700000008), Some(1700000008), Some(1700000009), Some(1700000009), Some(1700000009), Some(1700000009), Some(1700000008), Some(1700000013), Some(1700000013), Some(1700000013), Some(1700000013), Some(1700000012), Some(1700000017), Some(1700000017), Some(1700000017), Some(1700000017), Some(1700000015), Some(1700000020), Some(1700000020), Some(1700000020), Some(1700000020), Some(1700000018), Some(1700000023), Some(1700000023), Some(1700000023), Some(1700000023), Some(1700000021), Some(1700000026)],
        &[0, 0, 0, 0, 0, 7, 7, 7, 7, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15],
    ),
];

#[test]
fn tick_deadline_and_is_healthy_match_python() {
    for (name, deadlines, healthy) in QUERIES {
        let path = vector_dir().join(format!("{name}.json"));
        let steps = replay(&path, &mut |i, s| {
            assert_eq!(
                core_::tick_deadline(s),
                deadlines[i],
                "{name}: tick_deadline after {i} steps"
            );
            let mask = (0..s.clients().len())
                .filter(|&c| core_::is_healthy(s, c))
                .fold(0u64, |m, c| m | 1 << c);
            assert_eq!(mask, healthy[i], "{name}: is_healthy mask after {i} steps");
        });
        assert_eq!(steps + 1, deadlines.len(), "{name}");
        assert_eq!(steps + 1, healthy.len(), "{name}");
    }
}

// ---------------------------------------------------------------- the decoder itself

#[test]
fn decoder_mirrors_ops_json() {
    let k = "ab".repeat(32);
    let ok = |op: &str, v: Value| decode_args(op, &v).map(|_| ());
    assert_eq!(ok("tick", serde_json::json!({})), Ok(()));
    assert_eq!(ok("tick", serde_json::json!([])), Err(E::InvalidOperation));
    assert_eq!(
        ok("frobnicate", serde_json::json!({})),
        Err(E::InvalidOperation)
    );
    assert_eq!(
        ok("withdraw", serde_json::json!({"signer": k.to_uppercase()})),
        Err(E::InvalidOperation)
    );
    assert_eq!(
        ok("withdraw", serde_json::json!({"signer": "abc"})),
        Err(E::InvalidOperation)
    );
    // only pairs of lowercase hex digits: no whitespace, no odd length
    assert_eq!(hex_lower("abcd01"), Some(vec![0xab, 0xcd, 0x01]));
    assert_eq!(hex_lower("ab cd"), None);
    assert_eq!(hex_lower("abc"), None);
    assert_eq!(hex_lower("zz"), None);
    assert_eq!(hex_lower("AB"), None);
    assert_eq!(hex_lower(""), Some(vec![]));
    let ck = |v: Value| ok("update", serde_json::json!({ "checkpoint": v }));
    assert_eq!(ck(serde_json::json!("Hub")), Err(E::InvalidOperation));
    assert_eq!(
        ck(serde_json::json!({"kind": "Gcs"})),
        Err(E::InvalidCheckpoint)
    );
    assert_eq!(
        ck(serde_json::json!({"repo": "a"})),
        Err(E::InvalidCheckpoint)
    );
    assert_eq!(
        ck(serde_json::json!({"kind": "Hub", "url": "a"})),
        Err(E::InvalidOperation)
    );
    assert_eq!(
        ck(serde_json::json!({"kind": "Hub", "repo": 5})),
        Err(E::InvalidOperation)
    );
    assert_eq!(
        ck(serde_json::json!({"kind": ["Hub"], "repo": "a"})),
        Err(E::InvalidCheckpoint)
    );
    let cfg = |v: Value| ok("update", serde_json::json!({ "config": v }));
    assert_eq!(cfg(serde_json::json!({})), Ok(()));
    assert_eq!(
        cfg(serde_json::json!({"min_clients": 70000})),
        Err(E::InvalidConfig)
    );
    assert_eq!(
        cfg(serde_json::json!({"epoch_time": 1e3})),
        Err(E::InvalidConfig)
    );
    assert_eq!(cfg(serde_json::json!({"nope": 1})), Err(E::InvalidConfig));
    assert_eq!(
        cfg(serde_json::json!({"max_syncing": 4, "sync_warmup_rounds": 0})),
        Ok(())
    );
    assert_eq!(
        cfg(serde_json::json!({"sync_warmup_rounds": 256})),
        Err(E::InvalidConfig)
    );
    assert_eq!(
        cfg(serde_json::json!({"checkpoint_interval": 65, "kept_rounds": 64})),
        Err(E::InvalidConfig)
    );
    assert_eq!(cfg(serde_json::json!(5)), Err(E::InvalidOperation));
    let hc = |t: Value| {
        ok(
            "health_check",
            serde_json::json!({"signer": k, "index": 0, "targets": t}),
        )
    };
    assert_eq!(hc(serde_json::json!([0, 65535])), Ok(()));
    assert_eq!(hc(serde_json::json!([65536])), Err(E::InvalidOperation));
    assert_eq!(hc(serde_json::json!([-1])), Err(E::InvalidOperation));
    assert_eq!(hc(serde_json::json!([])), Ok(())); // empty: InvalidHealthCheck in the op
    let ww = |i: Value| {
        ok(
            "warmup_witness",
            serde_json::json!({"signer": k, "index": i}),
        )
    };
    assert_eq!(ww(serde_json::json!(4294967295u64)), Ok(()));
    assert_eq!(
        ww(serde_json::json!(4294967296u64)),
        Err(E::InvalidOperation)
    );
    assert_eq!(ww(serde_json::json!(true)), Err(E::InvalidOperation));
    assert_eq!(ww(serde_json::json!(1.0)), Err(E::InvalidOperation));
    assert_eq!(ww(serde_json::json!("1")), Err(E::InvalidOperation));
    assert_eq!(ww(Value::Null), Err(E::InvalidOperation));
    let cp = |v: Value| ok("checkpoint", v);
    let h = "cd".repeat(32);
    assert_eq!(
        cp(serde_json::json!({"signer": k, "index": 0, "repo": "r", "step": 3, "param_hash": h})),
        Ok(())
    );
    // step and param_hash are required
    assert_eq!(
        cp(serde_json::json!({"signer": k, "index": 0, "repo": "r"})),
        Err(E::InvalidOperation)
    );
    assert_eq!(
        cp(serde_json::json!({"signer": k, "index": 0, "repo": "r", "step": -1, "param_hash": h})),
        Err(E::InvalidOperation)
    );
    // an update's checkpoint: hash 64 lowercase hex digits, step a u32
    assert_eq!(
        ck(serde_json::json!({"kind": "Stored", "repo": "a", "hash": h, "step": 7})),
        Ok(())
    );
    assert_eq!(
        ck(serde_json::json!({"kind": "Stored", "repo": "a", "hash": "ab".repeat(31)})),
        Err(E::InvalidOperation)
    );
    assert_eq!(
        ck(serde_json::json!({"kind": "Stored", "repo": "a", "hash": h.to_uppercase()})),
        Err(E::InvalidOperation)
    );
    assert_eq!(
        ck(serde_json::json!({"kind": "Stored", "repo": "a", "step": 4294967296u64})),
        Err(E::InvalidOperation)
    );
    // synced: step and param_hash required, step a u32; resync: signer and index only
    let sy = |v: Value| ok("synced", v);
    assert_eq!(
        sy(serde_json::json!({"signer": k, "index": 1, "step": 9, "param_hash": h})),
        Ok(())
    );
    assert_eq!(
        sy(serde_json::json!({"signer": k, "index": 1, "param_hash": h})),
        Err(E::InvalidOperation)
    );
    assert_eq!(
        sy(serde_json::json!({"signer": k, "index": 1, "step": 4294967296u64, "param_hash": h})),
        Err(E::InvalidOperation)
    );
    assert_eq!(
        ok("resync", serde_json::json!({"signer": k, "index": 2})),
        Ok(())
    );
    assert_eq!(
        ok(
            "resync",
            serde_json::json!({"signer": k, "index": 2, "step": 1})
        ),
        Err(E::InvalidOperation)
    );
    assert_eq!(
        cp(serde_json::json!({"signer": k, "index": 0, "repo": 5})),
        Err(E::InvalidOperation)
    );
    assert_eq!(
        cp(serde_json::json!({"signer": k, "index": 0})),
        Err(E::InvalidOperation)
    );
}

// ---------------------------------------------------------------- edge cases of the JSON itself

/// `tests/fuzz/ops_json_edge_cases.json` (written by `tests/fuzz/ops_json_edge_cases.py`): the
/// arguments of an operation as JSON *text* (-0, 2^64, 1e400, lone surrogates, duplicate keys,
/// bad syntax, deep nesting), with what the Python side answers: null, "Malformed" (its
/// `ops_json.loads` refuses the text) or a `decode_args` error code. serde_json's parse error
/// is "Malformed" here; every case must get the same answer.
#[test]
fn ops_json_edge_cases() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fuzz/ops_json_edge_cases.json");
    let doc: Value = serde_json::from_str(&fs::read_to_string(&path).expect("read edge cases"))
        .expect("edge cases file is JSON");
    let cases = doc["cases"].as_array().expect("cases");
    assert!(cases.len() >= 100, "only {} edge cases", cases.len());
    let mut wrong = Vec::new();
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let op = case["op"].as_str().expect("op");
        let text = case["args"].as_str().expect("args text");
        let want = case["error"].as_str().map(str::to_string);
        let got = match serde_json::from_str::<Value>(text) {
            Err(_) => Some("Malformed".to_string()),
            Ok(args) => decode_args(op, &args).err().map(|e| format!("{e:?}")),
        };
        if got != want {
            wrong.push(format!(
                "{name}: {op} {text:.80?}: Rust {got:?}, Python {want:?}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} edge cases differ:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}
