"""DisTrO optimizer: momentum/error-feedback bookkeeping, 1-bit values, aggregation formula,
bit-identical replicas, strict result checks, lookahead, and a small convergence run."""

import random

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("numpy")

from psyche_client.training.dct import ChunkedDCT  # noqa: E402
from psyche_client.training.distro import DistroOptimizer, PeerResult, SparseParam  # noqa: E402
from psyche_client.training.payload import decode_payload, encode_payload  # noqa: E402

SHAPES = [(128, 64), (96, 40), (64,), (100,), (3, 4, 16), ()]


def make_params(dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g).to(dtype).requires_grad_() for s in SHAPES]


def set_grads(params, seed):
    g = torch.Generator().manual_seed(seed)
    for p in params:
        p.grad = torch.randn(p.shape, generator=g).to(p.dtype)


def transmitted(opt, i):
    sp = opt.last_unquantized[i]
    t = opt.transforms[i]
    c = torch.zeros(t.nchunks, t.totalk, dtype=sp.values.dtype).scatter_(1, sp.indices, sp.values)
    return t.decode(c)


@pytest.mark.parametrize("one_bit", [False, True])
def test_error_feedback_conserves_momentum(one_bit):
    params = make_params()
    opt = DistroOptimizer(params, lr=0.01, momentum_decay=0.9, topk=4, chunk=16,
                          quantize_1bit=one_bit)
    for step in range(5):
        set_grads(params, step)
        before = [0.9 * d + 0.01 * p.grad for d, p in zip(opt.delta, params)]
        sent = opt.compress_step()
        for i, t in enumerate(opt.transforms):
            tr = transmitted(opt, i)
            assert torch.allclose(tr + opt.delta[i], before[i], atol=1e-6), (step, i)
            # the kept coefficients are the k largest per chunk
            c = t.encode(before[i]).abs()
            kept = torch.zeros_like(c, dtype=torch.bool).scatter_(1, sent[i].indices, True)
            if t.totalk > sent[i].k:
                assert bool((c[kept].reshape(t.nchunks, -1).min(1).values + 1e-6
                             >= c.masked_fill(kept, 0).max(1).values).all())
            assert sent[i].k == min(4, t.totalk)
            assert bool((sent[i].indices[:, 1:] > sent[i].indices[:, :-1]).all())


def test_momentum_formula_and_topk_clamp():
    p = torch.zeros(8, 8, requires_grad=True)
    opt = DistroOptimizer([p], lr=0.5, momentum_decay=0.999, topk=1000, chunk=8)
    assert opt.ks == [64]
    p.grad = torch.ones(8, 8)
    opt.compress_step()
    assert float(opt.delta[0].abs().max()) < 1e-6  # everything transmitted
    assert torch.allclose(transmitted(opt, 0), torch.full((8, 8), 0.5), atol=1e-6)


def test_one_bit_values_are_sign_bits():
    params = make_params()
    opt = DistroOptimizer(params, lr=0.01, topk=8, chunk=16, quantize_1bit=True)
    set_grads(params, 1)
    sent = opt.compress_step()
    for sp, full in zip(sent, opt.last_unquantized):
        assert sp.values.dtype == torch.bool and sp.one_bit
        assert torch.equal(sp.indices, full.indices)
        assert torch.equal(sp.values, torch.signbit(full.values))
        dv = sp.dense_values(torch.float32)
        assert set(dv.unique().tolist()) <= {-1.0, 1.0}
        assert torch.equal(dv, torch.where(full.values < 0, -1.0, 1.0))
        back = decode_payload(encode_payload([sp]))[0]
        assert torch.equal(back.dense_values(torch.float32), dv)


