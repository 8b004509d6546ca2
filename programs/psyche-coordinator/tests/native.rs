//! The program's instructions through its Anchor `entry`, natively, on the in-process bank of
//! `harness` (the loader's input format, Clock/Rent sysvars and system-program CPIs stubbed):
//! account checks, authority rules, errors, and every conformance vector replayed as
//! instructions against a model of the Python server (core operation, then tick).

mod harness;

use anchor_lang::prelude::{Pubkey, Rent};
use anchor_lang::solana_program::instruction::Instruction;
use anchor_lang::{AccountDeserialize, Discriminator, InstructionData, ToAccountMetas};
use harness::{Bank, TestAccount, TxError};
use psyche_coordinator::{
    accounts as acc, instruction as ixs, run_id_seed, CheckpointKindParam, CheckpointParams,
    CoordinatorAccount, CoordinatorInstance, CoordinatorProgramError as PE, JoinAuthorization,
    RunConfigParams, AUTHORIZATION_SEED, COORDINATOR_SEED,
};
use psyche_coordinator_core::{
    self as core_sm, CheckpointArgs, CoordinatorError, CoordinatorState, RunConfig, RunState,
    STATE_SIZE,
};
use serde_json::Value;

const PROGRAM: Pubkey = psyche_coordinator::ID;
const T0: i64 = 1_700_000_000;

fn ix(accounts: impl ToAccountMetas, data: impl InstructionData) -> Instruction {
    Instruction {
        program_id: PROGRAM,
        accounts: accounts.to_account_metas(None),
        data: data.data(),
    }
}

/// A heap `CoordinatorState` (never on the stack).
struct Model(Vec<u64>);

impl Model {
    fn zeroed() -> Self {
        Model(vec![0u64; STATE_SIZE / 8])
    }
    fn from_bytes(bytes: &[u8]) -> Self {
        let mut m = Self::zeroed();
        bytemuck::cast_slice_mut::<u64, u8>(&mut m.0).copy_from_slice(bytes);
        m
    }
    fn get(&self) -> &CoordinatorState {
        bytemuck::from_bytes(bytemuck::cast_slice(&self.0))
    }
    fn get_mut(&mut self) -> &mut CoordinatorState {
        bytemuck::from_bytes_mut(bytemuck::cast_slice_mut(&mut self.0))
    }
    fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.0)
    }
}

fn err(e: PE) -> Result<(), u32> {
    Err(e.code())
}

fn code(r: Result<(), TxError>) -> Result<(), u32> {
    r.map_err(|e| match e.custom() {
        Some(c) => c,
        None => panic!("not a custom error: {e:?}"),
    })
}

fn small_config() -> RunConfig {
    RunConfig {
        warmup_time: 5,
        cooldown_time: 5,
        max_round_train_time: 5,
        round_witness_time: 2,
        epoch_time: 60,
        total_steps: 20,
        min_clients: 1,
        init_min_clients: 1,
        waiting_for_members_extra_time: 3,
        ..RunConfig::DEFAULT
    }
}

struct Run {
    bank: Bank,
    payer: Pubkey,
    authority: Pubkey,
    join_authority: Pubkey,
    instance: Pubkey,
    account: Pubkey,
}

fn instance_key(run_id: &str) -> Pubkey {
    Pubkey::find_program_address(&[COORDINATOR_SEED, run_id_seed(run_id)], &PROGRAM).0
}

/// A pre-allocated coordinator account as the creator's `create_account` leaves it.
fn blank_coordinator_account(bank: &mut Bank, len: usize) -> Pubkey {
    let key = Pubkey::new_unique();
    bank.set_account(
        key,
        TestAccount {
            lamports: Rent::default().minimum_balance(len),
            owner: PROGRAM,
            data: vec![0; len],
            executable: false,
        },
    );
    key
}

