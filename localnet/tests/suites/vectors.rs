//! Every conformance vector replayed as instructions through the runtime, against a model of
//! the Python server (the core operation, then a tick after a successful client operation):
//! the program must agree with it on every error code and every state byte. Twice: with the
//! program as a native builtin, and as the SBF build kept in the repository
//! (`sbf/psyche_coordinator.so`, from `scripts/build-sbf`) under the VM, where every
//! instruction is metered: each transaction asks for the 1.4M compute units a transaction may
//! have, and the replay prints the most that each instruction used.
//!
//! The vectors' clients are bare 32-byte keys without secret keys, so this replay turns the
//! chain's signature check off: the runtime then takes an account's signer flag as given, as it
//! does after verifying signatures. Everything else (accounts, sysvars, CPIs) is the chain's.
//!
//! Points: a `settle` step is sent as `settle_points` with the slot identity's contributor
//! account, and after every accepted one the contributor account must hold the vector's
//! `expect.entry` (and the model's slot the `expect.credited` it moved). A `join` as another
//! identity than its signer needs the identity's contributor account to list the signer as a
//! delegate: the replay sends the identity's `set_delegates` first. The vectors' identities are
//! bare keys without secret keys too, but with the signature check off the runtime takes the
//! identity's signer flag as given, so the real instruction creates the account (no
//! `set_account` into the bank is needed). Join signers are funded first: a signer joining as
//! itself pays for its new contributor account.

use std::collections::{BTreeMap, BTreeSet};

use anchor_lang::AccountDeserialize;
use psyche_coordinator::{
    CheckpointKindParam, CheckpointParams, Contributor, CoordinatorAccount,
    CoordinatorProgramError as PE, RunConfigParams,
};
use psyche_coordinator_core::{
    self as core_sm, CoordinatorError, CoordinatorState, RunConfig, VERSION_OFFSET,
};
use psyche_localnet::ix::{create_coordinator_account, Run};
use serde_json::Value;
use solana_instruction::error::InstructionError;
use solana_instruction::Instruction;
use solana_message::Message;
use solana_pubkey::Pubkey;
use solana_signer::Signer;
use solana_transaction::Transaction;
use solana_transaction_error::TransactionError;

use crate::support::*;

/// A vector step as an instruction, when its arguments can be one (well-formed hex,
/// 32-byte keys and merkle root, integers in range, known keys); None otherwise: such steps
/// are rejected by `decode_args` or the operation's own argument checks.
#[derive(Clone, Debug)]
enum Op {
    Tick,
    /// signer, p2p identity, the identity the points go to (None: the signer)
    Join([u8; 32], [u8; 32], Option<[u8; 32]>),
    Settle(u32),
    Withdraw([u8; 32]),
    WarmupWitness([u8; 32], u32),
    Witness([u8; 32], u32, u32, Vec<u8>, Vec<u8>, [u8; 32], [u8; 32]),
    HealthCheck([u8; 32], u32, Vec<u16>),
    /// signer, index, step, target
    Evidence([u8; 32], u32, u32, u16),
    Checkpoint([u8; 32], u32, String, String, u32, [u8; 32]),
    Synced([u8; 32], u32, u32, [u8; 32]),
    Resync([u8; 32], u32),
    Pause,
    Resume,
    Update(
        Option<RunConfigParams>,
        Option<CheckpointParams>,
        Option<[u8; 32]>,
    ),
}

impl Op {
    fn is_client_op(&self) -> bool {
        !matches!(self, Op::Tick | Op::Pause | Op::Resume | Op::Update(..))
    }
}

fn hex_bytes(v: &Value) -> Option<Vec<u8>> {
    let s = v.as_str()?;
    if s.len() % 2 != 0
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    hex::decode(s).ok()
}

fn key(v: &Value) -> Option<[u8; 32]> {
    hex_bytes(v)?.try_into().ok()
}

fn int<T: TryFrom<u64>>(v: &Value) -> Option<T> {
    v.as_u64().and_then(|n| T::try_from(n).ok())
}