def test_apply_mean_over_pickers_sign_and_weight_decay():
    p0 = torch.linspace(-1, 1, 8)
    p = p0.clone()
    opt = DistroOptimizer([p], topk=2, chunk=8, weight_decay=0.1)
    a = SparseParam((8,), (1, 8), torch.tensor([[1, 2]]), torch.tensor([[1.0, 3.0]]))
    b = SparseParam((8,), (1, 8), torch.tensor([[2, 5]]), torch.tensor([[5.0, -1.0]]))
    opt.apply_results([PeerResult(b"b", (b,)), PeerResult(b"a", (a,))], lr=0.05)
    mean = torch.tensor([0, 1, 4, 0, 0, -1, 0, 0], dtype=torch.float64)  # mean over pickers only
    q = ChunkedDCT((8,), 8).decode(mean.unsqueeze(0))
    want = p0 * (1 - 0.05 * 0.1) - 0.05 * torch.sign(q).float()
    assert torch.equal(p, want)


def test_one_bit_apply_matches_manual():
    p0 = torch.randn(16, 16)
    p = p0.clone()
    opt = DistroOptimizer([p], topk=3, chunk=16, quantize_1bit=True)
    idx = torch.tensor([[0, 7, 100]])
    a = SparseParam((16, 16), (16, 16), idx, torch.tensor([[False, True, False]]))
    b = SparseParam((16, 16), (16, 16), torch.tensor([[7, 8, 100]]),
                    torch.tensor([[True, True, True]]))
    opt.apply_results([PeerResult(b"a", (a,)), PeerResult(b"b", (b,))], lr=0.1)
    m = torch.zeros(1, 256, dtype=torch.float64)
    m[0, 0], m[0, 7], m[0, 8], m[0, 100] = 1, -1, -1, 0  # +1 and -1 at 100 average to 0
    want = p0 - 0.1 * torch.sign(ChunkedDCT((16, 16), 16).decode(m)).float()
    assert torch.equal(p, want)