#[allow(clippy::too_many_arguments)]
fn init_ix(
    payer: Pubkey,
    account: Pubkey,
    run_id: &str,
    authority: Pubkey,
    join_authority: Pubkey,
    permissionless: bool,
    config: &RunConfig,
    run_seed: u64,
) -> Instruction {
    ix(
        acc::InitCoordinator {
            payer,
            coordinator_instance: instance_key(run_id),
            coordinator_account: account,
            system_program: anchor_lang::system_program::ID,
        },
        ixs::InitCoordinator {
            run_id: run_id.to_string(),
            main_authority: authority,
            join_authority,
            permissionless,
            config: RunConfigParams::from_core(config),
            run_seed,
        },
    )
}

impl Run {
    fn new(run_id: &str, permissionless: bool, config: &RunConfig) -> Self {
        let mut run = Run::blank(run_id, T0);
        run.account = run.add_run(run_id, permissionless, config).unwrap();
        run
    }

    /// A bank with a funded payer and fresh authorities, before any run is created.
    fn blank(run_id: &str, unix_timestamp: i64) -> Self {
        let mut bank = Bank::new(PROGRAM, psyche_coordinator::entry);
        bank.unix_timestamp = unix_timestamp;
        let payer = Pubkey::new_unique();
        bank.airdrop(payer, 100_000_000_000);
        Run {
            bank,
            payer,
            authority: Pubkey::new_unique(),
            join_authority: Pubkey::new_unique(),
            instance: instance_key(run_id),
            account: Pubkey::default(),
        }
    }

    /// Another run on the same bank, same authorities; returns its coordinator account.
    fn add_run(
        &mut self,
        run_id: &str,
        permissionless: bool,
        config: &RunConfig,
    ) -> Result<Pubkey, u32> {
        let account = blank_coordinator_account(&mut self.bank, CoordinatorAccount::SPACE);
        let i = init_ix(
            self.payer,
            account,
            run_id,
            self.authority,
            self.join_authority,
            permissionless,
            config,
            42,
        );
        code(self.bank.process(&i))?;
        Ok(account)
    }

    fn state(&self) -> Model {
        Model::from_bytes(&self.bank.account(&self.account).unwrap().data[8..])
    }

    fn instance(&self) -> CoordinatorInstance {
        let data = &self.bank.account(&self.instance).unwrap().data;
        CoordinatorInstance::try_deserialize(&mut &data[..]).unwrap()
    }

    fn owner(&self, signer: Pubkey) -> acc::OwnerCoordinatorAccounts {
        acc::OwnerCoordinatorAccounts {
            authority: signer,
            coordinator_instance: self.instance,
            coordinator_account: self.account,
        }
    }

    fn user(&self, user: Pubkey) -> acc::PermissionlessCoordinatorAccounts {
        acc::PermissionlessCoordinatorAccounts {
            user,
            coordinator_instance: self.instance,
            coordinator_account: self.account,
        }
    }

    fn send(&mut self, i: Instruction) -> Result<(), u32> {
        code(self.bank.process(&i))
    }

    fn set_paused(&mut self, signer: Pubkey, paused: bool) -> Result<(), u32> {
        self.send(ix(self.owner(signer), ixs::SetPaused { paused }))
    }

    fn tick(&mut self) -> Result<(), u32> {
        self.send(ix(self.user(Pubkey::new_unique()), ixs::Tick {}))
    }

    fn join(&mut self, user: Pubkey, authorization: Option<Pubkey>) -> Result<(), u32> {
        let accounts = acc::JoinRunAccounts {
            user,
            coordinator_instance: self.instance,
            coordinator_account: self.account,
            authorization,
        };
        self.send(ix(
            accounts,
            ixs::JoinRun {
                p2p_identity: [7; 32],
            },
        ))
    }

    fn authorization_key(&self, grantee: &Pubkey) -> Pubkey {
        Pubkey::find_program_address(
            &[AUTHORIZATION_SEED, self.instance.as_ref(), grantee.as_ref()],
            &PROGRAM,
        )
        .0
    }

    fn authorize_ix(&self, signer: Pubkey, grantee: Pubkey) -> Instruction {
        let accounts = acc::AuthorizeJoiner {
            payer: self.payer,
            join_authority: signer,
            coordinator_instance: self.instance,
            authorization: self.authorization_key(&grantee),
            system_program: anchor_lang::system_program::ID,
        };
        ix(accounts, ixs::AuthorizeJoiner { grantee })
    }

