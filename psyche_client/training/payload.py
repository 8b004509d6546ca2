"""Binary encoding of one client's DisTrO result (all parameters): the ``payload`` of a
``TrainingResult``, so the result's commitment (SHA-256) and signature cover every byte of it.

Layout, all integers little-endian::

    header   magic "PSDR" | version u8 (=1) | flags u8 | reserved u16 (=0) | param_count u32
             flags: 0x01 ONE_BIT (values are sign bits), 0x02 RICE (entropy-coded indices)
    per parameter, in model order:
             ndim u8 | dims u32 x ndim | chunk_h u32 | chunk_w u32 | totalk u32 | k u32 |
             value_code u8 (0 sign bit, 1 bf16, 2 fp16, 3 fp32) |
             [RICE only: rice_r u8 | unary_len u32] | idx_len u32 | val_len u32 |
             idx bytes (idx_len) | val bytes (val_len)

``nchunks = (rows/chunk_h) * (cols/chunk_w)`` for the parameter's 2-D view (see ``dct.py``);
``n = nchunks * k`` coefficients; per chunk the indices are strictly increasing.

- raw indices: n x (u8 if totalk <= 256, u16 if <= 65536, else u32), chunk-major;
- RICE indices: per chunk the gaps ``i_0, i_1 - i_0 - 1, ...`` are Rice-coded with parameter r:
  the quotients ``g >> r`` in unary (q one-bits then a zero bit) as one bit stream of
  ``unary_len`` bytes, then the remainders as ``n * r`` bits; bits LSB-first, padding bits zero;
- values: ONE_BIT: n sign bits (1 = negative), LSB-first, padding zero; else n little-endian
  bf16/fp16/fp32 bit patterns, all finite.

The decoder is strict: truncated, trailing, non-canonical or inconsistent bytes raise ValueError,
and all sizes are checked against the header and against caps before anything is allocated."""

from __future__ import annotations

import struct
from typing import Sequence

import numpy as np
import torch

from .dct import MAX_CHUNK_ELEMENTS, as_2d_shape
from .distro import PeerResult, SparseParam

MAGIC = b"PSDR"
VERSION = 1
FLAG_ONE_BIT = 0x01
FLAG_RICE = 0x02
_KNOWN_FLAGS = FLAG_ONE_BIT | FLAG_RICE

VAL_SIGN, VAL_BF16, VAL_FP16, VAL_FP32 = 0, 1, 2, 3
_VAL_DTYPE = {VAL_BF16: torch.bfloat16, VAL_FP16: torch.float16, VAL_FP32: torch.float32}
_VAL_CODE = {v: k for k, v in _VAL_DTYPE.items()}
_VAL_BITS = {VAL_BF16: (torch.int16, "<i2", np.int16), VAL_FP16: (torch.int16, "<i2", np.int16),
             VAL_FP32: (torch.int32, "<i4", np.int32)}

MAX_PAYLOAD_BYTES = 1 << 30
MAX_PARAMS = 1 << 16
MAX_NDIM = 8
MAX_NUMEL = 1 << 40
MAX_RICE_R = 24
DEFAULT_MAX_COEFFICIENTS = 1 << 28

_HEADER = struct.Struct("<4sBBHI")
_PARAM_FIXED = struct.Struct("<IIIIB")
_RICE_HDR = struct.Struct("<BI")
_LENS = struct.Struct("<II")
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)
_UNARY_BLOCK = 1 << 20


def _index_width(totalk: int) -> int:
    return 1 if totalk <= 256 else 2 if totalk <= 65536 else 4


def coefficient_count(params: Sequence[SparseParam]) -> int:
    return sum(sp.nchunks * sp.k for sp in params)


def result_key(step: int, batch, trainer: bytes) -> bytes:
    """Canonical aggregation order: step, batch start, batch end, trainer key (all big-endian)."""
    return (step.to_bytes(4, "big") + batch.start.to_bytes(8, "big")
            + batch.end.to_bytes(8, "big") + bytes(trainer))


# ---------------------------------------------------------------- encoding

def _gaps(idx: np.ndarray) -> np.ndarray:
    g = idx.copy()
    g[:, 1:] = idx[:, 1:] - idx[:, :-1] - 1
    return g.ravel()


