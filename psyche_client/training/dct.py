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