    fn authorize(&mut self, signer: Pubkey, grantee: Pubkey) -> Result<(), u32> {
        self.send(self.authorize_ix(signer, grantee))
    }
}

fn run_state(m: &Model) -> RunState {
    m.get().run_state()
}

// ------------------------------------------------------------------------------ init

#[test]
fn init_writes_the_core_new_run_and_the_instance() {
    let config = small_config();
    let run = Run::new("run-1", true, &config);
    let data = &run.bank.account(&run.account).unwrap().data;
    assert_eq!(data.len(), 8 + 133_640);
    assert_eq!(&data[..8], CoordinatorAccount::DISCRIMINATOR);
    let mut expected = Model::zeroed();
    core_sm::new_run(
        expected.get_mut(),
        b"run-1",
        &config,
        42,
        &CheckpointArgs::DUMMY,
    )
    .unwrap();
    assert!(
        data[8..] == *expected.bytes(),
        "state differs from the core's new_run"
    );
    assert_eq!(run_state(&run.state()), RunState::Uninitialized);

    let (pda, bump) = Pubkey::find_program_address(&[b"coordinator", b"run-1"], &PROGRAM);
    assert_eq!(pda, run.instance);
    assert_eq!(
        run.instance(),
        CoordinatorInstance {
            bump,
            main_authority: run.authority,
            join_authority: run.join_authority,
            permissionless: true,
            coordinator_account: run.account,
            run_id: "run-1".into(),
        }
    );
    let instance = run.bank.account(&run.instance).unwrap();
    assert_eq!(instance.owner, PROGRAM);
    assert_eq!(instance.data.len(), CoordinatorInstance::SPACE);
    assert_eq!(
        instance.lamports,
        Rent::default().minimum_balance(CoordinatorInstance::SPACE)
    );
}

#[test]
fn init_rejects_bad_run_ids_configs_and_accounts() {
    let config = small_config();
    let mut run = Run::new("base", true, &config);
    let long = "x".repeat(33);
    assert_eq!(
        run.add_run(&long, true, &config).map(|_| ()),
        err(PE::RunIdInvalidLength)
    );
    assert_eq!(
        run.add_run("", true, &config).map(|_| ()),
        err(PE::RunIdInvalidLength)
    );
    assert_eq!(
        run.add_run("a\0b", true, &config).map(|_| ()),
        err(PE::InvalidRunId)
    );
    let bad = RunConfig {
        epoch_time: 0,
        ..config
    };
    assert_eq!(
        run.add_run("bad-config", true, &bad).map(|_| ()),
        err(PE::InvalidConfig)
    );
    // the same run id twice: the instance PDA exists (the system program refuses it)
    let fresh = blank_coordinator_account(&mut run.bank, CoordinatorAccount::SPACE);
    assert!(matches!(
        run.bank.process(&init_ix(
            run.payer,
            fresh,
            "base",
            run.authority,
            run.join_authority,
            true,
            &config,
            1
        )),
        Err(TxError::Program(_))
    ));

    let payer = run.payer;
    let try_account = |run: &mut Run, account: Pubkey, run_id: &str| {
        let i = init_ix(
            payer,
            account,
            run_id,
            run.authority,
            run.join_authority,
            true,
            &config,
            1,
        );
        code(run.bank.process(&i))
    };
    for len in [
        CoordinatorAccount::SPACE - 8,
        CoordinatorAccount::SPACE + 8,
        0,
    ] {
        let a = blank_coordinator_account(&mut run.bank, len);
        assert_eq!(
            try_account(&mut run, a, "sized"),
            err(PE::AccountIncorrectSize),
            "len {len}"
        );
    }
    // already initialized: another run's coordinator account
    let other = run.account;
    assert_eq!(
        try_account(&mut run, other, "reuse"),
        err(PE::AccountAlreadyInitialized)
    );
    // not owned by the program: Anchor's ConstraintOwner
    let a = blank_coordinator_account(&mut run.bank, CoordinatorAccount::SPACE);
    run.bank.accounts.get_mut(&a).unwrap().owner = anchor_lang::system_program::ID;
    assert_eq!(
        try_account(&mut run, a, "owner"),
        Err(anchor_lang::error::ErrorCode::ConstraintOwner as u32)
    );
    // nothing of the failed attempts is left
    assert!(run.bank.account(&instance_key("sized")).is_none());
    assert!(run.bank.account(&instance_key("owner")).is_none());
}

