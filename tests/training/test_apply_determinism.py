"""DisTrO apply gives the same bits whatever the result order, thread count or aggregation dtype,
and its sign comes from exact fixed-point arithmetic (dct.decode_sign). CPU against CUDA is
scripts/check-apply-determinism (needs a GPU)."""

import random

import pytest

torch = pytest.importorskip("torch")

from psyche_client.training.dct import (  # noqa: E402
    EXACT_INTEGER_BITS,
    ChunkedDCT,
    decode_sign,
    fixed_point_basis,
    fixed_point_bits,
    scaled_basis,
)
from psyche_client.training.distro import DistroOptimizer, PeerResult, SparseParam  # noqa: E402

# Chunks of 64 x 64 (the runs' chunk), odd ones (48 x 40, 1 x 50) and a 0-d parameter.
SHAPES = [(128, 192), (96, 40), (100,), (3, 4, 16), ()]


def peer(key, opt, seed, one_bit, value_dtype):
    g = torch.Generator().manual_seed(seed)
    params = []
    for t, k in zip(opt.transforms, opt.ks):
        idx = torch.rand(t.nchunks, t.totalk, generator=g).argsort(1)[:, :k].sort(1).values
        if one_bit:
            val = torch.rand(t.nchunks, k, generator=g) < 0.5
        else:
            val = (torch.randn(t.nchunks, k, generator=g) * 1e-3).to(value_dtype)
        params.append(SparseParam(t.shape, t.chunk, idx, val))
    return PeerResult(key, tuple(params))


def applied(param_dtype, agg_dtype, one_bit, order, threads):
    """The parameters after three rounds of six results each, given in ``order``'s order,
    with ``threads`` intra-op threads."""
    g = torch.Generator().manual_seed(7)
    params = [torch.randn(s, generator=g).to(param_dtype) for s in SHAPES]
    opt = DistroOptimizer(params, topk=32, chunk=64, quantize_1bit=one_bit, weight_decay=0.01,
                          agg_dtype=agg_dtype)
    rng = random.Random(5)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for step in range(3):
            results = [peer(rng.randbytes(8), opt, 10 * step + i, one_bit, param_dtype)
                       for i in range(6)]
            opt.apply_results(order(results), lr=0.01)
    finally:
        torch.set_num_threads(before)
    return params


ORDERS = [lambda rs: rs, lambda rs: rs[::-1], lambda rs: random.Random(1).sample(rs, len(rs))]


@pytest.mark.parametrize("agg_dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("param_dtype,one_bit", [(torch.float32, False), (torch.bfloat16, False),
                                                 (torch.bfloat16, True)])
def test_apply_bits_do_not_depend_on_order_or_threads(agg_dtype, param_dtype, one_bit):
    runs = [applied(param_dtype, agg_dtype, one_bit, order, threads)
            for order, threads in [(ORDERS[0], 1), (ORDERS[1], 2), (ORDERS[2], 2),
                                   (ORDERS[2], 1)]]
    for other in runs[1:]:
        for x, y in zip(runs[0], other):
            assert x.dtype == param_dtype
            assert torch.equal(x, y)
    start = [torch.randn(s, generator=torch.Generator().manual_seed(7)) for s in SHAPES[:1]]
    assert not torch.equal(runs[0][0], start[0].to(param_dtype))


@pytest.mark.parametrize("agg_dtype,tiny", [(torch.float64, 2.0 ** -55),
                                            (torch.float32, 2.0 ** -26),
                                            (torch.bfloat16, 2.0 ** -10)])
def test_sum_order_is_fixed_where_rounding_decides_the_sign(agg_dtype, tiny):
    # Three results pick the same coefficient with 1, tiny and -1; tiny is below half an ulp of 1
    # in agg_dtype, so 1 + tiny - 1 = 0 but 1 - 1 + tiny = tiny: the sign of the update depends
    # on the order of the sum, which must be the key order whatever order the results come in.
    def one(key, value):
        return PeerResult(key, (SparseParam((8,), (1, 8), torch.tensor([[0]]),
                                            torch.tensor([[value]])),))
    results = [one(b"a", 1.0), one(b"b", tiny), one(b"c", -1.0)]
    outcomes = set()
    for order in ([0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]):
        p = torch.zeros(8)
        DistroOptimizer([p], topk=1, chunk=8, agg_dtype=agg_dtype).apply_results(
            [results[i] for i in order], lr=0.5)
        outcomes.add(tuple(p.tolist()))
    assert outcomes == {(0.0,) * 8}  # key order: (1 + tiny) - 1 = 0, no update


