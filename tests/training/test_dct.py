"""Chunked orthonormal DCT: chunk choice, basis against the reference's test vectors, round
trips."""

import math

import pytest

torch = pytest.importorskip("torch")

from psyche_client.training.dct import ChunkedDCT, dct_matrix, get_smaller_split  # noqa: E402


def test_smaller_split_matches_reference_vectors():
    # From Psyche's distro.rs tests (test_get_smaller_split, test_large_numbers).
    for (n, t), want in {(12, 3): 3, (12, 4): 4, (12, 5): 4, (100, 7): 5, (100, 26): 25,
                         (100, 101): 100, (1, 1): 1, (1000000007, 500000000): 1,
                         (4096, 64): 64, (768, 64): 64, (50304, 64): 64, (1000, 64): 50,
                         (97, 64): 1}.items():
        assert get_smaller_split(n, t) == want, (n, t)
    with pytest.raises(ValueError):
        get_smaller_split(0, 64)


def test_basis_matches_reference_4x4():
    # The reference's f_dict[4] = dct(eye(4), ortho) is D^T in our notation.
    truth = torch.tensor([[0.5000, 0.6533, 0.5000, 0.2706],
                          [0.5000, 0.2706, -0.5000, -0.6533],
                          [0.5000, -0.2706, -0.5000, 0.6533],
                          [0.5000, -0.6533, 0.5000, -0.2706]])
    assert torch.allclose(dct_matrix(4).T, truth, atol=1e-4)
    for n in (1, 2, 3, 7, 16, 64):
        d = dct_matrix(n, torch.float64)
        assert torch.allclose(d @ d.T, torch.eye(n, dtype=torch.float64), atol=1e-12)


def test_encode_matches_reference_vectors():
    c = ChunkedDCT((8,), 64).encode(torch.arange(8.0))
    truth = torch.tensor([9.8995, -6.4423, 0.0, -0.67345, 0.0, -0.20090, 0.0, -0.050702])
    assert torch.allclose(c.squeeze(0), truth, atol=1e-4)
    assert torch.allclose(ChunkedDCT((4, 4), 64).encode(torch.eye(4)).reshape(4, 4), torch.eye(4),
                          atol=1e-6)


def test_separable_2d_tiles_match_direct_formula():
    x = torch.randn(12, 10, dtype=torch.float64)
    t = ChunkedDCT((12, 10), 5)  # chunk (4, 5): tiles 3 x 2
    assert t.chunk == (4, 5) and t.tiles == (3, 2) and t.totalk == 20
    c = t.encode(x)
    h, w = t.chunk
    for ty in range(3):
        for tx in range(2):
            tile = x[ty * h:(ty + 1) * h, tx * w:(tx + 1) * w]
            for a in range(h):
                for b in range(w):
                    s = 0.0
                    for i in range(h):
                        for j in range(w):
                            ca = math.sqrt((1 if a == 0 else 2) / h)
                            cb = math.sqrt((1 if b == 0 else 2) / w)
                            s += (ca * math.cos(math.pi * (2 * i + 1) * a / (2 * h)) *
                                  cb * math.cos(math.pi * (2 * j + 1) * b / (2 * w)) * tile[i, j])
                    assert abs(float(c[ty * 2 + tx, a * w + b]) - s) < 1e-9


@pytest.mark.parametrize("target", [8, 16, 64, 100])
@pytest.mark.parametrize("shape", [(64, 64), (128, 96), (100, 30), (7, 13), (4096,), (10,),
                                   (3, 5, 8), (), (97, 64), (1, 256)])
def test_round_trip_fp32(shape, target):
    torch.manual_seed(0)
    x = torch.randn(shape)
    t = ChunkedDCT(shape, target)
    c = t.encode(x)
    assert c.shape == (t.nchunks, t.totalk)
    assert t.chunk[0] <= max(target, 1) and t.chunk[1] <= target
    y = t.decode(c)
    assert y.shape == x.shape and y.dtype == torch.float32
    assert float((y - x).abs().max()) < 1e-5
    # orthonormal: energy is preserved
    assert abs(float(c.pow(2).sum()) - float(x.pow(2).sum())) < 1e-3 * max(1.0, x.numel())