fn config_from_json(v: &Value) -> Option<RunConfig> {
    let obj = v.as_object()?;
    let mut c = RunConfig::DEFAULT;
    for (k, v) in obj {
        match k.as_str() {
            "warmup_time" => c.warmup_time = int(v)?,
            "cooldown_time" => c.cooldown_time = int(v)?,
            "max_round_train_time" => c.max_round_train_time = int(v)?,
            "round_witness_time" => c.round_witness_time = int(v)?,
            "epoch_time" => c.epoch_time = int(v)?,
            "global_batch_size_warmup_tokens" => c.global_batch_size_warmup_tokens = int(v)?,
            "total_steps" => c.total_steps = int(v)?,
            "max_seq_len" => c.max_seq_len = int(v)?,
            "checkpoint_interval" => c.checkpoint_interval = int(v)?,
            "min_clients" => c.min_clients = int(v)?,
            "init_min_clients" => c.init_min_clients = int(v)?,
            "witness_nodes" => c.witness_nodes = int(v)?,
            "global_batch_size_start" => c.global_batch_size_start = int(v)?,
            "global_batch_size_end" => c.global_batch_size_end = int(v)?,
            "verification_percent" => c.verification_percent = int(v)?,
            "checkpointer_percent" => c.checkpointer_percent = int(v)?,
            "waiting_for_members_extra_time" => c.waiting_for_members_extra_time = int(v)?,
            "max_clients" => c.max_clients = int(v)?,
            "max_syncing" => c.max_syncing = int(v)?,
            "kept_rounds" => c.kept_rounds = int(v)?,
            "sync_warmup_rounds" => c.sync_warmup_rounds = int(v)?,
            "flops_per_token" => c.flops_per_token = int(v)?,
            "tokens_per_compute_point" => c.tokens_per_compute_point = int(v)?,
            "points_cap" => c.points_cap = int(v)?,
            "presence_points" => c.presence_points = int(v)?,
            "evidence_quorum" => c.evidence_quorum = int(v)?,
            "verify_sample" => c.verify_sample = int(v)?,
            _ => return None,
        }
    }
    Some(c)
}

fn checkpoint_from_json(v: &Value) -> Option<CheckpointParams> {
    let obj = v.as_object()?;
    if obj
        .keys()
        .any(|k| !["kind", "repo", "revision", "hash", "step"].contains(&k.as_str()))
    {
        return None;
    }
    let kind = match obj.get("kind")?.as_str()? {
        "Dummy" => CheckpointKindParam::Dummy,
        "Hub" => CheckpointKindParam::Hub,
        "P2P" => CheckpointKindParam::P2P,
        "Stored" => CheckpointKindParam::Stored,
        _ => return None,
    };
    let text = |k: &str| match obj.get(k) {
        None => Some(String::new()),
        Some(v) => v.as_str().map(str::to_string),
    };
    Some(CheckpointParams {
        kind,
        repo: text("repo")?,
        revision: text("revision")?,
        hash: match obj.get("hash") {
            None => [0; 32],
            Some(v) => key(v)?,
        },
        step: match obj.get("step") {
            None => 0,
            Some(v) => int(v)?,
        },
    })
}

