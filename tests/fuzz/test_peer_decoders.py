"""Hostile bytes and documents to every decoder a peer reaches: result headers and
announcements, applied sets, blob hashes and the blob stream's declared size, model-sharing and
applied-set requests and replies, iroh tickets, the websocket mesh, snapshot manifests,
delegations. Each may only raise its documented error (ValueError or the module's named
error), never another exception, never hang, and never allocate by a declared size before the
bytes are there. The DisTrO payload has its own file (test_payload_decoder.py: torch)."""

import asyncio
import hashlib
import json
import time
from types import SimpleNamespace

import iroh
from hypothesis import given
from hypothesis import strategies as st

from psyche_client.client.applied import AppliedSet
from psyche_client.client.results import TrainingResult
from psyche_client.delegation import Delegation, DelegationError
from psyche_client.identity import Identity
from psyche_client.p2p import applied_sharing, blobs, model_sharing
from psyche_client.p2p.errors import BadRequest, BlobError, P2PError
from psyche_client.p2p.iroh_node import MAX_ANNOUNCEMENT, IrohNode, parse_addr
from psyche_client.p2p.iroh_results import fetch_result, result_announcement
from psyche_client.p2p.mesh import PeerMesh
from psyche_client.snapshots.errors import ManifestInvalid
from psyche_client.snapshots.manifest import FileEntry, Manifest
from psyche_coordinator_core import BatchId

from .mutate import fuzz, json_values, mutated, mutations

ME = Identity(hashlib.sha256(b"fuzz-peer").digest())
RESULT = TrainingResult.create(ME, 7, BatchId(10, 19), b"payload bytes" * 3)
RESULT_JSON = json.dumps(RESULT.to_json()).encode()
APPLIED = AppliedSet(7, True, (RESULT,))
APPLIED_JSON = json.dumps(APPLIED.to_json()).encode()
ANNOUNCEMENT = dict(result_announcement(RESULT, blobs.blob_hash(RESULT.payload)), **{"from": "p"})
MANIFEST = Manifest("run", 2, 40, "ab" * 32, {"model.safetensors": FileEntry("cd" * 32, 1234),
                                              "config.json": FileEntry("ef" * 32, 5)})
MODEL = model_sharing.ModelManifest(40, "ab" * 32, "cd" * 32, 1234, "ef" * 32, 99)
TICKET = str(iroh.EndpointTicket.from_addr(iroh.EndpointAddr(
    iroh.SecretKey.from_bytes(bytes(range(32))).public(), None, ["127.0.0.1:4433"])))


EDGE = st.sampled_from([-1, -0.0, 1.0, 1 << 32, (1 << 32) - 1, 1 << 63, 1 << 64, -(1 << 63),
                        10 ** 30, True, None, "", "0" * 64, "ab" * 32 + "\n", [], {}])


def json_docs(valid: bytes, fields=()):
    """Mutated bytes of a valid JSON document, and the document with one field replaced."""
    doc = json.loads(valid)
    replace = st.builds(lambda k, v: json.dumps({**doc, k: v}).encode(),
                        st.sampled_from(sorted(doc) + list(fields)),
                        st.one_of(EDGE, json_values()))
    return st.one_of(mutated(valid), replace, json_values().map(lambda v: json.dumps(v).encode()))


def parsed(raw: bytes):
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # what a caller hands the decoder is already JSON
        return None


@fuzz
@given(json_docs(RESULT_JSON))
def test_result_headers(raw):
    try:
        r = TrainingResult.from_json(parsed(raw))
    except ValueError:
        return
    assert isinstance(r.check(), str)  # an accepted header can be checked: no other error


@fuzz
@given(st.one_of(json_docs(APPLIED_JSON), st.builds(
    lambda v: json.dumps({**APPLIED.to_json(), "results": [v]}).encode(),
    json_docs(RESULT_JSON).map(parsed))))
def test_applied_sets(raw):
    try:
        AppliedSet.from_json(parsed(raw), 7)
    except ValueError:
        pass


class FakeNode:
    max_blob_size = 1 << 20

    def __init__(self, payload=RESULT.payload):
        self.payload, self.fetched = payload, []

    async def fetch(self, peer, hash_hex, max_size=None, timeout=None):
        blobs.hash_bytes(hash_hex)  # BlobError for a bad hash, as the node's fetch
        self.fetched.append(max_size)
        return self.payload


@fuzz
@given(json_docs(json.dumps(ANNOUNCEMENT).encode()))
def test_result_announcements(raw):
    node, msg = FakeNode(), parsed(raw)
    if not isinstance(msg, dict):
        return  # the node hands on_announcement dicts only
    try:
        asyncio.run(fetch_result(node, msg))
    except (ValueError, BlobError):
        pass
    assert all(m is not None and m <= node.max_blob_size for m in node.fetched)


class EarlyEnd(Exception):
    """The stream ended before read_exact had its bytes (iroh raises IrohError, which the
    node's fetch turns into BlobError)."""


