//! `getProgramAccounts`: a client lists every contributor account of a run (a `dataSize`
//! filter for the account type, a `memcmp` on the instance), with the standard reply shape.

use base64::Engine as _;
use psyche_coordinator::{Contributor, CoordinatorAccount};
use psyche_localnet::node::Node;
use psyche_localnet::{rpc, LocalChain};
use serde_json::{json, Value};
use solana_signer::Signer;

use crate::support::*;

fn call(node: &Node, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    serde_json::from_str(&rpc::handle_body(node, &body.to_string())).unwrap()
}

#[test]
fn get_program_accounts_lists_a_runs_contributors() {
    let mut env = Env::new();
    let r = env.create_run("gpa", true, test_config(2));
    let other = env.create_run("gpa-2", true, test_config(2));
    env.resume(&r);
    env.resume(&other);
    let (a, b, c) = (env.keypair(), env.keypair(), env.keypair());
    env.join(&r, &a, None);
    env.join(&r, &b, None);
    env.join(&other, &c, None);
    let payer = env.payer.pubkey();
    env.ok(&[&c], &[r.run.set_delegates(&payer, &c.pubkey(), vec![])]);
    let node = Node::new(std::mem::replace(&mut env.chain, LocalChain::new(T0)));
    let program = psyche_coordinator::ID.to_string();
    let instance = bs58::encode(r.instance()).into_string();
    let filters = json!([
        {"dataSize": Contributor::SPACE},
        {"memcmp": {"offset": Contributor::INSTANCE_OFFSET, "bytes": instance}},
    ]);

    let reply = call(
        &node,
        "getProgramAccounts",
        json!([program, {"encoding": "base64", "filters": filters}]),
    );
    let list = reply["result"].as_array().expect("a list");
    // sorted by address bytes, as the node lists them; not by their base58 text, whose order
    // differs when one address is 43 characters and another 44 (random keys: a flaky test)
    let mut keys: Vec<_> = [&a, &b, &c]
        .iter()
        .map(|k| r.run.contributor(&k.pubkey()))
        .collect();
    keys.sort();
    let want: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    let got: Vec<String> = list
        .iter()
        .map(|e| e["pubkey"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(got, want, "sorted by address, this run's only");
    for e in list {
        let acct = &e["account"];
        assert_eq!(acct["owner"], program);
        assert_eq!(acct["data"][1], "base64");
        let data = base64::engine::general_purpose::STANDARD
            .decode(acct["data"][0].as_str().unwrap())
            .unwrap();
        assert_eq!(data.len(), Contributor::SPACE);
        let at = Contributor::INSTANCE_OFFSET;
        assert_eq!(&data[at..at + 32], r.instance().as_ref());
    }

    // one identity (memcmp at the identity), with the context; base64 filter bytes
    let id = base64::engine::general_purpose::STANDARD.encode(a.pubkey());
    let reply = call(
        &node,
        "getProgramAccounts",
        json!([program, {"encoding": "base64", "withContext": true, "filters": [
            {"memcmp": {"offset": Contributor::IDENTITY_OFFSET, "bytes": id, "encoding": "base64"}},
        ]}]),
    );
    let value = &reply["result"]["value"];
    assert!(reply["result"]["context"]["slot"].is_u64());
    assert_eq!(value.as_array().unwrap().len(), 1, "{reply}");
    assert_eq!(value[0]["pubkey"], r.run.contributor(&a.pubkey()).to_string());

    // no filter: every account of the program (2 instances, 2 states, 4 contributors)
    let reply = call(&node, "getProgramAccounts", json!([program]));
    assert_eq!(reply["result"].as_array().unwrap().len(), 8);
    let states = call(
        &node,
        "getProgramAccounts",
        json!([program, {"filters": [{"dataSize": CoordinatorAccount::SPACE}]}]),
    );
    assert_eq!(states["result"].as_array().unwrap().len(), 2);

    // bad requests
    for params in [
        json!(["not a key"]),
        json!([program, {"filters": [{"nope": 1}]}]),
        json!([program, {"filters": [{"memcmp": {"offset": 0, "bytes": "0OIl"}}]}]),
        json!([program, {"filters": [{"dataSize": 1}, {"dataSize": 1}, {"dataSize": 1},
                                      {"dataSize": 1}, {"dataSize": 1}]}]),
        json!([program, {"encoding": "zstd"}]),
    ] {
        let reply = call(&node, "getProgramAccounts", params.clone());
        assert_eq!(reply["error"]["code"], -32602, "{params}: {reply}");
    }
}
