"""DisTrO (DeMo) optimizer: decoupled momentum, chunked-DCT top-k with error feedback, sign-SGD.

The reference is DeMo's ``demo.py`` (bloc97/DeMo) and Psyche's port
``shared/modeling/src/distro.rs``.
Per parameter ``p`` with momentum buffer ``delta`` (zeros at start):

``compress_step(lr)`` (the local half; Psyche's ``generate``)::

    delta <- momentum_decay * delta + lr * grad        # lr-scaled grad, no (1 - beta) factor
    C     <- DCT_chunked(delta)                         # (nchunks, totalk)
    idx   <- top-k of |C| per chunk (k clamped to [1, totalk]), sorted ascending; val = C[idx]
    delta <- delta - IDCT(scatter(idx, val))            # error feedback, alpha = 1
    send (idx, val)  or, with quantize_1bit, (idx, signbit(val))

``apply_results(results, lr)`` (the consensus half; Psyche's ``apply``/``optimize``)::

    keep  <- the results the screen passes (screen.py: none far above the round's median norm
             or against its majority direction; off = all, the reference)
    v_r <- per parameter, result r's values scaled by min(1, clip * median_r' |v_r'| / |v_r|)
           (L2 norms; bounded influence per result; clip = 0: no scaling, the reference)
    M   <- per coefficient: mean of the values v_r of the results that picked it (0 where none
           did); 1-bit values count as 1 - 2*bit = +-1 (all of one norm: the clip changes none)
    Q   <- IDCT(M)
    p   <- p * (1 - lr * weight_decay)                  # only if weight_decay != 0
    p   <- p - lr * sign(Q)

The two halves are separate calls, so a client can apply round h's results while it trains round
h+1 (Psyche's one-step-delayed pipeline). Every client that applies the same set of results ends
with bit-identical parameters, whatever the arrival order, thread count or device: ``M`` is built
on the CPU from the results sorted by key (indices are unique within each chunk, so each sum is a
fixed sequence of additions in ``agg_dtype``, float64 by default), and ``sign(Q)`` is computed on
the CPU in exact fixed-point arithmetic (``dct.decode_sign``); only the sign goes to the
parameter's device. The clip's norms are exact too: each square of a float32/bf16/fp16 value is
exact in float64 and ``math.fsum`` rounds their sum correctly (no reduction tree that depends on
threads or SIMD width), the square root is correctly rounded, the median is taken of the sorted
list, and each scale is one float64 multiplication per value.

Deviations from the reference, all deliberate (see README.md):
- weight decay is applied in ``apply_results`` (a function of the consensus only) instead of in
  ``generate`` on each trainer, so a client with no batch this round decays exactly like the rest;
- ``delta`` is kept in ``state_dtype`` (float32 by default; the reference keeps it in the param
  dtype), aggregation runs in float64 and the inverse DCT in exact fixed point (about float32's
  precision, the same bits everywhere), not in the param dtype;
- top-k indices are sent sorted by index, not by magnitude (same set, canonical order);
- the optional lookahead (Psyche's ``error_correction``) steps by the sign of the update as it was
  sent, not of the whole delta (so a verifier can reproduce it), and saves and restores the
  parameters exactly rather than subtracting and re-adding the step (which is not bit-exact);
- optional norm clipping (``clip``) bounds each result's influence on the mean (the reference
  takes the plain mean): a robust-aggregation second line behind result validation;
- the optional screen (``screen``) leaves a round's outliers out of the mean altogether.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import torch

from .dct import ChunkedDCT, as_2d_shape, decode_sign
from .screen import LeftOut, sumsq
from .screen import screen as screen_round

FLOAT_VALUE_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@dataclass(frozen=True, eq=False)
class SparseParam:
    """One parameter's compressed update.

    ``indices``: int64 ``(nchunks, k)``, strictly increasing within each row, each < totalk.
    ``values``: ``(nchunks, k)``, a float tensor (fp32, bf16 or fp16) or, in 1-bit mode, a bool
    tensor of sign bits (True = negative, as ``torch.signbit``)."""

    shape: tuple[int, ...]
    chunk: tuple[int, int]
    indices: torch.Tensor
    values: torch.Tensor

    @property
    def totalk(self) -> int:
        return self.chunk[0] * self.chunk[1]

    @property
    def nchunks(self) -> int:
        return int(self.indices.shape[0])

    @property
    def k(self) -> int:
        return int(self.indices.shape[1])

    @property
    def one_bit(self) -> bool:
        return self.values.dtype == torch.bool

    def layout(self) -> tuple:
        return (self.shape, self.chunk, self.k, self.one_bit)

    def validate(self) -> None:
        """Raise ValueError unless the tensors are consistent with shape/chunk."""
        if any(int(x) < 1 for x in self.shape):
            raise ValueError(f"shape {self.shape} has an empty dimension")
        rows, cols = as_2d_shape(self.shape)
        h, w = self.chunk
        if h < 1 or w < 1 or rows % h or cols % w:
            raise ValueError(f"chunk {self.chunk} does not tile the 2-D view {(rows, cols)}")
        nchunks = (rows // h) * (cols // w)
        if self.indices.dtype != torch.int64 or self.indices.dim() != 2:
            raise ValueError("indices must be a 2-D int64 tensor")
        if tuple(self.indices.shape)[0] != nchunks or not 1 <= self.k <= self.totalk:
            raise ValueError(f"indices shape {tuple(self.indices.shape)} does not fit "
                             f"{nchunks} chunks of {self.totalk}")
        if tuple(self.values.shape) != tuple(self.indices.shape):
            raise ValueError("values and indices differ in shape")
        if self.values.dtype != torch.bool and self.values.dtype not in FLOAT_VALUE_DTYPES:
            raise ValueError(f"unsupported value dtype {self.values.dtype}")
        if int(self.indices.min()) < 0 or int(self.indices.max()) >= self.totalk:
            raise ValueError("index out of range")
        if self.k > 1 and not bool((self.indices[:, 1:] > self.indices[:, :-1]).all()):
            raise ValueError("indices are not strictly increasing within each chunk")
        if self.values.dtype != torch.bool and not bool(torch.isfinite(self.values).all()):
            raise ValueError("non-finite value")

    def dense_values(self, dtype: torch.dtype) -> torch.Tensor:
        """The values as numbers; 1-bit sign bits unpack to ``1 - 2*bit`` (+-1), as the
        reference does."""
        if self.one_bit:
            return 1 - 2 * self.values.to(dtype)
        return self.values.to(dtype)


@dataclass(frozen=True, eq=False)
class PeerResult:
    """One client's result for every parameter, with the key that fixes its aggregation order
    (``payload.result_key``: step, batch, trainer)."""

    key: bytes
    params: tuple[SparseParam, ...]


def update_signs(transforms: Sequence[ChunkedDCT], params: Sequence[SparseParam]
                 ) -> list[torch.Tensor]:
    """Per parameter, sign(IDCT(one result's values)) as int8 on the CPU, decoded exactly
    (``dct.decode_sign``): the direction of that result's own step, the same bits for its
    trainer (its lookahead) and for any peer that decodes its payload (a verifier)."""
    out = []
    for t, sp in zip(transforms, params):
        c = torch.zeros(t.nchunks, t.totalk, dtype=torch.float64)
        out.append(decode_sign(t, c.scatter_(1, sp.indices.cpu(),
                                             sp.dense_values(torch.float64).cpu())))
    return out


def value_norm(sp: SparseParam) -> float:
    """The L2 norm of a result's values for one parameter, the same float64 on every machine:
    the squares of float32/bf16/fp16 values are exact in float64, ``math.fsum`` rounds their sum
    correctly whatever the order, and ``math.sqrt`` is correctly rounded."""
    return math.sqrt(sumsq(sp.dense_values(torch.float64).to("cpu")))


class DistroOptimizer:
    def __init__(self, params: Iterable[torch.Tensor], lr: float = 4e-4,
                 momentum_decay: float = 0.999, weight_decay: float = 0.0, chunk: int = 64,
                 topk: int = 32, quantize_1bit: bool = False,
                 value_dtype: torch.dtype | None = None,
                 state_dtype: torch.dtype | None = torch.float32,
                 agg_dtype: torch.dtype = torch.float64,
                 max_grad_norm: float | None = None, lookahead: bool = False,
                 clip: float = 0.0, screen: bool = False):
        """``value_dtype``: dtype of the values sent when not 1-bit (None: the param's dtype).
        ``state_dtype``: dtype of ``delta`` (None: the param's dtype, as the reference).
        ``agg_dtype``: dtype of the aggregation sums in ``apply_results`` (the inverse DCT is
        exact fixed point whatever it is).
        ``max_grad_norm``: clip the global grad norm in ``compress_step`` (reference: clip 1.0).
        ``lookahead``: keep the sent update's sign for ``apply_lookahead`` (Psyche's
        error_correction, on the transmitted part).
        ``clip``: in ``apply_results``, scale each result's values of a parameter down to an L2
        norm of at most ``clip`` times the median norm of the round's results for it (0: off;
        else >= 1, so a result at the median is never scaled). 1-bit results all have the same
        norm, so the clip changes nothing for them.
        ``screen``: in ``apply_results``, leave out the round's outliers first (``screen.py``:
        a norm far above the round's median, or a direction against its majority)."""
        self.params = [p for p in params]
        if (isinstance(clip, bool) or not isinstance(clip, (int, float))
                or not math.isfinite(clip) or not (clip == 0 or clip >= 1)):
            raise ValueError(f"clip must be 0 (off) or a finite number >= 1, not {clip!r}")
        if not self.params:
            raise ValueError("no parameters")
        if len({id(p) for p in self.params}) != len(self.params):
            raise ValueError("a parameter appears twice")
        for p in self.params:
            if p.dtype not in FLOAT_VALUE_DTYPES:
                raise ValueError(f"unsupported parameter dtype {p.dtype}")
        if topk < 1 or chunk < 1:
            raise ValueError("topk and chunk must be >= 1")
        if value_dtype is not None and value_dtype not in FLOAT_VALUE_DTYPES:
            raise ValueError(f"unsupported value dtype {value_dtype}")
        self.lr = lr
        self.momentum_decay = momentum_decay
        self.weight_decay = weight_decay
        self.chunk_target = chunk
        self.topk = topk
        self.quantize_1bit = quantize_1bit
        self.value_dtype = value_dtype
        self.agg_dtype = agg_dtype
        self.max_grad_norm = max_grad_norm
        self.lookahead = lookahead
        self.clip = float(clip)
        self.screen = bool(screen)
        self.transforms = [ChunkedDCT(tuple(p.shape), chunk) for p in self.params]
        self.ks = [min(max(topk, 1), t.totalk) for t in self.transforms]
        with torch.no_grad():
            self.delta = [torch.zeros(p.shape, dtype=state_dtype or p.dtype, device=p.device)
                          for p in self.params]
        self.last_unquantized: list[SparseParam] | None = None
        self._sent: list[SparseParam] | None = None  # the last update sent (the lookahead's)
        self._backup: list[torch.Tensor] | None = None

    # ----- shapes -----

    def layout(self) -> list[tuple]:
        """Per parameter (shape, chunk, k, one_bit): what every peer's result must match."""
        return [(t.shape, t.chunk, k, self.quantize_1bit) for t, k in zip(self.transforms, self.ks)]

    # ----- local half -----

    @torch.no_grad()
    def compress_step(self, lr: float | None = None) -> list[SparseParam]:
        """Fold the current gradients into the momentum and return this client's compressed update
        (what goes into the payload). Undoes an active lookahead first, as Psyche's generate."""
        lr = self.lr if lr is None else lr
        if self._backup is not None:
            self.remove_lookahead()
        if self.max_grad_norm is not None and self.max_grad_norm > 0:
            grads = [p for p in self.params if p.grad is not None]
            if grads:
                torch.nn.utils.clip_grad_norm_(grads, self.max_grad_norm)
        out, full = [], []
        for p, d, t, k in zip(self.params, self.delta, self.transforms, self.ks):
            if self.momentum_decay != 1.0:
                d.mul_(self.momentum_decay)
            if p.grad is not None:
                d.add_(p.grad.to(d.dtype), alpha=lr)
            c = t.encode(d)
            idx = torch.topk(c.abs(), k, dim=1, largest=True, sorted=False).indices
            idx, _ = torch.sort(idx, dim=1)
            val = torch.gather(c, 1, idx)
            d.sub_(t.decode(torch.zeros_like(c).scatter_(1, idx, val)))
            full.append(SparseParam(t.shape, t.chunk, idx, val))
            if self.quantize_1bit:
                sent = torch.signbit(val)
            else:
                sent = val.to(self.value_dtype or p.dtype)
            out.append(SparseParam(t.shape, t.chunk, idx, sent))
        self.last_unquantized = full
        if self.lookahead:
            # the update as it was sent, not the whole delta: public, so a verifier can train
            # where this client will (training README, deviation 5); decoded when stepped in
            self._sent = out
        return out

    # ----- consensus half -----

    def check_result(self, result: PeerResult) -> None:
        """Raise ValueError unless ``result`` fits this model and configuration."""
        if not isinstance(result.key, bytes):
            raise ValueError("result key must be bytes")
        if len(result.params) != len(self.params):
            raise ValueError(f"result has {len(result.params)} parameters, model has "
                             f"{len(self.params)}")
        for i, (sp, t, k) in enumerate(zip(result.params, self.transforms, self.ks)):
            if tuple(sp.shape) != t.shape or tuple(sp.chunk) != t.chunk:
                raise ValueError(f"parameter {i}: shape/chunk {sp.shape}/{sp.chunk}, expected "
                                 f"{t.shape}/{t.chunk}")
            if sp.k != k:
                raise ValueError(f"parameter {i}: k = {sp.k}, expected {k}")
            if sp.one_bit != self.quantize_1bit:
                raise ValueError(f"parameter {i}: 1-bit mode mismatch")
            sp.validate()

    @torch.no_grad()
    def apply_results(self, results: Sequence[PeerResult],
                      lr: float | None = None) -> list[LeftOut]:
        """Apply the consensus set of results (own result included, as everyone applies it).
        All results are checked before any parameter changes; ValueError leaves the model as is.
        An empty set changes nothing (the reference only warns). Returns the results the
        screen left out (none when it is off), the same on every client."""
        lr = self.lr if lr is None else lr
        if self._backup is not None:
            raise RuntimeError("apply_results while a lookahead is active; call remove_lookahead")
        results = list(results)
        if not results:
            return []
        for r in results:
            self.check_result(r)
        ordered = sorted(results, key=lambda r: r.key)
        for a, b in zip(ordered, ordered[1:]):
            if a.key == b.key:
                raise ValueError("two results with the same key")
        left_out = screen_round(ordered, self.transforms) if self.screen else []
        if left_out:
            out = {x.key for x in left_out}
            ordered = [r for r in ordered if r.key not in out]
        # Every sign first (int8, CPU: 1 B per element), so a ValueError changes nothing.
        signs = [decode_sign(t, self._consensus_mean(ordered, i, t))
                 for i, t in enumerate(self.transforms)]
        for p, sign in zip(self.params, signs):
            if self.weight_decay != 0.0:
                p.mul_(1.0 - lr * self.weight_decay)
            p.add_(sign.to(device=p.device, dtype=p.dtype), alpha=-lr)
        return left_out

    def _consensus_mean(self, ordered: Sequence[PeerResult], i: int,
                        t: ChunkedDCT) -> torch.Tensor:
        """Parameter ``i``'s mean over the pickers, on the CPU whatever the parameter's device:
        one addition per picked coefficient and result, in key order (indices are unique per
        chunk, so a scatter never adds twice into one place), then one division. With ``clip``,
        each result's values are first scaled as ``clip_scales`` says."""
        s = torch.zeros(t.nchunks, t.totalk, dtype=self.agg_dtype)
        n = torch.zeros(t.nchunks, t.totalk, dtype=torch.int32)
        scales = self.clip_scales(ordered, i)
        ones = None
        for r, scale in zip(ordered, scales):
            sp = r.params[i]
            idx = sp.indices.to("cpu")
            if scale == 1.0:
                vals = sp.dense_values(self.agg_dtype).to("cpu")
            else:  # one float64 multiplication per value, then the cast: elementwise, exact rules
                vals = (sp.dense_values(torch.float64).to("cpu") * scale).to(self.agg_dtype)
            s.scatter_add_(1, idx, vals)
            if ones is None:
                ones = torch.ones(idx.shape, dtype=torch.int32)
            n.scatter_add_(1, idx, ones)
        return s / n.clamp_min(1).to(self.agg_dtype)

    def clip_scales(self, ordered: Sequence[PeerResult], i: int) -> list[float]:
        """Per result (in the given order), the factor its values of parameter ``i`` are
        multiplied by: ``min(1, clip * median / norm)`` with ``norm`` the L2 norm of its values
        and ``median`` that of the results' norms (the mean of the middle two for an even
        count). All 1.0 when clip is off, for 1-bit results (every one has norm sqrt(n)), and
        for a result of norm 0. Bit-identical everywhere: see the module docstring."""
        if self.clip == 0 or not ordered or ordered[0].params[i].one_bit:
            return [1.0] * len(ordered)
        norms = [value_norm(r.params[i]) for r in ordered]
        srt = sorted(norms)
        m = len(srt) // 2
        median = srt[m] if len(srt) % 2 else (srt[m - 1] + srt[m]) / 2
        bound = self.clip * median
        return [bound / x if x > bound else 1.0 for x in norms]

    # ----- optional lookahead (Psyche's error_correction) -----

    @torch.no_grad()
    def apply_lookahead(self, prev_lr: float, signs: list[torch.Tensor] | None = None) -> None:
        """``p -= prev_lr * sign(IDCT(sent))``, the step of this client's last transmitted
        update, so the next gradients see roughly the update still in flight; `signs`: another
        result's (``update_signs``), to stand where its trainer trained. The parameters are saved
        first; ``remove_lookahead`` (or ``compress_step``) restores them bit-exactly."""
        if not self.lookahead or (signs is None and self._sent is None):
            raise RuntimeError("no lookahead state (needs lookahead=True and a compress_step)")
        if self._backup is not None:
            raise RuntimeError("lookahead already active")
        if signs is None:
            signs = update_signs(self.transforms, self._sent)
        self._backup = [p.detach().clone() for p in self.params]
        for p, sgn in zip(self.params, signs):
            p.sub_(sgn.to(p.device, p.dtype), alpha=prev_lr)

    @torch.no_grad()
    def remove_lookahead(self) -> None:
        if self._backup is None:
            return
        for p, b in zip(self.params, self._backup):
            p.copy_(b)
        self._backup = None

    # ----- state -----

    def zero_momentum(self) -> None:
        for d in self.delta:
            d.zero_()

    def state_dict(self) -> dict:
        return {"delta": [d.detach().clone() for d in self.delta]}

    def load_state_dict(self, state: dict) -> None:
        deltas = state["delta"]
        if len(deltas) != len(self.delta):
            raise ValueError("state has a different number of parameters")
        for d, s in zip(self.delta, deltas):
            if tuple(s.shape) != tuple(d.shape):
                raise ValueError("state shape mismatch")
            d.copy_(s)
