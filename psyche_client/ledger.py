"""A points ledger {identity bytes: Points} as JSON: what the server saves beside its state and
what it answers a leaderboard query with."""

from dataclasses import asdict

from psyche_coordinator_core import Points

POINTS_FIELDS = ("presence_rounds", "sequences", "tokens", "token_carry", "presence_points",
                 "compute_points")


def ledger_to_json(ledger: dict) -> dict:
    """{identity bytes: Points} as {identity hex: {field: int}} (sorted: the same ledger always
    makes the same bytes)."""
    out = {}
    for identity in sorted(ledger):
        p = asdict(ledger[identity])
        out[identity.hex()] = {k: p[k] for k in POINTS_FIELDS}
    return out


def ledger_from_json(data) -> dict:
    if not isinstance(data, dict):
        raise ValueError("the ledger is a JSON object")
    out = {}
    for key, fields in data.items():
        identity = bytes.fromhex(key)
        if len(identity) != 32 or not isinstance(fields, dict):
            raise ValueError(f"bad ledger entry {key!r}")
        values = {}
        for k in POINTS_FIELDS:
            v = fields.get(k, 0)
            if type(v) is not int or not 0 <= v < 1 << 64:
                raise ValueError(f"ledger entry {key[:16]}: {k} must be a u64")
            values[k] = v
        out[identity] = Points(identity, **values)
    return out