def random_peer(key, opt, seed, value_dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    out = []
    for t, k in zip(opt.transforms, opt.ks):
        idx = torch.rand(t.nchunks, t.totalk, generator=g).argsort(1)[:, :k].sort(1).values
        if opt.quantize_1bit:
            val = torch.rand(t.nchunks, k, generator=g) < 0.5
        else:
            val = (torch.randn(t.nchunks, k, generator=g) * 1e-3).to(value_dtype)
        out.append(SparseParam(t.shape, t.chunk, idx, val))
    return PeerResult(key, tuple(out))


@pytest.mark.parametrize("dtype,one_bit", [(torch.float32, False), (torch.bfloat16, False),
                                           (torch.bfloat16, True), (torch.float32, True)])
def test_replicas_bit_identical_regardless_of_arrival_order(dtype, one_bit):
    a_params, b_params = make_params(dtype), make_params(dtype)
    a = DistroOptimizer(a_params, topk=8, chunk=16, quantize_1bit=one_bit, weight_decay=0.01)
    b = DistroOptimizer(b_params, topk=8, chunk=16, quantize_1bit=one_bit, weight_decay=0.01)
    rng = random.Random(3)
    for step in range(3):
        peers = [random_peer(rng.randbytes(8), a, 100 * step + i, dtype) for i in range(6)]
        shuffled = peers[:]
        rng.shuffle(shuffled)
        a.apply_results(peers, lr=0.01)
        b.apply_results(shuffled[::-1], lr=0.01)
    for x, y in zip(a_params, b_params):
        assert x.dtype == dtype
        assert torch.equal(x, y)
    assert not all(torch.equal(x, y) for x, y in zip(a_params, make_params(dtype)))


def test_bad_results_rejected_and_model_untouched():
    params = make_params()
    opt = DistroOptimizer(params, topk=4, chunk=16)
    snapshot = [p.detach().clone() for p in params]
    good = random_peer(b"good", opt, 1)

    def with_param(i, sp):
        ps = list(good.params)
        ps[i] = sp
        return PeerResult(b"bad", tuple(ps))

    sp0 = good.params[0]
    bad = [
        PeerResult(b"bad", good.params[:-1]),                                  # missing param
        with_param(0, SparseParam(sp0.shape, sp0.chunk, sp0.indices[:, :3],
                                  sp0.values[:, :3])),                         # wrong k
        with_param(0, SparseParam((64, 128), sp0.chunk, sp0.indices, sp0.values)),  # shape
        with_param(0, SparseParam(sp0.shape, sp0.chunk, sp0.indices.flip(1), sp0.values)),
        with_param(0, SparseParam(sp0.shape, sp0.chunk, sp0.indices + 250, sp0.values)),
        with_param(0, SparseParam(sp0.shape, sp0.chunk, sp0.indices,
                                  sp0.values.index_fill(1, torch.tensor([0]), float("nan")))),
        with_param(0, SparseParam(sp0.shape, sp0.chunk, sp0.indices, sp0.values < 0)),  # 1-bit
    ]
    for b in bad:
        with pytest.raises(ValueError):
            opt.apply_results([good, b], lr=0.1)
    with pytest.raises(ValueError):
        opt.apply_results([good, good], lr=0.1)  # duplicate key
    for p, s in zip(params, snapshot):
        assert torch.equal(p, s)
    opt.apply_results([], lr=0.1)
    for p, s in zip(params, snapshot):
        assert torch.equal(p, s)


def test_lookahead_is_restored_exactly():
    params = make_params(torch.bfloat16)
    opt = DistroOptimizer(params, topk=4, chunk=16, lookahead=True)
    set_grads(params, 0)
    opt.compress_step(lr=0.01)
    before = [p.detach().clone() for p in params]
    opt.apply_lookahead(0.01)
    assert not all(torch.equal(p, b) for p, b in zip(params, before))
    with pytest.raises(RuntimeError):
        opt.apply_results([random_peer(b"x", opt, 0, torch.bfloat16)], lr=0.01)
    opt.remove_lookahead()
    assert all(torch.equal(p, b) for p, b in zip(params, before))
    opt.apply_lookahead(0.01)
    set_grads(params, 1)
    opt.compress_step(lr=0.01)  # undoes the lookahead first, as Psyche's generate
    assert all(torch.equal(p, b) for p, b in zip(params, before))


def test_state_dict_round_trip():
    params = make_params()
    opt = DistroOptimizer(params, topk=4, chunk=16)
    set_grads(params, 0)
    opt.compress_step(lr=0.1)
    other = DistroOptimizer(make_params(), topk=4, chunk=16)
    other.load_state_dict(opt.state_dict())
    assert all(torch.equal(x, y) for x, y in zip(opt.delta, other.delta))


@pytest.mark.parametrize("one_bit", [True, False])
def test_distro_reduces_tiny_mlp_loss_with_identical_replicas(one_bit):
    """4 clients, each with its own replica and its own data; payloads go through the binary
    encoding and are applied one round late (Psyche's pipeline), in each client's own arrival
    order. The loss falls and the replicas stay bit-identical."""
    torch.manual_seed(0)
    teacher = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))

    def student():
        torch.manual_seed(1)
        return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(),
                                   torch.nn.Linear(64, 1))

    models = [student() for _ in range(4)]
    opts = [DistroOptimizer(list(m.parameters()), lr=3e-3, topk=8, chunk=16,
                            quantize_1bit=one_bit) for m in models]
    xe = torch.randn(512, 16)
    ye = teacher(xe).detach()

    def loss(m):
        with torch.no_grad():
            return torch.nn.functional.mse_loss(m(xe), ye).item()

    start = loss(models[0])
    g = torch.Generator().manual_seed(5)
    rng = random.Random(7)
    pending = None
    for step in range(80):
        payloads = []
        for m, o in zip(models, opts):
            x = torch.randn(64, 16, generator=g)
            m.zero_grad()
            torch.nn.functional.mse_loss(m(x), teacher(x).detach()).backward()
            payloads.append(encode_payload(o.compress_step(), rice=step % 2 == 0))
        if pending is not None:  # apply the previous round's results now
            for o in opts:
                arrived = pending[:]
                rng.shuffle(arrived)
                o.apply_results([PeerResult(bytes([i]), tuple(decode_payload(p, layout=o.layout())))
                                 for i, p in arrived])
        pending = list(enumerate(payloads))
    end = loss(models[0])
    assert end < 0.1 * start, (start, end)
    for m in models[1:]:
        assert all(torch.equal(a, b) for a, b in zip(models[0].parameters(), m.parameters()))