// ------------------------------------------------------------------------------ authority

#[test]
fn owner_instructions_need_the_main_authority_and_the_run_account() {
    let mut run = Run::new("auth", true, &small_config());
    let stranger = Pubkey::new_unique();
    assert_eq!(run.set_paused(stranger, false), err(PE::NotAuthority));
    let update = || ixs::Update {
        config: Some(RunConfigParams::from_core(&small_config())),
        checkpoint: None,
    };
    assert_eq!(
        run.send(ix(run.owner(stranger), update())),
        err(PE::NotAuthority)
    );
    // another run's coordinator account
    let other = run.add_run("auth-2", true, &small_config()).unwrap();
    let mut accounts = run.owner(run.authority);
    accounts.coordinator_account = other;
    assert_eq!(
        run.send(ix(accounts, ixs::SetPaused { paused: false })),
        err(PE::WrongCoordinatorAccount)
    );
    let mut accounts = run.user(Pubkey::new_unique());
    accounts.coordinator_account = other;
    assert_eq!(
        run.send(ix(accounts, ixs::Tick {})),
        err(PE::WrongCoordinatorAccount)
    );

    // the authority: halted run updates, resume, then the core's errors
    assert_eq!(run.tick(), err(PE::Halted));
    let checkpoint = CheckpointParams {
        kind: CheckpointKindParam::Hub,
        repo: "org/model".into(),
        revision: "main".into(),
    };
    let with_checkpoint = ixs::Update {
        config: None,
        checkpoint: Some(checkpoint.clone()),
    };
    assert_eq!(
        run.send(ix(run.owner(run.authority), with_checkpoint)),
        Ok(())
    );
    assert_eq!(run.state().get().repo(), b"org/model");
    assert_eq!(run.set_paused(run.authority, false), Ok(()));
    assert_eq!(run_state(&run.state()), RunState::WaitingForMembers);
    assert_eq!(run.set_paused(run.authority, false), err(PE::CannotResume));
    assert_eq!(
        run.send(ix(run.owner(run.authority), update())),
        err(PE::UpdateNotHalted)
    );
    assert_eq!(run.set_paused(run.authority, true), Ok(()));
    assert_eq!(run_state(&run.state()), RunState::Paused);
    assert_eq!(run.set_paused(run.authority, true), err(PE::Halted));
}

#[test]
fn negative_clock_is_an_invalid_operation() {
    let mut run = Run::new("clock", true, &small_config());
    run.bank.unix_timestamp = -1;
    assert_eq!(
        run.set_paused(run.authority, false),
        err(PE::InvalidOperation)
    );
    run.bank.unix_timestamp = 0;
    assert_eq!(run.set_paused(run.authority, false), Ok(()));
}

// ------------------------------------------------------------------------------ joining

#[test]
fn a_client_operation_is_followed_by_a_tick() {
    let mut run = Run::new("tick-after", true, &small_config());
    run.set_paused(run.authority, false).unwrap();
    run.bank.unix_timestamp = T0 + 10; // past waiting_for_members_extra_time
    let client = Pubkey::new_unique();
    assert_eq!(run.join(client, None), Ok(()));
    // the join alone leaves WaitingForMembers; the tick that follows starts the epoch
    let s = run.state();
    assert_eq!(run_state(&s), RunState::Warmup);
    assert_eq!(s.get().clients().len(), 1);
    assert_eq!(s.get().clients()[0].signer, client.to_bytes());
    assert_eq!(s.get().clients()[0].p2p_identity, [7; 32]);
    // a halted run: the operation stands, the tick's Halted is ignored
    run.set_paused(run.authority, true).unwrap();
    let late = Pubkey::new_unique();
    assert_eq!(run.join(late, None), Ok(()));
    assert_eq!(run.state().get().pending().len(), 1);
    assert_eq!(run_state(&run.state()), RunState::Paused);
}