def best_rice_parameter(gaps: np.ndarray, totalk: int) -> int:
    """The r (0..bit length of totalk-1) that minimises the Rice-coded size of ``gaps``."""
    n = gaps.size
    best_r, best_bits = 0, None
    for r in range(0, min(MAX_RICE_R, max(1, (totalk - 1).bit_length())) + 1):
        bits = int((gaps >> r).sum()) + n * (1 + r)
        if best_bits is None or bits < best_bits:
            best_r, best_bits = r, bits
    return best_r


def _rice_encode(g: np.ndarray, r: int) -> tuple[bytes, bytes]:
    q = g >> r
    term = np.cumsum(q + 1) - 1
    ubits = np.ones(int(term[-1]) + 1, dtype=np.uint8)
    ubits[term] = 0
    unary = np.packbits(ubits, bitorder="little").tobytes()
    rem = b""
    if r:
        rb = ((g[:, None] >> np.arange(r, dtype=np.int64)) & 1).astype(np.uint8).ravel()
        rem = np.packbits(rb, bitorder="little").tobytes()
    return unary, rem


def encode_payload(params: Sequence[SparseParam], *, rice: bool = False) -> bytes:
    """Encode one client's result. All parameters must be in the same mode (1-bit or not)."""
    params = list(params)
    if not params:
        raise ValueError("no parameters to encode")
    if len(params) > MAX_PARAMS:
        raise ValueError(f"more than {MAX_PARAMS} parameters")
    one_bit = params[0].one_bit
    if any(sp.one_bit != one_bit for sp in params):
        raise ValueError("parameters mix 1-bit and full values")
    flags = (FLAG_ONE_BIT if one_bit else 0) | (FLAG_RICE if rice else 0)
    out = [_HEADER.pack(MAGIC, VERSION, flags, 0, len(params))]
    for sp in params:
        sp.validate()
        if len(sp.shape) > MAX_NDIM:
            raise ValueError(f"more than {MAX_NDIM} dimensions")
        h, w = sp.chunk
        totalk, n = sp.totalk, sp.nchunks * sp.k
        idx = sp.indices.detach().cpu().numpy().astype(np.int64, copy=False)
        if one_bit:
            code = VAL_SIGN
            bits = sp.values.detach().cpu().numpy().astype(np.uint8).ravel()
            vbytes = np.packbits(bits, bitorder="little").tobytes()
        else:
            code = _VAL_CODE[sp.values.dtype]
            tdt, npdt, _ = _VAL_BITS[code]
            raw = sp.values.detach().cpu().contiguous().view(tdt).numpy().ravel()
            vbytes = raw.astype(npdt, copy=False).tobytes()
        rec = [struct.pack(f"<B{len(sp.shape)}I", len(sp.shape), *sp.shape),
               _PARAM_FIXED.pack(h, w, totalk, sp.k, code)]
        if rice:
            g = _gaps(idx)
            r = best_rice_parameter(g, totalk)
            unary, rem = _rice_encode(g, r)
            ibytes = unary + rem
            rec.append(_RICE_HDR.pack(r, len(unary)))
        else:
            ibytes = idx.ravel().astype(f"<u{_index_width(totalk)}").tobytes()
        assert len(vbytes) == ((n + 7) // 8 if one_bit else n * (4 if code == VAL_FP32 else 2))
        rec += [_LENS.pack(len(ibytes), len(vbytes)), ibytes, vbytes]
        out += rec
    data = b"".join(out)
    if len(data) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"payload of {len(data)} bytes exceeds {MAX_PAYLOAD_BYTES}")
    return data


# ---------------------------------------------------------------- decoding

class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or n > len(self.data) - self.pos:
            raise ValueError(f"payload truncated: {what} needs {n} bytes at offset {self.pos}, "
                             f"{len(self.data) - self.pos} left")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, st: struct.Struct, what: str) -> tuple:
        return st.unpack(self.take(st.size, what))


def _decode_raw_indices(b: bytes, nchunks: int, k: int, totalk: int) -> np.ndarray:
    idx = np.frombuffer(b, dtype=f"<u{_index_width(totalk)}").astype(np.int64)
    return idx.reshape(nchunks, k)


