//! Instruction data that does not deserialize, and a run that still works after refusals.

use anchor_lang::error::ErrorCode as AE;
use psyche_coordinator::{CoordinatorAccount, CoordinatorProgramError as PE, RunConfigParams};
use psyche_coordinator_core::RunState;
use psyche_localnet::ix::{instance_key, PROGRAM_ID};
use solana_instruction::Instruction;
use solana_keypair::Keypair;
use solana_signer::Signer;

use crate::support::negative::*;
use crate::support::*;

/// Arguments that Anchor cannot decode never reach a handler: every instruction with its
/// data cut short by one byte.
#[test]
fn truncated_arguments_do_not_deserialize() {
    let mut env = Env::new();
    let live = env.round_train("data", 2, test_config(2));
    let r = &live.r;
    let c = live.client(0).insecure_clone();
    let ck = c.pubkey();
    let auth = r.authority.insecure_clone();
    let cases: Vec<(Instruction, &Keypair)> = vec![
        (
            r.run.update(
                &auth.pubkey(),
                Some(RunConfigParams::from_core(&r.config)),
                None,
            ),
            &auth,
        ),
        (r.run.set_paused(&auth.pubkey(), true), &auth),
        (r.run.join_run(&ck, None, [1; 32]), &c),
        (live.witness_ix(0, 1), &c),
        (r.run.warmup_witness(&ck, 0), &c),
        (r.run.health_check(&ck, 0, vec![1, 2]), &c),
        (
            r.run.checkpoint(&ck, 0, "org/model", "main", 1, [7; 32]),
            &c,
        ),
        (r.run.synced(&ck, 0, 1, [7; 32]), &c),
        (r.run.resync(&ck, 0), &c),
    ];
    for (ix, signer) in cases {
        assert!(ix.data.len() > 8);
        let mut short = ix.clone();
        short.data.pop();
        env.expect_err(
            &[signer],
            &[short],
            anchor(AE::InstructionDidNotDeserialize),
            &r.keys(),
        );
    }
    // an init whose borsh args stop inside the config
    let blank = preallocate(&mut env, CoordinatorAccount::SPACE, &PROGRAM_ID);
    let mut ix = init_ix(&env, &blank.pubkey(), "trunc", &test_config(2));
    ix.data.truncate(ix.data.len() - 20);
    env.expect_err(
        &[],
        &[ix],
        anchor(AE::InstructionDidNotDeserialize),
        &[blank.pubkey(), instance_key("trunc")],
    );
}

#[test]
fn every_refusal_leaves_a_usable_run() {
    // After the refusals above a run still completes rounds: a smoke check that nothing in
    // the error paths leaves a borrowed or half-written account behind.
    let mut env = Env::new();
    let live = env.round_train("after", 4, test_config(4));
    let s = env.state(&live.r.account_key());
    let n = non_witnesses(s.get())[0];
    let nk = live.client(n).insecure_clone();
    let step = s.get().header.step;
    env.expect_err(
        &[&nk],
        &[live.witness_ix(n, step)],
        pe(PE::NotAWitness),
        &live.r.keys(),
    );
    assert_eq!(env.complete_round(&live), RunState::RoundTrain);
    assert_eq!(env.state(&live.r.account_key()).get().header.step, step + 1);
}