#[test]
fn permissioned_runs_need_a_join_authorization() {
    let mut run = Run::new("closed", false, &small_config());
    run.set_paused(run.authority, false).unwrap();
    let (alice, bob) = (Pubkey::new_unique(), Pubkey::new_unique());
    assert_eq!(run.join(alice, None), err(PE::NotAuthorized));
    assert_eq!(
        run.authorize(Pubkey::new_unique(), alice),
        err(PE::NotJoinAuthority)
    );
    assert_eq!(run.authorize(run.join_authority, alice), Ok(()));
    let alice_auth = run.authorization_key(&alice);
    let data = &run.bank.account(&alice_auth).unwrap().data;
    let auth = JoinAuthorization::try_deserialize(&mut &data[..]).unwrap();
    assert_eq!(
        (auth.coordinator_instance, auth.grantee),
        (run.instance, alice)
    );
    assert_eq!(data.len(), JoinAuthorization::SPACE);
    // twice: the PDA exists (the system program refuses it)
    let again = run.authorize_ix(run.join_authority, alice);
    assert!(matches!(run.bank.process(&again), Err(TxError::Program(_))));

    assert_eq!(run.join(bob, Some(alice_auth)), err(PE::SignerMismatch));
    assert_eq!(run.join(alice, Some(alice_auth)), Ok(()));
    assert_eq!(run.state().get().pending().len(), 1);

    // another run's authorization
    let other_account = run.add_run("closed-2", false, &small_config()).unwrap();
    let (instance, account) = (run.instance, run.account);
    run.instance = instance_key("closed-2");
    run.account = other_account;
    run.authorize(run.join_authority, bob).unwrap();
    let bob_other = run.authorization_key(&bob);
    run.instance = instance;
    run.account = account;
    assert_eq!(
        run.join(bob, Some(bob_other)),
        err(PE::AuthorizationMismatch)
    );

    // revoke: only the join authority; the rent goes to the spill account
    let spill = Pubkey::new_unique();
    let revoke = |signer| {
        ix(
            acc::RevokeJoiner {
                join_authority: signer,
                spill,
                coordinator_instance: instance,
                authorization: alice_auth,
            },
            ixs::RevokeJoiner {},
        )
    };
    assert_eq!(
        run.send(revoke(Pubkey::new_unique())),
        err(PE::NotJoinAuthority)
    );
    let rent = run.bank.lamports(&alice_auth);
    assert_eq!(run.send(revoke(run.join_authority)), Ok(()));
    assert!(run.bank.account(&alice_auth).is_none());
    assert_eq!(run.bank.lamports(&spill), rent);
    // alice leaves and cannot come back
    run.send(ix(run.user(alice), ixs::Withdraw {})).unwrap();
    assert_eq!(run.join(alice, None), err(PE::NotAuthorized));
    // an authorization of another run cannot be revoked through this one
    let wrong = ix(
        acc::RevokeJoiner {
            join_authority: run.join_authority,
            spill,
            coordinator_instance: instance,
            authorization: bob_other,
        },
        ixs::RevokeJoiner {},
    );
    assert_eq!(run.send(wrong), err(PE::AuthorizationMismatch));
}

#[test]
fn permissionless_runs_ignore_authorizations() {
    let mut run = Run::new("open", true, &small_config());
    run.set_paused(run.authority, false).unwrap();
    assert_eq!(run.join(Pubkey::new_unique(), None), Ok(()));
}

// ------------------------------------------------------------------------------ free