def _decode_rice_indices(b: bytes, ulen: int, r: int, nchunks: int, k: int,
                         totalk: int) -> np.ndarray:
    n = nchunks * k
    u = np.frombuffer(b, dtype=np.uint8, count=ulen)
    zeros = 8 * ulen - int(_POPCOUNT[u].sum())
    if zeros < n:
        raise ValueError("rice unary stream truncated: fewer terminators than coefficients")
    if zeros - n > 7:
        raise ValueError("rice unary stream has trailing data")
    term = np.empty(n, dtype=np.int64)
    filled = 0
    for start in range(0, ulen, _UNARY_BLOCK):
        if filled == n:
            break
        z = np.flatnonzero(np.unpackbits(u[start:start + _UNARY_BLOCK], bitorder="little") == 0)
        take = min(z.size, n - filled)
        term[filled:filled + take] = z[:take] + 8 * start
        filled += take
    pad = 8 * ulen - int(term[-1]) - 1
    if pad != zeros - n or pad > 7:
        raise ValueError("rice unary stream: padding is not zero bits or stream too long")
    q = np.diff(term, prepend=-1) - 1
    if int(q.max()) > (totalk - 1) >> r:
        raise ValueError("rice gap out of range")
    g = q << r
    if r:
        rem_bytes = np.frombuffer(b, dtype=np.uint8, offset=ulen)
        nbits = n * r
        if nbits % 8 and int(rem_bytes[-1]) >> (nbits % 8):
            raise ValueError("rice remainder stream: padding bits are not zero")
        pos = np.arange(n, dtype=np.int64) * r
        for j in range(r):
            p = pos + j
            g |= ((rem_bytes[p >> 3] >> (p & 7).astype(np.uint8)) & 1).astype(np.int64) << j
    if int(g.max()) >= totalk:
        raise ValueError("rice gap out of range")
    return np.cumsum(g.reshape(nchunks, k) + 1, axis=1) - 1


def _decode_values(b: bytes, code: int, n: int) -> torch.Tensor:
    if code == VAL_SIGN:
        v = np.frombuffer(b, dtype=np.uint8)
        if n % 8 and int(v[-1]) >> (n % 8):
            raise ValueError("sign bits: padding bits are not zero")
        return torch.from_numpy(np.unpackbits(v, bitorder="little", count=n).astype(np.bool_))
    tdt, npdt, native = _VAL_BITS[code]
    raw = np.frombuffer(b, dtype=npdt).astype(native)
    vals = torch.from_numpy(raw).view(_VAL_DTYPE[code])
    if not bool(torch.isfinite(vals).all()):
        raise ValueError("non-finite value")
    return vals


