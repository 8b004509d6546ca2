"""Payload codec: exact round trips in every mode, bytes per coefficient, strict rejection of
tampered / truncated / extended / hostile bytes, and the TrainingResult commitment + signature."""

import dataclasses
import random
import struct

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from psyche_client.client.results import (  # noqa: E402
    MAX_RESULT_BYTES,
    TrainingResult,
    commitment_of,
)
from psyche_client.identity import Identity  # noqa: E402
from psyche_client.training.distro import DistroOptimizer, SparseParam  # noqa: E402
from psyche_client.training.payload import (  # noqa: E402
    MAGIC,
    MAX_PAYLOAD_BYTES,
    coefficient_count,
    decode_payload,
    encode_payload,
    peer_result_from_training_result,
    result_key,
)
from psyche_coordinator_core import BatchId  # noqa: E402

# totalk: 4096 (u16), 64 (u8), 90000 (u32 with chunk 300), 1-D, 3-D, 0-d
SHAPES = [(256, 128), (64,), (3, 4, 16), (), (128, 64)]
MODES = [("fp32", torch.float32, False), ("bf16", torch.bfloat16, False),
         ("fp16", torch.float16, False), ("1bit", torch.float32, True)]


def compressed(shapes=SHAPES, one_bit=False, value_dtype=None, topk=8, chunk=64, seed=0,
               steps=1):
    g = torch.Generator().manual_seed(seed)
    params = [torch.randn(s, generator=g).requires_grad_() for s in shapes]
    opt = DistroOptimizer(params, lr=0.01, topk=topk, chunk=chunk, quantize_1bit=one_bit,
                          value_dtype=value_dtype)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=g)
        out = opt.compress_step()
    return opt, out


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.shape == y.shape and x.chunk == y.chunk
        assert x.indices.dtype == y.indices.dtype == torch.int64
        assert torch.equal(x.indices, y.indices)
        assert x.values.dtype == y.values.dtype
        assert torch.equal(x.values.view(torch.uint8) if x.values.dtype != torch.bool
                           else x.values, y.values.view(torch.uint8)
                           if y.values.dtype != torch.bool else y.values)


@pytest.mark.parametrize("rice", [False, True])
@pytest.mark.parametrize("name,vdt,one_bit", MODES)
def test_round_trip_exact(name, vdt, one_bit, rice):
    opt, sent = compressed(one_bit=one_bit, value_dtype=None if one_bit else vdt, steps=2)
    data = encode_payload(sent, rice=rice)
    assert data[:4] == MAGIC
    back = decode_payload(data, layout=opt.layout())
    assert_same(sent, back)
    assert encode_payload(back, rice=rice) == data  # canonical


@pytest.mark.parametrize("rice", [False, True])
def test_round_trip_u32_indices_and_edge_k(rice):
    for topk in (1, 7, 90000):
        opt, sent = compressed(shapes=[(300, 300), (5,)], topk=topk, chunk=300, one_bit=True)
        assert sent[0].totalk == 90000
        assert_same(sent, decode_payload(encode_payload(sent, rice=rice), layout=opt.layout()))


def section_bytes(data, sent, rice):
    overhead = 12 + sum(1 + 4 * len(sp.shape) + 17 + 8 + (5 if rice else 0) for sp in sent)
    return len(data) - overhead


def test_bytes_per_coefficient():
    shapes = [(256, 256), (512, 128), (256,)]
    results = {}
    for name, vdt, one_bit in MODES:
        _, sent = compressed(shapes=shapes, one_bit=one_bit,
                             value_dtype=None if one_bit else vdt, steps=3)
        n = coefficient_count(sent)
        for rice in (False, True):
            data = encode_payload(sent, rice=rice)
            results[(name, rice)] = section_bytes(data, sent, rice) / n
            assert len(data) <= section_bytes(data, sent, rice) + 12 + 3 * 40
    assert results[("1bit", False)] <= 2.125  # u16 index + 1 bit (u8 for the 1-D chunks of 64)
    assert results[("bf16", False)] <= 4.0
    assert results[("fp16", False)] <= 4.0
    assert results[("fp32", False)] <= 6.0
    for name, _, _ in MODES:  # entropy-coded indices are smaller than raw u16
        assert results[(name, True)] < results[(name, False)] - 0.4, results
    # 64x64 chunks, k=8, uniform-ish indices: about 11 bits per index, 1 bit per sign
    assert results[("1bit", True)] < 1.6


def test_one_bit_exact_bound_on_aligned_model():
    _, sent = compressed(shapes=[(128, 128), (64, 256)], one_bit=True, topk=8)
    n = coefficient_count(sent)
    data = encode_payload(sent)
    assert section_bytes(data, sent, False) == 2.125 * n
    data = encode_payload(compressed(shapes=[(128, 128), (64, 256)], value_dtype=torch.bfloat16,
                                     topk=8)[1])
    assert section_bytes(data, sent, False) == 4 * n


def make_result(payload, identity=None, step=7, batch=BatchId(10, 19)):
    return TrainingResult.create(identity or Identity(bytes(32)), step, batch, payload)