#[test]
fn free_coordinator_closes_a_halted_run() {
    let mut run = Run::new("free", true, &small_config());
    run.set_paused(run.authority, false).unwrap();
    let spill = Pubkey::new_unique();
    let (instance, account) = (run.instance, run.account);
    let free = |signer| {
        ix(
            acc::FreeCoordinator {
                authority: signer,
                spill,
                coordinator_instance: instance,
                coordinator_account: account,
            },
            ixs::FreeCoordinator {},
        )
    };
    assert_eq!(run.send(free(run.authority)), err(PE::CloseNotHalted));
    run.set_paused(run.authority, true).unwrap();
    assert_eq!(run.send(free(Pubkey::new_unique())), err(PE::NotAuthority));
    let total = run.bank.lamports(&run.instance) + run.bank.lamports(&run.account);
    assert_eq!(run.send(free(run.authority)), Ok(()));
    assert!(run.bank.account(&run.instance).is_none());
    assert!(run.bank.account(&run.account).is_none());
    assert_eq!(run.bank.lamports(&spill), total);
    // the run id can be used again
    assert!(run.add_run("free", true, &small_config()).is_ok());
}

#[test]
fn witness_instruction_size() {
    // 8 discriminator + index + step + 2 x (4 + 356) blooms + 32 merkle root. A legacy
    // transaction with one signature and the program plus three account keys adds 237 bytes:
    // it must fit in the 1,232-byte packet limit of a real cluster.
    let data = ixs::Witness {
        index: 0,
        step: 1,
        participant_bloom: vec![0; 356],
        broadcast_bloom: vec![0; 356],
        broadcast_merkle: [0; 32],
    }
    .data();
    assert_eq!(data.len(), 768);
    const LEGACY_TX_OVERHEAD: usize = 1 + 64 + 3 + 1 + 4 * 32 + 32 + 1 + 1 + 1 + 3 + 2;
    assert_eq!(LEGACY_TX_OVERHEAD, 237);
    assert!(LEGACY_TX_OVERHEAD + data.len() <= 1232);
}

// ------------------------------------------------------------------------------ vectors

/// A vector step as an instruction, when its arguments can be one (well-formed hex,
/// 32-byte keys and merkle root, integers in range, known keys); None otherwise: such steps
/// are rejected by `decode_args` or the operation's own argument checks.
#[derive(Clone, Debug)]
enum Op {
    Tick,
    Join([u8; 32], [u8; 32]),
    Withdraw([u8; 32]),
    WarmupWitness([u8; 32], u32),
    Witness([u8; 32], u32, u32, Vec<u8>, Vec<u8>, [u8; 32]),
    HealthCheck([u8; 32], u32, Vec<u16>),
    Checkpoint([u8; 32], u32, String, String),
    Pause,
    Resume,
    Update(Option<RunConfigParams>, Option<CheckpointParams>),
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
            "min_clients" => c.min_clients = int(v)?,
            "init_min_clients" => c.init_min_clients = int(v)?,
            "witness_nodes" => c.witness_nodes = int(v)?,
            "global_batch_size_start" => c.global_batch_size_start = int(v)?,
            "global_batch_size_end" => c.global_batch_size_end = int(v)?,
            "verification_percent" => c.verification_percent = int(v)?,
            "checkpointer_percent" => c.checkpointer_percent = int(v)?,
            "waiting_for_members_extra_time" => c.waiting_for_members_extra_time = int(v)?,
            _ => return None,
        }
    }
    Some(c)
}

fn checkpoint_from_json(v: &Value) -> Option<CheckpointParams> {
    let obj = v.as_object()?;
    if obj
        .keys()
        .any(|k| !["kind", "repo", "revision"].contains(&k.as_str()))
    {
        return None;
    }
    let kind = match obj.get("kind")?.as_str()? {
        "Dummy" => CheckpointKindParam::Dummy,
        "Hub" => CheckpointKindParam::Hub,
        "P2P" => CheckpointKindParam::P2P,
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
    })
}

