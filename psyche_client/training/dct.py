"""Orthonormal DCT-II / DCT-III as matrix products, applied chunk-wise to parameters.

Following Psyche's ``TransformDCT`` (``shared/modeling/src/distro.rs``) and DeMo's ``demo.py``:
every dimension ``n`` of a parameter gets the chunk ``get_smaller_split(n, target)`` (the largest
divisor of ``n`` that is <= target; ``n`` itself when ``n <= target``). A 2-D parameter ``(R, C)``
is cut into ``(R/h) x (C/w)`` tiles of ``h x w`` and each tile gets a separable 2-D DCT
``D_h X D_w^T``; the tile's ``h*w`` coefficients are then flattened row-major (index
``a*w + b`` for frequency ``(a, b)``).

Every parameter is viewed as 2-D: a 0-d tensor as ``(1, 1)``, a 1-D tensor ``(n,)`` as ``(1, n)``
(the 1x1 DCT is the identity, so this is exactly the reference's 1-D path: chunks of
``get_smaller_split(n)`` along the only axis), and an N-D tensor (N > 2) as
``(shape[0], prod(shape[1:]))``; the reference only handles 1-D and 2-D.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch

MAX_CHUNK_ELEMENTS = 1 << 24  # totalk cap, shared with the payload decoder


def get_divisors(n: int) -> list[int]:
    if n < 1:
        return []
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i != n // i:
                large.append(n // i)
        i += 1
    return small + large[::-1]


def get_smaller_split(n: int, target: int) -> int:
    """The largest divisor of ``n`` that is <= ``target`` (``n`` when ``n <= target``).

    Same results as the reference's ``get_smaller_split`` for n >= 1, target >= 1:
    (12, 5) -> 4, (100, 7) -> 5, (100, 26) -> 25, (100, 101) -> 100, a prime > target -> 1."""
    if n < 1 or target < 1:
        raise ValueError(f"get_smaller_split needs n >= 1 and target >= 1, got {n}, {target}")
    if n <= target:
        return n
    best = 1
    for d in get_divisors(n):
        if d > target:
            break
        best = d
    return best


@lru_cache(maxsize=None)
def _dct_matrix_f64(n: int) -> torch.Tensor:
    k = torch.arange(n, dtype=torch.float64).unsqueeze(1)  # frequency (row)
    i = torch.arange(n, dtype=torch.float64).unsqueeze(0)  # sample (column)
    d = torch.cos(math.pi * (2.0 * i + 1.0) * k / (2.0 * n)) * math.sqrt(2.0 / n)
    d[0, :] = math.sqrt(1.0 / n)
    return d


_MATRIX_CACHE: dict[tuple[int, torch.dtype, torch.device], torch.Tensor] = {}


def dct_matrix(n: int, dtype: torch.dtype = torch.float32,
               device: torch.device | str | None = None) -> torch.Tensor:
    """Orthonormal DCT-II matrix ``D`` (n x n): ``c = D @ x`` is the DCT-II of ``x`` with
    ``norm="ortho"``; ``x = D.T @ c`` is the inverse (DCT-III). Built in float64, then cast."""
    if n < 1:
        raise ValueError(f"DCT size must be >= 1, got {n}")
    device = torch.device(device) if device is not None else torch.device("cpu")
    key = (n, dtype, device)
    m = _MATRIX_CACHE.get(key)
    if m is None:
        m = _dct_matrix_f64(n).to(dtype=dtype, device=device).contiguous()
        _MATRIX_CACHE[key] = m
    return m


def as_2d_shape(shape: tuple[int, ...]) -> tuple[int, int]:
    shape = tuple(int(s) for s in shape)
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return 1, shape[0]
    return shape[0], math.prod(shape[1:])


class ChunkedDCT:
    """The chunked 2-D DCT of one parameter shape.

    ``encode(x)`` -> coefficients ``(nchunks, totalk)``, chunks in row-major tile order;
    ``decode(c)`` -> a tensor of the parameter's shape. Both are plain einsums with the basis
    matrices in the input's dtype (the caller chooses the precision)."""

    def __init__(self, shape: tuple[int, ...], target_chunk: int = 64):
        self.shape = tuple(int(s) for s in shape)
        if any(s < 1 for s in self.shape):
            raise ValueError(f"parameter shape {self.shape} has an empty dimension")
        self.rows, self.cols = as_2d_shape(self.shape)
        self.chunk = (get_smaller_split(self.rows, target_chunk),
                      get_smaller_split(self.cols, target_chunk))
        self.totalk = self.chunk[0] * self.chunk[1]
        if self.totalk > MAX_CHUNK_ELEMENTS:
            raise ValueError(f"chunk {self.chunk} has more than {MAX_CHUNK_ELEMENTS} elements")
        self.tiles = (self.rows // self.chunk[0], self.cols // self.chunk[1])
        self.nchunks = self.tiles[0] * self.tiles[1]

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        if tuple(x.shape) != self.shape:
            raise ValueError(f"encode: expected shape {self.shape}, got {tuple(x.shape)}")
        (h, w), (ty, tx) = self.chunk, self.tiles
        dh = dct_matrix(h, x.dtype, x.device)
        dw = dct_matrix(w, x.dtype, x.device)
        t = x.reshape(ty, h, tx, w)
        # c[y, x, a, b] = sum_{i,j} D_h[a, i] t[y, i, x, j] D_w[b, j]
        c = torch.einsum("yixj,ai,bj->yxab", t, dh, dw)
        return c.reshape(self.nchunks, self.totalk)

    def decode(self, c: torch.Tensor) -> torch.Tensor:
        if tuple(c.shape) != (self.nchunks, self.totalk):
            raise ValueError(f"decode: expected coefficients {(self.nchunks, self.totalk)}, "
                             f"got {tuple(c.shape)}")
        (h, w), (ty, tx) = self.chunk, self.tiles
        dh = dct_matrix(h, c.dtype, c.device)
        dw = dct_matrix(w, c.dtype, c.device)
        t = c.reshape(ty, tx, h, w)
        # x[y, i, x, j] = sum_{a,b} D_h[a, i] c[y, x, a, b] D_w[b, j]
        x = torch.einsum("yxab,ai,bj->yixj", t, dh, dw)
        return x.reshape(self.shape)


# ----- the consensus decode: the sign of the inverse DCT, the same bits on every device -----
#
# float64 holds every integer of magnitude <= 2**53 exactly, so a matrix product of integers whose
# sums of |terms| stay within 2**53 is exact whatever the summation order, blocking, FMA use,
# thread count, BLAS or device. The decode below rounds the coefficients and the basis to such
# integers (a power-of-two scale per row, then per column; scales by powers of two are exact and
# positive, so they keep signs) and takes the sign of an exact result.

EXACT_INTEGER_BITS = 53


def pow2(k: torch.Tensor) -> torch.Tensor:
    """``2.0 ** k`` as float64 for integer ``k``, built from the exponent bits (exact, no libm)."""
    k = k.to(torch.int64)
    if k.numel() and (int(k.min()) < -1022 or int(k.max()) > 1023):
        raise ValueError("power of two outside float64's normal range")
    return ((k + 1023) << 52).view(torch.float64)


def fixed_point_bits(n: int) -> tuple[int, int]:
    """(basis bits, data bits) for a product that sums ``n`` terms: n * 2**(basis+data) <= 2**53."""
    budget = EXACT_INTEGER_BITS - (n - 1).bit_length()
    return budget // 2, budget - budget // 2


def scaled_basis(n: int) -> list[list[float]]:
    """The DCT-II matrix times 2**(basis_bits - e), e the smallest integer with sqrt(2/n) <= 2**e
    (every |entry| is at most sqrt(2/n)), from Python's ``math.cos``: entries <= 2**basis_bits."""
    bits, _ = fixed_point_bits(n)
    e = 0
    while n * 4.0 ** (e - 1) >= 2:  # sqrt(2/n) <= 2**(e-1) still holds
        e -= 1
    while n * 4.0 ** e < 2:
        e += 1
    scale = 2.0 ** (bits - e)
    return [[(math.sqrt(1.0 / n) if k == 0 else
              math.sqrt(2.0 / n) * math.cos(math.pi * (2 * i + 1) * k / (2 * n))) * scale
             for i in range(n)] for k in range(n)]


@lru_cache(maxsize=None)
def fixed_point_basis(n: int) -> torch.Tensor:
    """``scaled_basis(n)`` rounded to integers (float64). The grid is far coarser than libm's last
    bit and no entry lies near a rounding tie (tests/training/test_apply_determinism.py), so
    every machine gets the same integers."""
    return torch.tensor(scaled_basis(n), dtype=torch.float64).round()


def _to_fixed_point(x: torch.Tensor, dim: int, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Round ``x`` (float64) to integers of magnitude <= 2**bits, scaled by a power of two per
    slice along ``dim`` (from that slice's largest |x|). Returns (integers, each slice's exponent
    E with x ~ integers * 2**(E - bits)). A scale outside float64's range raises ValueError."""
    peak = x.abs().amax(dim=dim, keepdim=True)
    if not bool(torch.isfinite(peak).all()):
        raise ValueError("non-finite coefficient")
    _, e = torch.frexp(peak)  # |x| <= peak < 2**e (peak 0 -> e = 0)
    return torch.round(x * pow2(bits - e)), e


def decode_sign(t: "ChunkedDCT", c: torch.Tensor) -> torch.Tensor:
    """``sign(t.decode(c))`` as int8 on the CPU, computed the same way on every machine.

    The coefficients are rounded to fixed point per row (data bits of the width's product), the
    first product with the integer basis is exact; its output is rounded again per column for the
    second product, which is exact too. The relative rounding is about 2**-23 of each row's or
    column's largest value for 64-wide chunks, about float32's precision; only the sign is kept.
    Values from float32, bfloat16 or float16 results (and their means) never reach the range
    limits; coefficients whose scales differ by more than float64's exponent range raise
    ValueError rather than lose exactness."""
    if tuple(c.shape) != (t.nchunks, t.totalk):
        raise ValueError(f"decode_sign: expected coefficients {(t.nchunks, t.totalk)}, "
                         f"got {tuple(c.shape)}")
    (h, w), (ty, tx) = t.chunk, t.tiles
    x = c.detach().to(device="cpu", dtype=torch.float64).reshape(ty, tx, h, w)
    try:
        rows, row_exp = _to_fixed_point(x, 3, fixed_point_bits(w)[1])
        # u[y,x,a,j] = sum_b c[y,x,a,b] D_w[b,j]: exact; then the rows back on one scale, exact
        u = torch.matmul(rows, fixed_point_basis(w))
        u = u * pow2(row_exp - row_exp.amax(dim=2, keepdim=True))
        cols, _ = _to_fixed_point(u, 2, fixed_point_bits(h)[1])
    except ValueError as err:
        raise ValueError(f"decode_sign: {err}") from None
    q = torch.matmul(fixed_point_basis(h).T, cols)  # q[y,x,i,j] = sum_a D_h[a,i] u[..,a,j], exact
    return torch.sign(q).to(torch.int8).permute(0, 2, 1, 3).reshape(t.shape)
