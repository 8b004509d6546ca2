"""The centralized server's wire protocol (websockets).

Text frames are JSON objects with a "type"; binary frames carry the coordinator state as its
canonical bytes (compressed by permessage-deflate, so mostly-empty states are small).

  server -> client  {"type": "challenge", "nonce": hex32}
  client -> server  {"type": "hello", "run_id": str, "signer": hex32, "p2p_identity": hex32,
                     "p2p_addr": "ws://host:port" | null, "signature": hex64}
                    signature = ed25519 over HELLO_DOMAIN + nonce + run_id, by `signer`;
                    optional "delegation": {run_id, identity, delegate, signature} (a
                    Delegation, psyche_client/delegation.py): the signer may join as that
                    identity; a bad one is refused ("BadDelegation") and the socket closed;
                    or {"type": "hello", "run_id": str, "observer": true} to only watch.
  server -> client  {"type": "spec", "spec": {model, optimizer, data} | null} after the hello
                    (null: simulated training), then
                    binary state after the hello and after every change;
                    {"type": "peers", "peers": {p2p_identity_hex: addr}} when peers change
  client -> server  {"type": "op", "id": int, "op": name, "args": {ops_json args}}
  server -> client  {"type": "ok", "id": int} | {"type": "error", "id": int|null, "code": str,
                     "message": str}   (codes: the core's, or the server's own: BadHello,
                     Malformed, WrongRunId, BadDelegation, NotADelegate, NotAllowed,
                     UnknownQuery; NotAllowed: the server has an allow-list that names
                     neither this signer nor the identity it joins as, for good)
  any -> server     {"type": "query", "id": int, "query": "leaderboard"} (observers too)
  server -> client  {"type": "result", "id": int, "result": {"ledger": {identity hex: Points
                     fields} with what the slots hold now, "settled": the same as settled,
                     "epoch", "step", "run_state"}}
"""

HELLO_DOMAIN = b"psyche-centralized-hello"
MAX_MESSAGE_BYTES = 1 << 20  # larger frames close the connection with code 1009
CLOSE_WRONG_RUN = 4001
CLOSE_BAD_HELLO = 4002
CLOSE_TOO_MANY_ERRORS = 4003
MAX_ERRORS_PER_CONNECTION = 20


def hello_message(nonce: bytes, run_id: str) -> bytes:
    return HELLO_DOMAIN + nonce + run_id.encode()
