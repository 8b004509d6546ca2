//! Instructions of the coordinator program, built the way a Rust client would (Anchor's
//! generated `instruction` and `accounts` types). Used by the tests, the fuzzer and the
//! benchmarks; the Python client builds the same bytes from the IDL.

use anchor_lang::{InstructionData, ToAccountMetas};
use psyche_coordinator::{
    accounts as acc, instruction as data, run_id_seed, CheckpointParams, CoordinatorAccount,
    RunConfigParams, AUTHORIZATION_SEED, CONTRIBUTOR_SEED, COORDINATOR_SEED, RUN_SPEC_SEED,
};
use solana_instruction::Instruction;
use solana_pubkey::Pubkey;

pub const PROGRAM_ID: Pubkey = psyche_coordinator::ID;

fn ix(accounts: impl ToAccountMetas, data: impl InstructionData) -> Instruction {
    Instruction {
        program_id: PROGRAM_ID,
        accounts: accounts.to_account_metas(None),
        data: data.data(),
    }
}

/// The instance PDA of a run id.
pub fn instance_key(run_id: &str) -> Pubkey {
    Pubkey::find_program_address(&[COORDINATOR_SEED, run_id_seed(run_id)], &PROGRAM_ID).0
}

/// The join authorization PDA of `grantee` for a run instance.
pub fn authorization_key(instance: &Pubkey, grantee: &Pubkey) -> Pubkey {
    Pubkey::find_program_address(
        &[AUTHORIZATION_SEED, instance.as_ref(), grantee.as_ref()],
        &PROGRAM_ID,
    )
    .0
}

/// The contributor PDA of `identity` for a run instance.
pub fn contributor_key(instance: &Pubkey, identity: &Pubkey) -> Pubkey {
    Pubkey::find_program_address(
        &[CONTRIBUTOR_SEED, instance.as_ref(), identity.as_ref()],
        &PROGRAM_ID,
    )
    .0
}

/// The run spec PDA of a run instance.
pub fn run_spec_key(instance: &Pubkey) -> Pubkey {
    Pubkey::find_program_address(&[RUN_SPEC_SEED, instance.as_ref()], &PROGRAM_ID).0
}

/// The system `create_account` that pre-allocates the coordinator account (same transaction
/// as `init_coordinator`; `account` signs).
pub fn create_coordinator_account(payer: &Pubkey, account: &Pubkey, lamports: u64) -> Instruction {
    solana_system_interface::instruction::create_account(
        payer,
        account,
        lamports,
        CoordinatorAccount::SPACE as u64,
        &PROGRAM_ID,
    )
}

/// A run's addresses.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub instance: Pubkey,
    pub account: Pubkey,
}