class Stream:
    """An iroh receive stream with these bytes; records what was asked of it."""

    def __init__(self, data: bytes):
        self.data, self.stopped, self.asked = data, None, 0

    async def read_to_end(self, limit):
        assert len(self.data) <= limit, "the caller's limit"
        return self.data

    async def read_exact(self, n):
        self.asked += n
        if n > len(self.data):
            raise EarlyEnd(f"read_exact({n}) past the {len(self.data)} bytes sent")
        out, self.data = self.data[:n], self.data[n:]
        return out

    async def stop(self, code):
        self.stopped = code


@fuzz
@given(json_docs(json.dumps(result_announcement(RESULT, "00" * 32)).encode()))
def test_announcements_as_received(raw):
    got = []
    node = SimpleNamespace(timeout=5, on_announcement=got.append)
    asyncio.run(IrohNode._receive_announcement(node, Stream(raw[:MAX_ANNOUNCEMENT]), "peer"))
    assert all(isinstance(m, dict) and m["from"] == "peer" for m in got)


def test_regression_manifests_refuse_trailing_newlines_bool_sizes_and_non_string_hashes():
    # found by fuzzing: HEX64 and FILE_NAME matched with `$`, which also matches before a final
    # newline (a file "model.safetensors\n", a param_hash or location ending in one); a size
    # `true` passed as an int; a sha256 that is not a string raised TypeError
    base = json.loads(MANIFEST.to_bytes())
    entry = {"sha256": "cd" * 32, "size": 1}
    for change in ({"param_hash": "ab" * 32 + "\n"}, {"files": {"m\n": entry}},
                   {"files": {"m": {**entry, "sha256": "cd" * 32 + "\n"}}},
                   {"files": {"m": {**entry, "size": True}}},
                   {"files": {"m": {**entry, "sha256": 5}}}):
        raw = json.dumps({**base, **change}, sort_keys=True, separators=(",", ":")).encode()
        try:
            Manifest.from_bytes(raw)
        except ManifestInvalid:
            continue
        raise AssertionError(f"{change} accepted")
    from psyche_client.snapshots.manifest import is_location
    assert is_location("ab" * 32) and not is_location("ab" * 32 + "\n")


def test_regression_a_deeply_nested_announcement_is_dropped():
    got = []
    node = SimpleNamespace(timeout=5, on_announcement=got.append)
    asyncio.run(IrohNode._receive_announcement(node, Stream(b"[" * 60_000), "peer"))
    assert got == []


@fuzz
@given(st.one_of(mutated(TICKET.encode()).map(lambda b: b.decode("utf-8", "replace")),
                 st.text(max_size=100), json_values()))
def test_tickets(text):
    try:
        parse_addr(text)
    except P2PError:
        pass


@fuzz
@given(st.one_of(mutated(b"ab" * 32).map(lambda b: b.decode("latin-1")), json_values()))
def test_blob_hashes(text):
    try:
        assert len(blobs.hash_bytes(text)) == 32
    except BlobError:
        pass


BLOB = b"blob data " * 100
BLOB_HASH = hashlib.sha256(BLOB).digest()


@fuzz
@given(mutations())
def test_blob_streams_check_the_declared_size_before_reading(mutate):
    wire = mutate(bytes([0]) + len(BLOB).to_bytes(8, "big") + BLOB)
    if not wire:
        return
    stream, limit = Stream(wire[1:]), 4096
    try:
        data = asyncio.run(blobs.receive(stream, wire[0], BLOB_HASH, limit, "peer"))
        assert data == BLOB
    except (BlobError, EarlyEnd):
        pass
    # never more asked of the stream than the size field and the limit: a huge declared size
    # is refused before any of it is read (or allocated)
    assert stream.asked <= 8 + limit


@fuzz
@given(json_docs(b'{"type": "manifest"}', fields=("step",)))
def test_model_sharing_requests(raw):
    sharing = model_sharing.ModelSharing(SimpleNamespace(serve=lambda *a: None))
    sharing.manifest = MODEL
    try:
        reply = json.loads(sharing._answer(raw[:model_sharing.MAX_REQUEST], "peer"))
        assert model_sharing.ModelManifest.from_json(reply["manifest"]) == MODEL
    except BadRequest:
        pass


class Replier:
    def __init__(self, raw):
        self.raw = raw

    async def request(self, peer, alpn, data, max_reply, timeout=None):
        return self.raw[:max_reply]


@fuzz
@given(json_docs(json.dumps({"manifest": MODEL.to_json()}).encode()))
def test_model_sharing_replies(raw):
    try:
        asyncio.run(model_sharing.request_manifest(Replier(raw), "peer"))
    except ValueError:
        pass


@fuzz
@given(json_docs(b'{"type": "applied", "step": 7}'))
def test_applied_set_requests(raw):
    sharing = applied_sharing.AppliedSharing(SimpleNamespace(serve=lambda *a: None),
                                             lookup=lambda s: APPLIED if s == 7 else None,
                                             received=lambda s: [RESULT])
    try:
        json.loads(sharing._answer(raw[:applied_sharing.MAX_REQUEST], "peer"))
    except BadRequest:
        pass