def decode_payload(data: bytes, *, layout: Sequence[tuple] | None = None,
                   max_coefficients: int = DEFAULT_MAX_COEFFICIENTS,
                   max_bytes: int = MAX_PAYLOAD_BYTES) -> list[SparseParam]:
    """Decode and fully validate a payload. ``layout`` (``DistroOptimizer.layout()``), when given,
    must match every parameter's (shape, chunk, k, one_bit); it is checked from the headers,
    before the parameter's data is decoded. Raises ValueError on anything malformed."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ValueError("payload must be bytes")
    data = bytes(data)
    if len(data) > max_bytes:
        raise ValueError(f"payload of {len(data)} bytes exceeds {max_bytes}")
    try:
        return _decode(data, layout, max_coefficients)
    except (IndexError, struct.error, OverflowError) as e:  # defensive: never leak these
        raise ValueError(f"malformed payload: {e}") from None


def _decode(data: bytes, layout, max_coefficients: int) -> list[SparseParam]:
    rd = _Reader(data)
    magic, version, flags, reserved, count = rd.unpack(_HEADER, "header")
    if magic != MAGIC:
        raise ValueError("not a DisTrO payload (bad magic)")
    if version != VERSION:
        raise ValueError(f"unsupported payload version {version}")
    if flags & ~_KNOWN_FLAGS or reserved:
        raise ValueError(f"unknown flags {flags:#x} or nonzero reserved field")
    if not 1 <= count <= MAX_PARAMS:
        raise ValueError(f"parameter count {count} out of range 1..{MAX_PARAMS}")
    if layout is not None and len(layout) != count:
        raise ValueError(f"payload has {count} parameters, model has {len(layout)}")
    one_bit, rice = bool(flags & FLAG_ONE_BIT), bool(flags & FLAG_RICE)
    out, total_n = [], 0
    for i in range(count):
        what = f"parameter {i}"
        (ndim,) = rd.unpack(struct.Struct("<B"), what)
        if ndim > MAX_NDIM:
            raise ValueError(f"{what}: {ndim} dimensions (max {MAX_NDIM})")
        dims = rd.unpack(struct.Struct(f"<{ndim}I"), what)
        if any(d < 1 for d in dims):
            raise ValueError(f"{what}: empty dimension in {dims}")
        numel = 1
        for d in dims:
            numel *= d
        if numel > MAX_NUMEL:
            raise ValueError(f"{what}: {numel} elements (max {MAX_NUMEL})")
        h, w, totalk, k, code = rd.unpack(_PARAM_FIXED, what)
        rows, cols = as_2d_shape(dims)
        if h < 1 or w < 1 or rows % h or cols % w:
            raise ValueError(f"{what}: chunk {(h, w)} does not tile {(rows, cols)}")
        if totalk != h * w or totalk > MAX_CHUNK_ELEMENTS:
            raise ValueError(f"{what}: totalk {totalk} inconsistent with chunk {(h, w)} or too big")
        if not 1 <= k <= totalk:
            raise ValueError(f"{what}: k = {k} out of range 1..{totalk}")
        if one_bit != (code == VAL_SIGN) or (code != VAL_SIGN and code not in _VAL_DTYPE):
            raise ValueError(f"{what}: value code {code} inconsistent with flags {flags:#x}")
        if layout is not None:
            want = layout[i]
            got = (tuple(dims), (h, w), k, one_bit)
            if (tuple(want[0]), tuple(want[1]), want[2], bool(want[3])) != got:
                raise ValueError(f"{what}: layout {got} does not match the model's {tuple(want)}")
        if rice:
            r, ulen = rd.unpack(_RICE_HDR, what)
            if r > MAX_RICE_R:
                raise ValueError(f"{what}: rice parameter {r} > {MAX_RICE_R}")
        idx_len, val_len = rd.unpack(_LENS, what)
        nchunks = (rows // h) * (cols // w)
        n = nchunks * k
        total_n += n
        if total_n > max_coefficients:
            raise ValueError(f"more than {max_coefficients} coefficients")
        want_val = (n + 7) // 8 if one_bit else n * (4 if code == VAL_FP32 else 2)
        if val_len != want_val:
            raise ValueError(f"{what}: value section of {val_len} bytes, expected {want_val}")
        if rice:
            rem_len = (n * r + 7) // 8
            if idx_len != ulen + rem_len:
                raise ValueError(f"{what}: index section of {idx_len} bytes, expected "
                                 f"{ulen} + {rem_len}")
            if n > 8 * ulen:
                raise ValueError(f"{what}: rice unary stream too short for {n} coefficients")
        elif idx_len != n * _index_width(totalk):
            raise ValueError(f"{what}: index section of {idx_len} bytes, expected "
                             f"{n * _index_width(totalk)}")
        ib = rd.take(idx_len, f"{what} indices")
        vb = rd.take(val_len, f"{what} values")
        if rice:
            idx = _decode_rice_indices(ib, ulen, r, nchunks, k, totalk)
        else:
            idx = _decode_raw_indices(ib, nchunks, k, totalk)
        if int(idx.max()) >= totalk:
            raise ValueError(f"{what}: index out of range (totalk {totalk})")
        if k > 1 and not bool((idx[:, 1:] > idx[:, :-1]).all()):
            raise ValueError(f"{what}: indices not strictly increasing within a chunk")
        vals = _decode_values(vb, code, n).reshape(nchunks, k)
        out.append(SparseParam(tuple(dims), (h, w), torch.from_numpy(idx), vals))
    if rd.pos != len(data):
        raise ValueError(f"payload has {len(data) - rd.pos} trailing bytes")
    return out


def peer_result_from_training_result(tr, *, layout: Sequence[tuple] | None = None,
                                     max_coefficients: int = DEFAULT_MAX_COEFFICIENTS
                                     ) -> PeerResult:
    """Check a ``TrainingResult`` (commitment and signature) and decode its payload into a
    ``PeerResult`` keyed for canonical aggregation. Raises ValueError if either fails.
    (Checking that the trainer was assigned the batch is the caller's job.)"""
    why = tr.check()
    if why:
        raise ValueError(f"training result rejected: {why}")
    params = decode_payload(tr.payload, layout=layout, max_coefficients=max_coefficients)
    return PeerResult(result_key(tr.step, tr.batch, tr.trainer), tuple(params))