@pytest.mark.parametrize("rice", [False, True])
@pytest.mark.parametrize("one_bit", [False, True])
def test_tampered_payloads_rejected(one_bit, rice):
    opt, sent = compressed(shapes=[(64, 64), (16,)], one_bit=one_bit, topk=4,
                           value_dtype=None if one_bit else torch.bfloat16)
    data = encode_payload(sent, rice=rice)
    tr = make_result(data)
    assert tr.check() == ""
    pr = peer_result_from_training_result(tr, layout=opt.layout())
    assert pr.key == result_key(7, BatchId(10, 19), tr.trainer)
    assert_same(sent, pr.params)
    rng = random.Random(1)
    variants = []
    for pos in range(len(data)):  # flip a byte
        b = bytearray(data)
        b[pos] ^= 1 << rng.randrange(8)
        variants.append(bytes(b))
    variants += [data[:cut] for cut in range(len(data))]  # truncate
    variants += [data + b"\0", data + bytes(rng.randbytes(17))]  # append
    decoded_ok = 0
    for v in variants:
        try:
            decode_payload(v)
            decoded_ok += 1
        except ValueError:
            pass
        # whatever the decoder says, the signed result no longer matches
        bad = dataclasses.replace(tr, payload=v)
        assert bad.check() == "commitment does not match the payload"
        with pytest.raises(ValueError):
            peer_result_from_training_result(bad, layout=opt.layout())
    for cut in range(len(data)):
        with pytest.raises(ValueError):
            decode_payload(data[:cut])
    with pytest.raises(ValueError, match="trailing"):
        decode_payload(data + b"\0")
    # flips inside value bytes can decode (a sign bit or mantissa bit); most flips must not
    assert decoded_ok < len(data)


def test_wrong_signature_and_commitment_rejected():
    _, sent = compressed(shapes=[(64, 64)], one_bit=True, topk=4)
    data = encode_payload(sent)
    alice, mallory = Identity(bytes(32)), Identity(bytes([1]) * 32)
    tr = make_result(data, alice)
    forged = dataclasses.replace(tr, signature=mallory.sign(tr.commitment))
    assert forged.check() == "signature does not match the trainer"
    impostor = dataclasses.replace(tr, trainer=mallory.public)
    assert impostor.check() == "signature does not match the trainer"
    wrong_c = dataclasses.replace(tr, commitment=commitment_of(8, tr.batch, data))
    assert wrong_c.check() == "commitment does not match the payload"
    moved = dataclasses.replace(tr, batch=BatchId(20, 29))
    assert moved.check() == "commitment does not match the payload"
    for bad in (forged, impostor, wrong_c, moved):
        with pytest.raises(ValueError, match="rejected"):
            peer_result_from_training_result(bad)


def header(flags=0, count=1, version=1, magic=MAGIC, reserved=0):
    return struct.pack("<4sBBHI", magic, version, flags, reserved, count)


def param(dims, h, w, k, code, idx=b"", val=b"", rice=None):
    rec = struct.pack(f"<B{len(dims)}I", len(dims), *dims) + struct.pack(
        "<IIIIB", h, w, h * w, k, code)
    if rice is not None:
        rec += struct.pack("<BI", *rice)
    return rec + struct.pack("<II", len(idx), len(val)) + idx + val