fn decode(op: &str, args: &Value) -> Option<Op> {
    let a = args.as_object()?;
    let allowed: &[&str] = match op {
        "tick" | "pause" | "resume" => &[],
        "join" => &["signer", "p2p_identity"],
        "withdraw" => &["signer"],
        "warmup_witness" => &["signer", "index"],
        "witness" => &[
            "signer",
            "index",
            "step",
            "participant_bloom",
            "broadcast_bloom",
            "broadcast_merkle",
        ],
        "health_check" => &["signer", "index", "targets"],
        "checkpoint" => &["signer", "index", "repo", "revision"],
        "update" => &["config", "checkpoint"],
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
        "join" => Op::Join(key(g("signer")?)?, key(g("p2p_identity")?)?),
        "withdraw" => Op::Withdraw(key(g("signer")?)?),
        "warmup_witness" => Op::WarmupWitness(key(g("signer")?)?, int(g("index")?)?),
        "witness" => Op::Witness(
            key(g("signer")?)?,
            int(g("index")?)?,
            int(g("step")?)?,
            hex_bytes(g("participant_bloom")?)?,
            hex_bytes(g("broadcast_bloom")?)?,
            key(g("broadcast_merkle")?)?,
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
        "checkpoint" => Op::Checkpoint(
            key(g("signer")?)?,
            int(g("index")?)?,
            g("repo")?.as_str()?.to_string(),
            match g("revision") {
                None => String::new(),
                Some(v) => v.as_str()?.to_string(),
            },
        ),
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
        ),
        _ => return None,
    })
}

/// The core operation alone (what a vector step records).
fn apply_core(s: &mut CoordinatorState, now: u64, op: &Op) -> Result<(), CoordinatorError> {
    match op {
        Op::Tick => core_sm::tick(s, now),
        Op::Join(k, p) => core_sm::join(s, now, k, p),
        Op::Withdraw(k) => core_sm::withdraw(s, now, k),
        Op::WarmupWitness(k, i) => core_sm::warmup_witness(s, now, k, *i),
        Op::Witness(k, i, st, pb, bb, m) => core_sm::witness(s, now, k, *i, *st, pb, bb, m),
        Op::HealthCheck(k, i, t) => core_sm::health_check(s, now, k, *i, t),
        Op::Checkpoint(k, i, r, v) => {
            core_sm::checkpoint(s, now, k, *i, r.as_bytes(), v.as_bytes())
        }
        Op::Pause => core_sm::pause(s, now),
        Op::Resume => core_sm::resume(s, now),
        Op::Update(c, ck) => {
            let c = c.map(|c| c.to_core());
            let ck = ck.as_ref().map(CheckpointParams::as_core);
            core_sm::update(s, now, c.as_ref(), ck.as_ref())
        }
    }
}

fn instruction_for(run: &Run, op: &Op) -> Instruction {
    let user = |k: &[u8; 32]| run.user(Pubkey::new_from_array(*k));
    match op {
        Op::Tick => ix(run.user(Pubkey::new_unique()), ixs::Tick {}),
        Op::Join(k, p) => ix(
            acc::JoinRunAccounts {
                user: Pubkey::new_from_array(*k),
                coordinator_instance: run.instance,
                coordinator_account: run.account,
                authorization: None,
            },
            ixs::JoinRun { p2p_identity: *p },
        ),
        Op::Withdraw(k) => ix(user(k), ixs::Withdraw {}),
        Op::WarmupWitness(k, i) => ix(user(k), ixs::WarmupWitness { index: *i }),
        Op::Witness(k, i, st, pb, bb, m) => ix(
            user(k),
            ixs::Witness {
                index: *i,
                step: *st,
                participant_bloom: pb.clone(),
                broadcast_bloom: bb.clone(),
                broadcast_merkle: *m,
            },
        ),
        Op::HealthCheck(k, i, t) => ix(
            user(k),
            ixs::HealthCheck {
                index: *i,
                targets: t.clone(),
            },
        ),
        Op::Checkpoint(k, i, r, v) => ix(
            user(k),
            ixs::Checkpoint {
                index: *i,
                repo: r.clone(),
                revision: v.clone(),
            },
        ),
        Op::Pause => ix(run.owner(run.authority), ixs::SetPaused { paused: true }),
        Op::Resume => ix(run.owner(run.authority), ixs::SetPaused { paused: false }),
        Op::Update(c, ck) => ix(
            run.owner(run.authority),
            ixs::Update {
                config: *c,
                checkpoint: ck.clone(),
            },
        ),
    }
}