impl Run {
    pub fn new(run_id: &str, account: Pubkey) -> Self {
        Self {
            instance: instance_key(run_id),
            account,
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn init(
        &self,
        payer: &Pubkey,
        run_id: &str,
        main_authority: Pubkey,
        join_authority: Pubkey,
        permissionless: bool,
        config: RunConfigParams,
        run_seed: u64,
    ) -> Instruction {
        ix(
            acc::InitCoordinator {
                payer: *payer,
                coordinator_instance: self.instance,
                coordinator_account: self.account,
                system_program: solana_sdk_ids::system_program::ID,
            },
            data::InitCoordinator {
                run_id: run_id.to_string(),
                main_authority,
                join_authority,
                permissionless,
                config,
                run_seed,
            },
        )
    }

    fn owner(&self, authority: &Pubkey) -> acc::OwnerCoordinatorAccounts {
        acc::OwnerCoordinatorAccounts {
            authority: *authority,
            coordinator_instance: self.instance,
            coordinator_account: self.account,
        }
    }

    fn user(&self, user: &Pubkey) -> acc::PermissionlessCoordinatorAccounts {
        acc::PermissionlessCoordinatorAccounts {
            user: *user,
            coordinator_instance: self.instance,
            coordinator_account: self.account,
        }
    }

    pub fn update(
        &self,
        authority: &Pubkey,
        config: Option<RunConfigParams>,
        checkpoint: Option<CheckpointParams>,
    ) -> Instruction {
        self.update_spec(authority, config, checkpoint, None)
    }

    /// `update` that may also set the run spec's hash.
    pub fn update_spec(
        &self,
        authority: &Pubkey,
        config: Option<RunConfigParams>,
        checkpoint: Option<CheckpointParams>,
        spec_hash: Option<[u8; 32]>,
    ) -> Instruction {
        let args = data::Update {
            config,
            checkpoint,
            spec_hash,
        };
        ix(self.owner(authority), args)
    }

    /// The run spec PDA of this run.
    pub fn run_spec(&self) -> Pubkey {
        run_spec_key(&self.instance)
    }

    /// `set_run_spec`: `chunk` at `offset` of a spec `total_len` bytes long.
    pub fn set_run_spec(
        &self,
        authority: &Pubkey,
        total_len: u32,
        offset: u32,
        chunk: Vec<u8>,
    ) -> Instruction {
        ix(
            acc::SetRunSpec {
                authority: *authority,
                coordinator_instance: self.instance,
                run_spec: self.run_spec(),
                system_program: solana_sdk_ids::system_program::ID,
            },
            data::SetRunSpec {
                total_len,
                offset,
                chunk,
            },
        )
    }

    pub fn set_paused(&self, authority: &Pubkey, paused: bool) -> Instruction {
        ix(self.owner(authority), data::SetPaused { paused })
    }

    /// The contributor PDA of `identity` in this run.
    pub fn contributor(&self, identity: &Pubkey) -> Pubkey {
        contributor_key(&self.instance, identity)
    }

    /// `join_run` as the signer itself. `authorization`: the signer's join authorization, or
    /// None on a permissionless run.
    pub fn join_run(
        &self,
        user: &Pubkey,
        authorization: Option<Pubkey>,
        p2p_identity: [u8; 32],
    ) -> Instruction {
        self.join_run_as(user, authorization, p2p_identity, user)
    }

    /// `join_run` as `identity` (the signer itself, or an identity listing it as a delegate).
    /// `authorization`: the identity's join authorization, or None on a permissionless run.
    pub fn join_run_as(
        &self,
        user: &Pubkey,
        authorization: Option<Pubkey>,
        p2p_identity: [u8; 32],
        identity: &Pubkey,
    ) -> Instruction {
        ix(
            acc::JoinRunAccounts {
                user: *user,
                coordinator_instance: self.instance,
                coordinator_account: self.account,
                authorization,
                contributor: self.contributor(identity),
                system_program: solana_sdk_ids::system_program::ID,
            },
            data::JoinRun {
                p2p_identity,
                identity: *identity,
            },
        )
    }

    /// `identity` (signer) lists its delegates; `payer` pays for a new contributor account.
    pub fn set_delegates(
        &self,
        payer: &Pubkey,
        identity: &Pubkey,
        delegates: Vec<Pubkey>,
    ) -> Instruction {
        ix(
            acc::SetDelegates {
                payer: *payer,
                identity: *identity,
                coordinator_instance: self.instance,
                contributor: self.contributor(identity),
                system_program: solana_sdk_ids::system_program::ID,
            },
            data::SetDelegates { delegates },
        )
    }

    /// Anyone settles client slot `index`, whose identity is `identity`.
    pub fn settle_points(&self, user: &Pubkey, index: u32, identity: &Pubkey) -> Instruction {
        ix(
            acc::SettlePoints {
                user: *user,
                coordinator_instance: self.instance,
                coordinator_account: self.account,
                contributor: self.contributor(identity),
            },
            data::SettlePoints {
                index,
                identity: *identity,
            },
        )
    }

    pub fn tick(&self, user: &Pubkey) -> Instruction {
        ix(self.user(user), data::Tick {})
    }

    #[allow(clippy::too_many_arguments)]
    pub fn witness(
        &self,
        user: &Pubkey,
        index: u32,
        step: u32,
        participant_bloom: Vec<u8>,
        broadcast_bloom: Vec<u8>,
        broadcast_merkle: [u8; 32],
        param_hash: [u8; 32],
    ) -> Instruction {
        ix(
            self.user(user),
            data::Witness {
                index,
                step,
                participant_bloom,
                broadcast_bloom,
                broadcast_merkle,
                param_hash,
            },
        )
    }

    pub fn warmup_witness(&self, user: &Pubkey, index: u32) -> Instruction {
        ix(self.user(user), data::WarmupWitness { index })
    }

    pub fn health_check(&self, user: &Pubkey, index: u32, targets: Vec<u16>) -> Instruction {
        ix(self.user(user), data::HealthCheck { index, targets })
    }

    /// An elected verifier of `step`'s round accuses client `target` of a bad result.
    pub fn evidence(&self, user: &Pubkey, index: u32, step: u32, target: u16) -> Instruction {
        ix(
            self.user(user),
            data::Evidence {
                index,
                step,
                target,
            },
        )
    }

    /// `(step, param_hash)`: the agreed pair the stored snapshot holds.
    pub fn checkpoint(
        &self,
        user: &Pubkey,
        index: u32,
        repo: &str,
        revision: &str,
        step: u32,
        param_hash: [u8; 32],
    ) -> Instruction {
        ix(
            self.user(user),
            data::Checkpoint {
                index,
                repo: repo.into(),
                revision: revision.into(),
                step,
                param_hash,
            },
        )
    }

    /// `(step, param_hash)`: the agreed pair the syncing client's parameters reached.
    pub fn synced(
        &self,
        user: &Pubkey,
        index: u32,
        step: u32,
        param_hash: [u8; 32],
    ) -> Instruction {
        ix(
            self.user(user),
            data::Synced {
                index,
                step,
                param_hash,
            },
        )
    }

    pub fn resync(&self, user: &Pubkey, index: u32) -> Instruction {
        ix(self.user(user), data::Resync { index })
    }

    pub fn withdraw(&self, user: &Pubkey) -> Instruction {
        ix(self.user(user), data::Withdraw {})
    }

    pub fn free_coordinator(&self, authority: &Pubkey, spill: &Pubkey) -> Instruction {
        ix(
            acc::FreeCoordinator {
                authority: *authority,
                spill: *spill,
                coordinator_instance: self.instance,
                coordinator_account: self.account,
            },
            data::FreeCoordinator {},
        )
    }

    pub fn free_run_spec(&self, authority: &Pubkey, spill: &Pubkey) -> Instruction {
        ix(
            acc::FreeRunSpec {
                authority: *authority,
                spill: *spill,
                coordinator_instance: self.instance,
                coordinator_account: self.account,
                run_spec: self.run_spec(),
            },
            data::FreeRunSpec {},
        )
    }

    pub fn authorize_joiner(
        &self,
        payer: &Pubkey,
        join_authority: &Pubkey,
        grantee: Pubkey,
    ) -> Instruction {
        ix(
            acc::AuthorizeJoiner {
                payer: *payer,
                join_authority: *join_authority,
                coordinator_instance: self.instance,
                authorization: authorization_key(&self.instance, &grantee),
                system_program: solana_sdk_ids::system_program::ID,
            },
            data::AuthorizeJoiner { grantee },
        )
    }

    pub fn revoke_joiner(
        &self,
        join_authority: &Pubkey,
        spill: &Pubkey,
        grantee: &Pubkey,
    ) -> Instruction {
        ix(
            acc::RevokeJoiner {
                join_authority: *join_authority,
                spill: *spill,
                coordinator_instance: self.instance,
                authorization: authorization_key(&self.instance, grantee),
            },
            data::RevokeJoiner {},
        )
    }
}
