"""Every instruction the Python side builds reaches the program intact: each is sent to the
local chain and must be accepted, or refused by the *named* error its arguments call for (a
mis-encoded instruction would fail deserialization instead, Anchor's 102)."""

import asyncio

import pytest
from solders.keypair import Keypair

from psyche_client.chain.program import ACCOUNT_SPACE, Contributor, Coordinator, ProgramError
from psyche_coordinator_core import (
    Checkpoint,
    CheckpointKind,
    CoordinatorError,
    Points,
    RunConfig,
)

pytestmark = pytest.mark.slow
CONFIG = RunConfig(warmup_time=5, cooldown_time=5, max_round_train_time=5, round_witness_time=2,
                   epoch_time=60, total_steps=20, min_clients=1, init_min_clients=2,
                   waiting_for_members_extra_time=30).validate()


async def create_run(c, run_id, account, permissionless=False, seed=42, config=CONFIG):
    """A run on chain: the coordinator account (`account` signs) and init_coordinator, the
    client's signer both authorities; returns its instance key."""
    me = c.payer.pubkey()
    rent = await c.rent_exempt(ACCOUNT_SPACE)
    await c.send([c.ix_create_account(account.pubkey(), rent),
                  c.ix_init_coordinator(run_id, account.pubkey(), me, me, permissionless,
                                        config, seed)], [account])
    return c.instance_key(run_id)


async def refused(coro):
    try:
        await coro
    except (CoordinatorError, ProgramError) as e:
        return getattr(e, "code", None) if isinstance(e, CoordinatorError) else e.name
    return None


def test_every_instruction_round_trips(localnet):
    async def go():
        owner, other, account = Keypair(), Keypair(), Keypair()
        c = Coordinator(localnet.rpc_url, owner)
        await c.airdrop(owner.pubkey(), 100 * 10**9)
        await c.airdrop(other.pubkey(), 10**9)
        run_id = "every-ix"
        inst = await create_run(c, run_id, account)
        acct, me = account.pubkey(), owner.pubkey()
        state = await c.fetch_state(acct)
        assert state.run_id == run_id and state.config == CONFIG and state.run_seed == 42

        # owner instructions, with Option args both ways and an enum argument
        ck = Checkpoint(CheckpointKind.P2P, "peers", "r1")
        await c.send([c.ix_update(me, inst, acct, CONFIG, ck)])
        await c.send([c.ix_update(me, inst, acct, None, None)])
        assert (await c.fetch_state(acct)).checkpoint == ck
        stored = Checkpoint(CheckpointKind.Stored, "ab" * 32, "", bytes(range(32)), 12)
        await c.send([c.ix_update(me, inst, acct, None, stored)])
        assert (await c.fetch_state(acct)).checkpoint == stored
        assert await refused(c.send([c.ix_update(me, inst, acct, None, Checkpoint(
            CheckpointKind.Stored, "ab" * 32))])) == "InvalidCheckpoint"  # no hash
        await c.send([c.ix_set_paused(me, inst, acct, False)])
        assert await refused(c.send([c.ix_update(me, inst, acct, CONFIG, None)])) == \
            "UpdateNotHalted"

        # permissioned joining: refused, authorized, joined, revoked
        o = Coordinator(localnet.rpc_url, other)
        oi, ok = other.pubkey(), bytes(other.pubkey())
        assert await refused(o.send([o.ix_join_run(oi, inst, acct, ok)])) == "NotAuthorized"
        await c.send([c.ix_authorize_joiner(me, inst, oi)])
        await o.send([o.ix_join_run(oi, inst, acct, ok, c.authorization_key(inst, oi))])
        assert (await c.fetch_state(acct)).pending[0].signer == ok
        # contributor points: joining as itself created its contributor account; it lists the
        # owner as a delegate, who joins as it (its authorization covers its delegates); a
        # stranger may not
        assert await c.fetch_contributor(inst, oi) == Contributor(
            c.contributor_key(inst, oi), inst, Points(ok))
        await o.send([o.ix_set_delegates(oi, inst, [me])])
        assert (await c.fetch_contributor(inst, oi)).delegates == (me,)
        assert await refused(o.send([o.ix_set_delegates(oi, inst, [me] * 9)])) == \
            "TooManyDelegates"
        stranger = Keypair()
        await c.airdrop(stranger.pubkey(), 10**9)
        st = Coordinator(localnet.rpc_url, stranger)
        assert await refused(st.send([st.ix_join_run(
            stranger.pubkey(), inst, acct, bytes(32), c.authorization_key(inst, oi),
            identity=oi)])) == "NotADelegate"
        await st.close()
        await c.send([c.ix_join_run(me, inst, acct, bytes(me), c.authorization_key(inst, oi),
                                    identity=oi)])
        pending = (await c.fetch_state(acct)).pending
        assert [(p.signer, p.identity) for p in pending] == [(ok, ok), (bytes(me), ok)]
        await c.send([c.ix_withdraw(me, inst, acct)])
        assert [a.identity for a in await c.contributors(inst)] == [oi]
        # settling: nobody holds a slot this epoch
        assert await refused(c.send([c.ix_settle_points(me, inst, acct, 0, oi)])) == \
            "InvalidClientIndex"
        await c.send([c.ix_revoke_joiner(me, inst, oi, me)])
        assert await c.get_account_data(c.authorization_key(inst, oi)) is None

        # client instructions from a pending (not yet epoch) client: named refusals
        assert await refused(o.send([o.ix_warmup_witness(oi, inst, acct, 0)])) == \
            "InvalidRunState"
        assert await refused(o.send([o.ix_witness(oi, inst, acct, 0, 1, bytes(356), bytes(356),
                                                  bytes(32), bytes(32))])) == "InvalidRunState"
        assert await refused(o.send([o.ix_health_check(oi, inst, acct, 0, [1])])) == \
            "InvalidRunState"
        assert await refused(o.send([o.ix_evidence(oi, inst, acct, 0, 1, 1)])) == \
            "InvalidRunState"
            # (checkpoint checks the index first: nobody is at index 0 yet)
        assert await refused(o.send([o.ix_checkpoint(oi, inst, acct, 0, "repo", "rev", 1,
                                                     bytes(32))])) == "InvalidClientIndex"
        assert await refused(o.send([o.ix_synced(oi, inst, acct, 0, 1, bytes(32))])) == \
            "InvalidRunState"
        assert await refused(o.send([o.ix_resync(oi, inst, acct, 0)])) == "InvalidRunState"
        await o.send([o.ix_tick(oi, inst, acct)])  # anyone; nothing due
        await o.send([o.ix_withdraw(oi, inst, acct)])
        assert (await c.fetch_state(acct)).pending == []

        # freeing needs a halted run and the main authority
        assert await refused(c.send([c.ix_free_coordinator(me, inst, acct, me)])) == \
            "CloseNotHalted"
        await c.send([c.ix_set_paused(me, inst, acct, True)])
        assert await refused(o.send([o.ix_free_coordinator(oi, inst, acct, oi)])) == \
            "NotAuthority"
        await c.send([c.ix_free_coordinator(me, inst, acct, me)])
        assert await c.get_account_data(acct) is None
        assert await c.fetch_instance(run_id) is None
        await o.close()
        await c.close()
    asyncio.run(go())