fn decode(op: &str, args: &Value) -> Option<Op> {
    let a = args.as_object()?;
    let allowed: &[&str] = match op {
        "tick" | "pause" | "resume" => &[],
        "join" => &["signer", "p2p_identity", "identity"],
        "settle" => &["index"],
        "withdraw" => &["signer"],
        "warmup_witness" => &["signer", "index"],
        "witness" => &[
            "signer",
            "index",
            "step",
            "participant_bloom",
            "broadcast_bloom",
            "broadcast_merkle",
            "param_hash",
        ],
        "health_check" => &["signer", "index", "targets"],
        "evidence" => &["signer", "index", "step", "target"],
        "checkpoint" => &["signer", "index", "repo", "revision", "step", "param_hash"],
        "synced" => &["signer", "index", "step", "param_hash"],
        "resync" => &["signer", "index"],
        "update" => &["config", "checkpoint", "spec_hash"],
        _ => return None,
    };
    if a.keys().any(|k| !allowed.contains(&k.as_str())) {
        return None;
    }
    let g = |k: &str| a.get(k);
    Some(match op {
        "tick" => Op::Tick,
        "pause" => Op::Pause,
        "resume" => Op::Resume,
        "join" => Op::Join(
            key(g("signer")?)?,
            key(g("p2p_identity")?)?,
            match g("identity") {
                None => None,
                Some(v) => Some(key(v)?),
            },
        ),
        "settle" => Op::Settle(int(g("index")?)?),
        "withdraw" => Op::Withdraw(key(g("signer")?)?),
        "warmup_witness" => Op::WarmupWitness(key(g("signer")?)?, int(g("index")?)?),
        "witness" => Op::Witness(
            key(g("signer")?)?,
            int(g("index")?)?,
            int(g("step")?)?,
            hex_bytes(g("participant_bloom")?)?,
            hex_bytes(g("broadcast_bloom")?)?,
            key(g("broadcast_merkle")?)?,
            key(g("param_hash")?)?,
        ),
        "health_check" => Op::HealthCheck(
            key(g("signer")?)?,
            int(g("index")?)?,
            g("targets")?
                .as_array()?
                .iter()
                .map(int)
                .collect::<Option<_>>()?,
        ),
        "evidence" => Op::Evidence(
            key(g("signer")?)?,
            int(g("index")?)?,
            int(g("step")?)?,
            int(g("target")?)?,
        ),
        "checkpoint" => Op::Checkpoint(
            key(g("signer")?)?,
            int(g("index")?)?,
            g("repo")?.as_str()?.to_string(),
            match g("revision") {
                None => String::new(),
                Some(v) => v.as_str()?.to_string(),
            },
            int(g("step")?)?,
            key(g("param_hash")?)?,
        ),
        "synced" => Op::Synced(
            key(g("signer")?)?,
            int(g("index")?)?,
            int(g("step")?)?,
            key(g("param_hash")?)?,
        ),
        "resync" => Op::Resync(key(g("signer")?)?, int(g("index")?)?),
        "update" => Op::Update(
            match g("config") {
                None => None,
                // `RunConfig.from_dict` validates while decoding, before `update` runs its
                // halted check: an invalid config is a decoding error in the vectors.
                Some(v) => {
                    let c = config_from_json(v)?;
                    c.validate().ok()?;
                    Some(RunConfigParams::from_core(&c))
                }
            },
            match g("checkpoint") {
                None => None,
                Some(v) => Some(checkpoint_from_json(v)?),
            },
            match g("spec_hash") {
                None => None,
                Some(v) => Some(key(v)?),
            },
        ),
        _ => return None,
    })
}

/// The core operation alone (what a vector step records).
fn apply_core(s: &mut CoordinatorState, now: u64, op: &Op) -> Result<(), CoordinatorError> {
    match op {
        Op::Tick => core_sm::tick(s, now),
        Op::Join(k, p, id) => core_sm::join(s, now, k, p, id.as_ref().map(|i| &i[..])),
        Op::Settle(i) => core_sm::settle(s, now, *i),
        Op::Withdraw(k) => core_sm::withdraw(s, now, k),
        Op::WarmupWitness(k, i) => core_sm::warmup_witness(s, now, k, *i),
        Op::Witness(k, i, st, pb, bb, m, h) => core_sm::witness(s, now, k, *i, *st, pb, bb, m, h),
        Op::HealthCheck(k, i, t) => core_sm::health_check(s, now, k, *i, t),
        Op::Evidence(k, i, st, t) => core_sm::evidence(s, now, k, *i, *st, *t),
        Op::Checkpoint(k, i, r, v, st, h) => {
            core_sm::checkpoint(s, now, k, *i, r.as_bytes(), v.as_bytes(), *st, h)
        }
        Op::Synced(k, i, st, h) => core_sm::synced(s, now, k, *i, *st, h),
        Op::Resync(k, i) => core_sm::resync(s, now, k, *i),
        Op::Pause => core_sm::pause(s, now),
        Op::Resume => core_sm::resume(s, now),
        Op::Update(c, ck, h) => {
            let c = c.map(|c| c.to_core());
            let ck = ck.as_ref().map(CheckpointParams::as_core);
            core_sm::update(s, now, c.as_ref(), ck.as_ref(), h.as_ref().map(|h| &h[..]))
        }
    }
}