@pytest.mark.parametrize("shape", [(128, 192), (96, 40), (100,), (3, 4, 16), (64, 64), ()])
def test_decode_sign_is_the_sign_of_the_inverse_dct(shape):
    # Wherever the float64 inverse DCT is clearly away from 0, the fixed-point sign agrees.
    t = ChunkedDCT(shape, 64)
    g = torch.Generator().manual_seed(11)
    for density in (0.01, 0.2, 1.0):
        c = torch.randn(t.nchunks, t.totalk, generator=g, dtype=torch.float64)
        c = c * (torch.rand(c.shape, generator=g) < density) * 10.0 ** torch.randint(
            -6, 3, c.shape, generator=g)
        q = t.decode(c)
        got = decode_sign(t, c)
        assert got.dtype == torch.int8 and tuple(got.shape) == t.shape
        scale = q.abs().max()
        clear = q.abs() > 1e-5 * scale
        assert torch.equal(got[clear], torch.sign(q[clear]).to(torch.int8))


def test_decode_sign_gives_exact_zeros():
    # In a 50-wide chunk, frequency 34 has exact zeros at samples 12 and 37
    # ((2*12 + 1) * 34 / 100 = 8.5): the float64 inverse DCT leaves rounding noise there, whose
    # sign would differ between machines; the fixed-point decode gives the true 0.
    t = ChunkedDCT((100,), 64)
    c = torch.zeros(t.nchunks, t.totalk, dtype=torch.float64)
    c[0, 34] = 0.7
    sign = decode_sign(t, c)
    assert sign[12] == 0 and sign[37] == 0
    assert int((sign[:50] != 0).sum()) == 48 and not bool(sign[50:].any())  # 2nd chunk empty
    assert float(t.decode(c)[12]) != 0.0  # the rounding noise this avoids


def test_fixed_point_products_stay_exact():
    # n terms of at most 2**basis * 2**data each sum to at most 2**53: every partial sum of
    # either matrix product is an integer float64 holds exactly, in any order.
    for n in list(range(1, 300)) + [1024, 4096, 1 << 24]:
        basis, data = fixed_point_bits(n)
        assert n * 2 ** (basis + data) <= 2 ** EXACT_INTEGER_BITS
        assert min(basis, data) >= 14
    for n in (1, 2, 3, 8, 40, 48, 50, 64):
        d = fixed_point_basis(n)
        assert float(d.abs().max()) <= 2 ** fixed_point_bits(n)[0]
        assert float(d.abs().max()) >= 2 ** (fixed_point_bits(n)[0] - 1)  # the grid is used
        assert torch.equal(d, d.round())


def test_fixed_point_basis_is_far_from_rounding_ties():
    # The basis comes from libm's cos, which may differ by an ulp between machines; rounded to
    # the fixed-point grid it is the same everywhere unless a value lies within such an ulp of a
    # tie. Check the distance for every chunk width up to 64 (the runs' chunk) and a few more.
    closest = 1.0
    for n in list(range(1, 65)) + [96, 100, 128]:
        scaled = torch.tensor(scaled_basis(n), dtype=torch.float64)
        assert torch.equal(scaled.round(), fixed_point_basis(n))
        closest = min(closest, float(((scaled - scaled.floor()) - 0.5).abs().min()))
        gram = scaled @ scaled.T  # an orthonormal basis times s: s**2 times the identity
        assert torch.allclose(gram / gram.diagonal().mean(), torch.eye(n, dtype=torch.float64),
                              atol=1e-12)
    assert closest > 1e-6  # an ulp at this scale is below 1e-8


def test_decode_sign_rejects_bad_coefficients():
    t = ChunkedDCT((4, 8), 8)
    for bad in (float("inf"), float("nan")):
        c = torch.zeros(t.nchunks, t.totalk, dtype=torch.float64)
        c[0, 3] = bad
        with pytest.raises(ValueError, match="non-finite"):
            decode_sign(t, c)
    c = torch.zeros(t.nchunks, t.totalk, dtype=torch.float64)
    c[0, 3], c[0, 9] = 1e300, 1e-300  # scales wider apart than float64's exponents
    with pytest.raises(ValueError, match="decode_sign"):
        decode_sign(t, c)
    with pytest.raises(ValueError, match="expected coefficients"):
        decode_sign(t, torch.zeros(2, t.totalk, dtype=torch.float64))