fn vectors_dir() -> std::path::PathBuf {
    match std::env::var_os("PSYCHE_VECTORS_DIR") {
        Some(d) => d.into(),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors"),
    }
}

/// Every conformance vector, as instructions. Three trajectories per file:
/// - the core alone must reproduce the vector (checks this test's decoding of the steps);
/// - the model (core operation, then a tick after a successful client operation, as the
///   Python server does) and the program must agree on every error code and state byte.
#[test]
fn conformance_vectors_replayed_as_instructions() {
    let mut files: Vec<_> = std::fs::read_dir(vectors_dir())
        .expect("vectors dir")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let (mut steps, mut sent, mut ticked) = (0usize, 0usize, 0usize);
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let init = &v["initial"];
        let run_id = init["run_id"].as_str().unwrap();
        let config = config_from_json(&init["config"]).unwrap();
        let seed = init["run_seed"].as_u64().unwrap();
        let ck = checkpoint_from_json(&init["checkpoint"]).unwrap();

        // the vector's trajectory (core only)
        let mut vector = Model::zeroed();
        core_sm::new_run(
            vector.get_mut(),
            run_id.as_bytes(),
            &config,
            seed,
            &ck.as_core(),
        )
        .unwrap();
        assert_eq!(
            hex::encode(core_sm::state_hash(vector.get())),
            v["initial_hash"].as_str().unwrap()
        );

        // the program: init (dummy checkpoint) then update to the vector's checkpoint
        let first_time = v["steps"][0]["time"].as_i64().unwrap_or(0);
        let mut run = Run::blank(run_id, first_time);
        let account = blank_coordinator_account(&mut run.bank, CoordinatorAccount::SPACE);
        run.account = account;
        let authority = run.authority;
        run.send(init_ix(
            run.payer, account, run_id, authority, authority, true, &config, seed,
        ))
        .unwrap();
        run.send(ix(
            run.owner(authority),
            ixs::Update {
                config: None,
                checkpoint: Some(ck),
            },
        ))
        .unwrap();
        assert!(
            run.state().bytes() == vector.bytes(),
            "{name}: initial state"
        );
        let mut model = Model::from_bytes(vector.bytes());

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
            let before = Model::from_bytes(model.bytes());
            let r = apply_core(model.get_mut(), now, &op);
            if r.is_ok() && op.is_client_op() {
                let before_tick = Model::from_bytes(model.bytes());
                let _ = core_sm::tick(model.get_mut(), now);
                if model.bytes() != before_tick.bytes() {
                    ticked += 1;
                }
            }
            if r.is_err() {
                assert!(model.bytes() == before.bytes());
            }
            // 3. the program
            run.bank.unix_timestamp = now as i64;
            let got = run.send(instruction_for(&run, &op));
            sent += 1;
            assert_eq!(
                got,
                r.map_err(|e| PE::from(e).code()),
                "{name} step {i} ({op:?}): program error"
            );
            assert!(
                run.state().bytes() == model.bytes(),
                "{name} step {i} ({op:?}): program state"
            );
        }
    }
    println!(
        "replayed {} vectors: {steps} steps, {sent} sent as instructions, {ticked} changed by the tick after a client operation",
        files.len()
    );
    assert!(sent > steps / 2);
}

#[test]
fn a_truncated_coordinator_account_fails_by_name() {
    // Cannot happen through the program (init checks the size); the handlers still check
    // before Anchor's loader would slice out of bounds.
    let mut run = Run::new("short", true, &small_config());
    run.bank
        .accounts
        .get_mut(&run.account)
        .unwrap()
        .data
        .truncate(CoordinatorAccount::SPACE - 8);
    assert_eq!(run.tick(), err(PE::AccountIncorrectSize));
    assert_eq!(
        run.set_paused(run.authority, false),
        err(PE::AccountIncorrectSize)
    );
}