/// `settle_identity`: the identity whose contributor account a `settle` step passes (the
/// slot's, or for an index past the clients any existing contributor's: the core refuses the
/// index first).
fn instruction_for(
    env: &Env,
    run: &Run,
    authority: &Pubkey,
    op: &Op,
    settle_identity: &Pubkey,
) -> Instruction {
    let key = |k: &[u8; 32]| Pubkey::new_from_array(*k);
    match op {
        Op::Tick => run.tick(&env.payer.pubkey()),
        Op::Join(k, p, id) => run.join_run_as(&key(k), None, *p, &key(&id.unwrap_or(*k))),
        Op::Settle(i) => run.settle_points(&env.payer.pubkey(), *i, settle_identity),
        Op::Withdraw(k) => run.withdraw(&key(k)),
        Op::WarmupWitness(k, i) => run.warmup_witness(&key(k), *i),
        Op::Witness(k, i, st, pb, bb, m, h) => {
            run.witness(&key(k), *i, *st, pb.clone(), bb.clone(), *m, *h)
        }
        Op::HealthCheck(k, i, t) => run.health_check(&key(k), *i, t.clone()),
        Op::Evidence(k, i, st, t) => run.evidence(&key(k), *i, *st, *t),
        Op::Checkpoint(k, i, r, v, st, h) => run.checkpoint(&key(k), *i, r, v, *st, *h),
        Op::Synced(k, i, st, h) => run.synced(&key(k), *i, *st, *h),
        Op::Resync(k, i) => run.resync(&key(k), *i),
        Op::Pause => run.set_paused(authority, true),
        Op::Resume => run.set_paused(authority, false),
        Op::Update(c, ck, h) => run.update_spec(authority, *c, ck.clone(), *h),
    }
}

/// The most compute units a transaction may ask for (`SetComputeUnitLimit`).
const MAX_COMPUTE_UNITS: u32 = 1_400_000;

/// The most compute units each instruction used (by its name in the program's log).
type UnitsUsed = BTreeMap<String, u64>;

/// Sends `ix` on a new slot after a compute budget of [`MAX_COMPUTE_UNITS`], signed by the
/// payer only (the signature check is off): the custom error code of a refusal. Notes the
/// compute units used under the instruction's name.
fn send_unsigned(env: &mut Env, ix: Instruction, used: &mut UnitsUsed) -> Result<(), u32> {
    env.chain.advance_slot(env.now);
    let (hash, _) = env.chain.latest_blockhash();
    let payer = env.payer.insecure_clone();
    let mut limit = vec![2u8]; // ComputeBudgetInstruction::SetComputeUnitLimit
    limit.extend_from_slice(&MAX_COMPUTE_UNITS.to_le_bytes());
    let budget = Instruction {
        program_id: solana_sdk_ids::compute_budget::ID,
        accounts: vec![],
        data: limit,
    };
    let mut tx = Transaction::new_unsigned(Message::new_with_blockhash(
        &[budget, ix],
        Some(&payer.pubkey()),
        &hash,
    ));
    tx.partial_sign(&[&payer], hash);
    let sent = env.chain.send(tx.into());
    let (logs, units) = match &sent {
        Ok(m) => (&m.logs, m.compute_units_consumed),
        Err(f) => (&f.meta.logs, f.meta.compute_units_consumed),
    };
    if let Some(name) = logs
        .iter()
        .find_map(|l| l.strip_prefix("Program log: Instruction: "))
    {
        let most = used.entry(name.to_string()).or_default();
        *most = (*most).max(units);
    }
    match sent {
        Ok(_) => Ok(()),
        Err(f) => match f.err {
            TransactionError::InstructionError(1, InstructionError::Custom(c)) => Err(c),
            e => panic!("not a custom error: {e:?}\n{}", f.meta.logs.join("\n")),
        },
    }
}

fn vectors_dir() -> std::path::PathBuf {
    match std::env::var_os("PSYCHE_VECTORS_DIR") {
        Some(d) => d.into(),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors"),
    }
}

/// The program's SBF build kept in the repository; `scripts/build-sbf --check` (in
/// `scripts/test`) fails first when its inputs changed since it was built.
fn sbf_elf() -> Vec<u8> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../sbf/psyche_coordinator.so");
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (build it with scripts/build-sbf)", path.display()))
}

/// Every conformance vector, as instructions to the native program.
#[test]
fn conformance_vectors_replayed_as_instructions() {
    replay_vectors(None);
}

/// Every conformance vector, as instructions to the SBF build under the VM.
#[test]
fn conformance_vectors_replayed_on_sbf() {
    let used = replay_vectors(Some(&sbf_elf()));
    println!("most compute units per instruction under the VM (vectors' runs, up to 256 clients):");
    for (name, units) in &used {
        println!("  {name:<16} {units:>9}");
    }
}

