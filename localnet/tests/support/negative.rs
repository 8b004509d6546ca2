//! Helpers of the negative suites (`suites/negative_<instruction>.rs`): for every instruction,
//! signed transactions that must fail with the exact named error (the program's
//! `CoordinatorProgramError`, 6000-6022 = the core's `CoordinatorError`, 6100-6110 the
//! program's own, or Anchor's account errors) and leave the coordinator account, the instance
//! and any other account involved byte for byte as they were. A failed transaction still lands
//! and charges its fee to the payer, so the payer is never compared.

use psyche_coordinator::{CheckpointKindParam, CheckpointParams, RunConfigParams};
use psyche_coordinator_core::{RunConfig, RunState};
use psyche_localnet::ix::Run;
use solana_instruction::Instruction;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_signer::Signer;

use super::{test_config, Env, Live};

/// The same instruction with account `i`'s signer flag cleared (nobody signs for it).
pub fn unsigned(mut ix: Instruction, i: usize) -> Instruction {
    ix.accounts[i].is_signer = false;
    ix
}

/// Allocates a program-owned account of `space` bytes (all zero) in its own transaction.
pub fn preallocate(env: &mut Env, space: usize, owner: &Pubkey) -> Keypair {
    let k = Keypair::new();
    env.preallocate(&k, space, owner);
    k
}

pub fn init_ix(env: &Env, account: &Pubkey, id: &str, config: &RunConfig) -> Instruction {
    Run::new(id, *account).init(
        &env.payer.pubkey(),
        id,
        env.payer.pubkey(),
        env.payer.pubkey(),
        true,
        RunConfigParams::from_core(config),
        1,
    )
}

pub fn hub(repo: &str, revision: &str) -> CheckpointParams {
    CheckpointParams {
        kind: CheckpointKindParam::Hub,
        repo: repo.into(),
        revision: revision.into(),
        hash: [0; 32],
        step: 0,
    }
}

/// A run that trained its steps: Finished.
pub fn finished_run(env: &mut Env, id: &str) -> Live {
    let config = RunConfig {
        total_steps: 1,
        ..test_config(3)
    };
    let live = env.round_train(id, 3, config);
    assert_eq!(env.finish_epoch(&live), RunState::Finished);
    live
}

/// The same instruction signed by another user (account 0).
pub fn retarget(mut ix: Instruction, user: &Pubkey) -> Instruction {
    ix.accounts[0].pubkey = *user;
    ix
}