@fuzz
@given(st.one_of(json_docs(json.dumps({"set": APPLIED.to_json()}).encode()),
                 json_docs(json.dumps({"results": [RESULT.to_json()]}).encode())))
def test_applied_set_replies(raw):
    try:
        asyncio.run(applied_sharing.request_applied(Replier(raw), "peer", 7))
    except ValueError:
        pass
    got = asyncio.run(applied_sharing.fetch_received(Replier(raw), ["peer"], 7,
                                                     log=lambda m: None))
    assert all(r.step == 7 and not r.check() for r in got)


@fuzz
@given(st.lists(json_docs(json.dumps(ANNOUNCEMENT).encode()).map(
    lambda b: b.decode("utf-8", "replace")), max_size=4))
def test_mesh_messages(frames):
    got = []
    mesh = PeerMesh("me", got.append)

    class Ws:
        def __aiter__(self):
            return self._gen()

        async def _gen(self):
            for f in frames:
                yield f

    asyncio.run(mesh._serve(Ws()))
    assert all(isinstance(m, dict) for m in got)


@fuzz
@given(st.one_of(mutated(MANIFEST.to_bytes()), st.builds(
    lambda k, v: json.dumps({**json.loads(MANIFEST.to_bytes()), k: v}, sort_keys=True,
                            separators=(",", ":")).encode(),
    st.sampled_from(["run_id", "epoch", "step", "param_hash", "files", "format"]),
    json_values())))
def test_snapshot_manifests(raw):
    try:
        m = Manifest.from_bytes(raw)
    except ManifestInvalid:
        return
    assert m.to_bytes() == raw and len(m.location) == 64


@fuzz
@given(json_docs(json.dumps(Delegation.sign(ME, "run", bytes(32)).to_json()).encode()))
def test_delegations(raw):
    try:
        d = Delegation.from_json(parsed(raw))
    except DelegationError:
        return
    assert d.problem("run", bytes(32)) is None or isinstance(d.problem("run", bytes(32)), str)


def test_the_fuzz_inputs_are_decoded_quickly():
    """No decoder spends long on a hostile input: the largest inputs above, timed."""
    t = time.monotonic()
    for raw in (b"[" * 65_536, b'"' + b"\\u0000" * 10_000 + b'"', b"1" * 4000):
        try:
            Manifest.from_bytes(raw)
        except ManifestInvalid:
            pass
        try:
            TrainingResult.from_json(parsed(raw))
        except ValueError:
            pass
    assert time.monotonic() - t < 5


def test_regression_a_header_with_a_step_past_u32_is_malformed():
    # found by fuzzing: from_json took any non-negative step and batch bounds, then check()
    # (commitment_of: step as u32, batch as u64) raised OverflowError, which the callers
    # (AppliedSet.from_json, fetch_result, fetch_received) let through
    for field, value in (("step", 1 << 32), ("step", -1), ("batch", [0, 1 << 64]),
                         ("batch", [1 << 64, 1 << 64])):
        try:
            TrainingResult.from_json({**RESULT.to_json(), field: value})
        except ValueError:
            continue
        raise AssertionError(f"{field} = {value} accepted")
    ok = TrainingResult.from_json({**RESULT.to_json(), "step": (1 << 32) - 1,
                                   "batch": [0, (1 << 64) - 1]})
    assert ok.check() == "commitment does not match the payload"


def data_server():
    from psyche_client.server.data_server import DataServer
    srv = object.__new__(DataServer)
    srv.run_id, srv.authorize = "run", lambda signer: True
    srv.provider = SimpleNamespace(get_samples=lambda a, b: __import__("numpy").zeros((b - a, 4)))
    srv.cfg = SimpleNamespace(token_size=2, seq_len=4)
    return srv


def signed_data_request(start=0, end=2):
    from psyche_client.data.tcp import request_message
    return json.dumps({"run_id": "run", "signer": ME.public.hex(), "start": start, "end": end,
                       "signature": ME.sign(request_message("run", start, end)).hex()}).encode()


@fuzz
@given(json_docs(signed_data_request(), fields=("start", "end")))
def test_data_server_requests(raw):
    head, body = data_server()._answer(raw)  # refusals are answers: nothing raised
    assert head["ok"] is (body is not None)


def test_regression_data_requests_past_u64_are_malformed():
    # found by fuzzing: start or end past u64 reached struct.pack(">QQ") in request_message
    # and raised struct.error out of the request handler
    for start, end in ((0, 1 << 64), (-1, 2)):
        doc = json.loads(signed_data_request())
        head, _ = data_server()._answer(json.dumps({**doc, "start": start,
                                                    "end": end}).encode())
        assert head == {"ok": False, "error": "malformed request"}
    assert data_server()._answer(signed_data_request())[0]["ok"]