def test_handmade_payloads():
    ok = header() + param((8,), 1, 8, 2, 3, struct.pack("<2B", 1, 5),
                          struct.pack("<2f", 0.5, -2.0))
    (sp,) = decode_payload(ok)
    assert sp.indices.tolist() == [[1, 5]] and sp.values.tolist() == [[0.5, -2.0]]
    bad = {
        "bad magic": header(magic=b"XXXX") + ok[12:],
        "version": header(version=2) + ok[12:],
        "unknown flags": header(flags=0x80) + ok[12:],
        "reserved": header(reserved=1) + ok[12:],
        "zero params": header(count=0),
        "count vs data": header(count=2) + ok[12:],
        "unsorted": header() + param((8,), 1, 8, 2, 3, struct.pack("<2B", 5, 1),
                                     struct.pack("<2f", 0.5, -2.0)),
        "duplicate": header() + param((8,), 1, 8, 2, 3, struct.pack("<2B", 5, 5),
                                      struct.pack("<2f", 0.5, -2.0)),
        "out of range": header() + param((8,), 1, 8, 2, 3, struct.pack("<2B", 1, 8),
                                         struct.pack("<2f", 0.5, -2.0)),
        "nan": header() + param((8,), 1, 8, 2, 3, struct.pack("<2B", 1, 5),
                                struct.pack("<2f", 0.5, float("nan"))),
        "inf": header() + param((8,), 1, 8, 2, 3, struct.pack("<2B", 1, 5),
                                struct.pack("<2f", float("inf"), 1.0)),
        "chunk does not tile": header() + param((8,), 1, 3, 2, 3, b"\1\2", bytes(8)),
        "k > totalk": header() + param((8,), 1, 8, 9, 3, bytes(9), bytes(36)),
        "k = 0": header() + param((8,), 1, 8, 0, 3),
        "sign code without flag": header() + param((8,), 1, 8, 2, 0, b"\1\5", b"\0"),
        "float code with 1-bit flag": header(flags=1) + param((8,), 1, 8, 2, 3, b"\1\5",
                                                                bytes(8)),
        "unknown value code": header() + param((8,), 1, 8, 2, 9, b"\1\5", bytes(8)),
        "sign padding": header(flags=1) + param((8,), 1, 8, 2, 0, b"\1\5", b"\x04"),
        "empty dim": header() + param((8, 0), 1, 1, 1, 3),
        "too many dims": header() + param((1,) * 9, 1, 1, 1, 3, b"\0", bytes(4)),
        # a hostile header: 2^32-1 x 2^32-1 elements, must fail before any allocation
        "huge": header() + param((2**32 - 1, 2**32 - 1), 1, 1, 1, 3),
        "huge but under numel cap": header() + param((2**20, 2**19), 1, 1, 1, 3),
        "rice r too big": header(flags=2) + param((8,), 1, 8, 2, 3, b"\0" * 3,
                                                  bytes(8), rice=(25, 1)),
        "rice unary short": header(flags=2) + param((8,), 1, 8, 2, 3, b"\xff",
                                                    bytes(8), rice=(0, 1)),
        "rice unary long": header(flags=2) + param((8,), 1, 8, 2, 3, b"\x00\x00",
                                                   bytes(8), rice=(0, 2)),
        "rice gap out of range": header(flags=2) + param((8,), 1, 8, 1, 3, b"\xff\x00",
                                                         bytes(4), rice=(0, 2)),
        # gaps [1, 6] -> indices [1, 8], past the chunk of 8
        "rice sum out of range": header(flags=2) + param((8,), 1, 8, 2, 3, b"\xfd\x00",
                                                         bytes(8), rice=(0, 2)),
        "rice lengths": header(flags=2) + param((8,), 1, 8, 2, 3, b"\x00\x00", bytes(8),
                                                rice=(1, 2)),  # needs 2 + 1 index bytes
    }
    valid_rice = header(flags=2) + param((8,), 1, 8, 2, 3, b"\x7e", bytes(8), rice=(0, 1))
    assert decode_payload(valid_rice)[0].indices.tolist() == [[0, 7]]
    for name, data in bad.items():
        with pytest.raises(ValueError):
            decode_payload(data)
            pytest.fail(name)
    with pytest.raises(ValueError, match="layout"):
        decode_payload(ok, layout=[((8,), (1, 8), 3, False)])
    with pytest.raises(ValueError, match="parameters"):
        decode_payload(ok, layout=[((8,), (1, 8), 2, False)] * 2)
    with pytest.raises(ValueError, match="coefficients"):
        decode_payload(ok, max_coefficients=1)
    with pytest.raises(ValueError, match="exceeds"):
        decode_payload(ok, max_bytes=10)
    with pytest.raises(ValueError):
        decode_payload("not bytes")


def test_random_garbage_only_raises_value_error():
    rng = random.Random(0)
    _, sent = compressed(shapes=[(64, 64), (16,)], one_bit=True, topk=4)
    seeds = [encode_payload(sent), encode_payload(sent, rice=True)]
    for _ in range(1500):
        base = bytearray(rng.choice(seeds))
        for _ in range(rng.randrange(1, 6)):
            op = rng.randrange(3)
            pos = rng.randrange(len(base))
            if op == 0:
                base[pos] = rng.randrange(256)
            elif op == 1:
                del base[pos:pos + rng.randrange(1, 8)]
            else:
                base[pos:pos] = rng.randbytes(rng.randrange(1, 8))
        try:
            decode_payload(bytes(base))
        except ValueError:
            pass
    for n in range(40):
        try:
            decode_payload(rng.randbytes(n))
        except ValueError:
            pass


def test_mixed_modes_not_encodable():
    _, a = compressed(shapes=[(16,)], one_bit=True)
    _, b = compressed(shapes=[(16,)], one_bit=False)
    with pytest.raises(ValueError):
        encode_payload(a + b)
    with pytest.raises(ValueError):
        encode_payload([])
    with pytest.raises(ValueError):
        encode_payload([SparseParam((16,), (1, 16), torch.tensor([[3, 1]]),
                                    torch.tensor([[1.0, 2.0]]))])


def test_results_are_refused_unhashed_over_the_decoders_limit():
    """client/results.py keeps its own copy of the decoder's limit (it loads no torch): a
    result over it is refused before its commitment is computed."""
    assert MAX_RESULT_BYTES == MAX_PAYLOAD_BYTES
    ident = Identity.generate()
    tr = TrainingResult.create(ident, 1, BatchId(0, 3), b"x" * 100)
    assert tr.check() == "" and tr.check(100) == ""
    assert tr.check(99) == "a payload of 100 bytes, over the limit of 99"
