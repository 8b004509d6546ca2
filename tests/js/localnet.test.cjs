// The local chain as Solana developers reach a program first: web3.js 1.x and Anchor's
// TypeScript client, with our IDL, against psyche-localnet. tests/chain/test_js_clients.py
// creates a run, starts this file with `node --test`, and hands it the chain and the run in
// the JSON file named by PSYCHE_JS_CONFIG: {rpc, ws, idl, runId, instance, account}. The
// packages come from scripts/js-deps (NODE_PATH).

const fs = require("node:fs");
const test = require("node:test");
const assert = require("node:assert/strict");
const anchor = require("@coral-xyz/anchor");
const { Connection, Keypair, LAMPORTS_PER_SOL, PublicKey } = require("@solana/web3.js");

const cfg = JSON.parse(fs.readFileSync(process.env.PSYCHE_JS_CONFIG, "utf8"));
const connection = new Connection(cfg.rpc, { commitment: "confirmed", wsEndpoint: cfg.ws });
const stranger = Keypair.generate();
const provider = new anchor.AnchorProvider(connection, new anchor.Wallet(stranger), {
  commitment: "confirmed",
});
const program = new anchor.Program(JSON.parse(fs.readFileSync(cfg.idl, "utf8")), provider);
const instance = new PublicKey(cfg.instance);
const account = new PublicKey(cfg.account);
const runAccounts = { coordinatorInstance: instance, coordinatorAccount: account };
const tick = () => program.methods.tick().accountsStrict({ user: stranger.publicKey, ...runAccounts });

async function until(what, seconds) {
  const end = Date.now() + seconds * 1000;
  while (!what()) {
    assert.ok(Date.now() < end, "timed out waiting");
    await new Promise((r) => setTimeout(r, 50));
  }
}

test.before(async () => {
  const sig = await connection.requestAirdrop(stranger.publicKey, 2 * LAMPORTS_PER_SOL);
  const { blockhash, lastValidBlockHeight } = await connection.getLatestBlockhash();
  await connection.confirmTransaction({ signature: sig, blockhash, lastValidBlockHeight });
});

test("the created run reads back through Anchor, the zero-copy state included", async () => {
  const inst = await program.account.coordinatorInstance.fetch(instance);
  assert.equal(inst.runId, cfg.runId);
  assert.ok(inst.coordinatorAccount.equals(account));
  const state = await program.account.coordinatorAccount.fetch(account);
  assert.equal(state.state.length, 187328);
});

test("account.all() lists the program's run instances (getProgramAccounts)", async () => {
  const all = await program.account.coordinatorInstance.all();
  assert.ok(all.some((a) => a.publicKey.equals(instance)), JSON.stringify(all.map((a) => a.publicKey)));
});

test("a stranger's tick lands; its transaction and signature are served", async () => {
  const sig = await tick().rpc();
  const tx = await connection.getTransaction(sig, { commitment: "confirmed", maxSupportedTransactionVersion: 0 });
  assert.equal(tx.meta.err, null);
  assert.equal(tx.transaction.signatures[0], sig);
  assert.ok(tx.meta.logMessages.includes(`Program ${program.programId} success`), tx.meta.logMessages.join("\n"));
  const sigs = await connection.getSignaturesForAddress(account, { limit: 5 });
  assert.equal(sigs[0].signature, sig);
  const block = await connection.getBlock(tx.slot, { maxSupportedTransactionVersion: 0 });
  assert.ok(block.transactions.some((t) => t.transaction.signatures[0] === sig));
});

test("an unauthorized set_paused is refused as an AnchorError that names it", async () => {
  await assert.rejects(
    program.methods.setPaused(true).accountsStrict({ authority: stranger.publicKey, ...runAccounts }).rpc(),
    (e) => {
      assert.ok(e instanceof anchor.AnchorError, `not an AnchorError: ${e}`);
      assert.equal(e.error.errorCode.code, "NotAuthority");
      assert.ok(e.logs.some((l) => l.includes("AnchorError")), e.logs.join("\n"));
      return true;
    },
  );
});

test("a simulation returns the program's logs", async () => {
  const sim = await tick().simulate();
  assert.ok(sim.raw.includes(`Program ${program.programId} invoke [1]`), sim.raw.join("\n"));
  assert.ok(sim.raw.includes(`Program ${program.programId} success`), sim.raw.join("\n"));
});

test("account and logs subscriptions are notified of a tick", async () => {
  const got = {};
  const onAccount = connection.onAccountChange(account, (info) => (got.account = info), "confirmed");
  const onLogs = connection.onLogs(account, (logs) => (got.logs = logs), "confirmed");
  await new Promise((r) => setTimeout(r, 500)); // the subscriptions reach the node
  const sig = await tick().rpc();
  await until(() => got.account && got.logs && got.logs.signature === sig, 20);
  assert.equal(got.logs.err, null);
  assert.ok(got.account.owner.equals(program.programId));
  await connection.removeAccountChangeListener(onAccount);
  await connection.removeOnLogsListener(onLogs);
});
