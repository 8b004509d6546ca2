"""Hostile DisTrO payloads (training/payload.py): raw and Rice-coded indices, fp32, bf16 and
1-bit values, mutated by bit flips, truncations, extensions, spliced bytes and length or count
fields overwritten with huge values. decode_payload may only raise ValueError, must not
allocate by a declared size (every size is checked against the bytes there before), and
answers quickly; through peer_result_from_training_result too, with results signed over the
mutated bytes so that the decoder, not the signature check, meets them."""

import hashlib
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from psyche_client.client.results import TrainingResult  # noqa: E402
from psyche_client.identity import Identity  # noqa: E402
from psyche_client.training.distro import DistroOptimizer  # noqa: E402
from psyche_client.training.payload import (  # noqa: E402
    decode_payload,
    encode_payload,
    peer_result_from_training_result,
)
from psyche_coordinator_core import BatchId  # noqa: E402

from .mutate import fuzz, mutations  # noqa: E402

ME = Identity(hashlib.sha256(b"fuzz-payload").digest())


def _seeds():
    g = torch.Generator().manual_seed(0)
    out = []
    for shapes, one_bit, dtype, rice in (([(64, 64), (16,)], False, None, False),
                                         ([(32, 48), (3, 4, 16)], False, torch.bfloat16, True),
                                         ([(64, 64), (16,)], True, None, True)):
        params = [torch.randn(s, generator=g).requires_grad_() for s in shapes]
        opt = DistroOptimizer(params, lr=0.01, topk=4, chunk=16, quantize_1bit=one_bit,
                              value_dtype=dtype)
        for p in params:
            p.grad = torch.randn(p.shape, generator=g)
        out.append((encode_payload(opt.compress_step(), rice=rice), opt.layout()))
    return out


SEEDS = _seeds()


@fuzz
@given(st.integers(0, len(SEEDS) - 1), mutations(), st.booleans())
def test_payloads_only_raise_value_error(which, mutate, with_layout):
    valid, layout = SEEDS[which]
    data = mutate(valid)
    t = time.monotonic()
    try:
        params = decode_payload(data, layout=layout if with_layout else None,
                                max_coefficients=1 << 16)
    except ValueError:
        params = None
    assert time.monotonic() - t < 1.0
    if params is not None:  # accepted: it is what an encoder makes of it (canonical)
        assert encode_payload(params, rice=bool(data[5] & 2)) == data


@fuzz
@given(st.integers(0, len(SEEDS) - 1), mutations())
def test_signed_results_with_hostile_payloads(which, mutate):
    valid, layout = SEEDS[which]
    result = TrainingResult.create(ME, 3, BatchId(0, 7), mutate(valid))
    try:
        peer_result_from_training_result(result, layout=layout)
    except ValueError:
        pass