/// Replays every vector against the native program, or against `elf` loaded in its place;
/// returns the most compute units each instruction used. Three trajectories per file:
/// - the core alone must reproduce the vector (checks this test's decoding of the steps);
/// - the model (core operation, then a tick after a successful client operation, as the
///   Python server does) and the program must agree on every error code and state byte.
fn replay_vectors(elf: Option<&[u8]>) -> UnitsUsed {
    let mut files: Vec<_> = std::fs::read_dir(vectors_dir())
        .expect("vectors dir")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    // the program's `msg!` prints natively: keep --nocapture output to the summary
    let quiet = QuietStdout::new();
    let (mut steps, mut sent, mut ticked) = (0usize, 0usize, 0usize);
    let (mut settled, mut delegations) = (0usize, 0usize);
    // One chain for every vector (a new one costs more than a vector's steps): each vector
    // has its own run id, so its own instance and coordinator account.
    let mut env = Env::new();
    env.chain.svm = std::mem::take(&mut env.chain.svm).with_sigverify(false);
    if let Some(elf) = elf {
        env.chain
            .svm
            .add_program(psyche_coordinator::ID, elf)
            .expect("LiteSVM loads the SBF program");
    }
    let mut used = UnitsUsed::new();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let init = &v["initial"];
        let run_id = init["run_id"].as_str().unwrap();
        let config = config_from_json(&init["config"]).unwrap();
        let seed = init["run_seed"].as_u64().unwrap();
        let ck = checkpoint_from_json(&init["checkpoint"]).unwrap();

        // the vector's trajectory (core only)
        let mut vector = StateBuf::zeroed();
        core_sm::new_run(
            vector.get_mut(),
            run_id.as_bytes(),
            &config,
            seed,
            &ck.as_core(),
        )
        .unwrap();

        // the program: init (dummy checkpoint) then update to the vector's checkpoint
        env.set_time(v["steps"][0]["time"].as_i64().unwrap_or(0));
        let account = env.new_keypair();
        let authority = env.keypair();
        let run = Run::new(run_id, account.pubkey());
        assert!(
            env.account(&run.instance).is_none(),
            "{name}: run id {run_id:?} is another vector's"
        );
        let rent = env
            .chain
            .svm
            .minimum_balance_for_rent_exemption(CoordinatorAccount::SPACE);
        let payer = env.payer.pubkey();
        let params = RunConfigParams::from_core(&config);
        let a = authority.pubkey();
        env.ok(
            &[&account],
            &[
                create_coordinator_account(&payer, &account.pubkey(), rent),
                run.init(&payer, run_id, a, a, true, params, seed),
            ],
        );
        env.ok(&[&authority], &[run.update(&a, None, Some(ck))]);
        // an account another version of the program made (`layout_version_mismatch`): only
        // that number differs, in the vector's state and in the account
        if let Some(version) = init.get("layout_version") {
            let version: u32 = int(version).expect("layout_version is a u32");
            vector.get_mut().header.layout_version = version;
            let mut acct = env.account(&run.account).unwrap();
            acct.data[8 + VERSION_OFFSET..8 + VERSION_OFFSET + 4]
                .copy_from_slice(&version.to_le_bytes());
            env.chain.svm.set_account(run.account, acct).unwrap();
        }
        assert_eq!(
            hex::encode(core_sm::state_hash(vector.get())),
            v["initial_hash"].as_str().unwrap()
        );
        assert!(
            env.state(&run.account).bytes() == vector.bytes(),
            "{name}: initial state"
        );
        let mut model = StateBuf::from_state_bytes(vector.bytes());
        // this run's identity -> the delegates its contributor account lists; funded signers
        let mut delegates: BTreeMap<Pubkey, Vec<Pubkey>> = BTreeMap::new();
        let mut funded: BTreeSet<Pubkey> = BTreeSet::new();
        let mut payer_contributor = false;

        for (i, step) in v["steps"].as_array().unwrap().iter().enumerate() {
            steps += 1;
            let now = step["time"].as_u64().unwrap();
            let expect = &step["expect"];
            let op = step["op"].as_str().and_then(|o| decode(o, &step["args"]));
            let Some(op) = op else {
                assert!(
                    !expect["error"].is_null(),
                    "{name} step {i}: undecodable step succeeded"
                );
                continue;
            };
            // 1. the core alone reproduces the vector
            let r = apply_core(vector.get_mut(), now, &op);
            assert_eq!(
                r.err().map(|e| e.code()),
                expect["error"].as_str(),
                "{name} step {i} ({op:?})"
            );
            assert_eq!(
                hex::encode(core_sm::state_hash(vector.get())),
                expect["hash"].as_str().unwrap(),
                "{name} step {i}: core hash"
            );
            // 2. the model of the server: operation, then tick
            let before = StateBuf::from_state_bytes(model.bytes());
            let r = apply_core(model.get_mut(), now, &op);
            if r.is_ok() && op.is_client_op() {
                let before_tick = StateBuf::from_state_bytes(model.bytes());
                let _ = core_sm::tick(model.get_mut(), now);
                if model.bytes() != before_tick.bytes() {
                    ticked += 1;
                }
            }
            if r.is_err() {
                assert!(model.bytes() == before.bytes());
            }
            // 3. the program
            env.now = now as i64;
            let settle_identity = match &op {
                Op::Join(k, _, id) => {
                    let signer = Pubkey::new_from_array(*k);
                    if funded.insert(signer) {
                        env.chain.airdrop(&signer, 10 * SOL).unwrap();
                    }
                    let identity = Pubkey::new_from_array(id.unwrap_or(*k));
                    let listed = delegates.entry(identity).or_default();
                    if identity != signer && !listed.contains(&signer) {
                        // the identity (signer flag taken as given) lists the signer
                        listed.push(signer);
                        let ix = run.set_delegates(&payer, &identity, listed.clone());
                        send_unsigned(&mut env, ix, &mut used).expect("set_delegates");
                        delegations += 1;
                    }
                    identity
                }
                Op::Settle(index) => match before.get().clients().get(*index as usize) {
                    Some(c) => Pubkey::new_from_array(c.identity),
                    None => {
                        // no slot: any contributor account passes the accounts' checks
                        if !payer_contributor {
                            let ix = run.set_delegates(&payer, &payer, vec![]);
                            send_unsigned(&mut env, ix, &mut used).expect("set_delegates");
                            payer_contributor = true;
                        }
                        payer
                    }
                },
                _ => payer,
            };
            let ix = instruction_for(&env, &run, &a, &op, &settle_identity);
            let got = send_unsigned(&mut env, ix, &mut used);
            sent += 1;
            assert_eq!(
                got,
                r.map_err(|e| PE::from(e).code()),
                "{name} step {i} ({op:?}): program error"
            );
            assert!(
                env.state(&run.account).bytes() == model.bytes(),
                "{name} step {i} ({op:?}): program state"
            );
            // 4. an accepted settle: what moved, and the contributor account after it
            if let (Op::Settle(index), Ok(())) = (&op, got) {
                let moved = core_sm::pending_credit(before.get(), *index).unwrap();
                let credited = &expect["credited"];
                assert_eq!(
                    (hex::encode(moved.identity), moved.presence, moved.sequences),
                    (
                        credited["identity"].as_str().unwrap().to_string(),
                        credited["presence"].as_u64().unwrap(),
                        credited["sequences"].as_u64().unwrap()
                    ),
                    "{name} step {i}: credited"
                );
                let data = env.data(&run.contributor(&settle_identity));
                let c = Contributor::try_deserialize(&mut &data[..]).unwrap();
                let e = &expect["entry"];
                let want = |k: &str| e[k].as_u64().unwrap();
                assert_eq!(
                    (
                        hex::encode(c.identity),
                        c.presence_rounds,
                        c.sequences,
                        c.tokens,
                        c.token_carry,
                        c.presence_points,
                        c.compute_points
                    ),
                    (
                        e["identity"].as_str().unwrap().to_string(),
                        want("presence_rounds"),
                        want("sequences"),
                        want("tokens"),
                        want("token_carry"),
                        want("presence_points"),
                        want("compute_points")
                    ),
                    "{name} step {i}: contributor account"
                );
                settled += 1;
            }
        }
    }
    drop(quiet);
    println!(
        "replayed {} vectors: {steps} steps, {sent} sent as instructions, {ticked} changed by the tick after a client operation, {settled} settles checked against the contributor account, {delegations} delegations set",
        files.len()
    );
    assert!(sent > steps / 2);
    assert!(settled > 0 && delegations > 0);
    used
}
