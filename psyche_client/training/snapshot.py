"""A model's parameters as one safetensors blob, for P2P model sharing (p2p/model_sharing.py).

The blob holds every parameter (shared ones once, as named_parameters lists them), in the
model's dtype, and no metadata: safetensors orders tensors itself, so clients with identical
parameters produce identical bytes, hence the same blob hash, which lets a joiner count how
many peers offer the same snapshot. Loading is pickle-free (safetensors) and checks names,
shapes and dtypes against the model built from the run's spec before copying anything."""

import hashlib

import torch

HEADER_ALLOWANCE = 256  # safetensors header bytes per tensor (JSON), generous


class SnapshotError(ValueError):
    """The bytes are not a snapshot of this model."""


def layout_of(model) -> tuple:
    """(digest, parameter count): the digest is SHA-256 over each parameter's name, dtype and
    shape in name order, so equal digests mean the same model shape."""
    h, count = hashlib.sha256(), 0
    for name, p in sorted(model.named_parameters()):
        h.update(f"{name}\0{str(p.dtype)}\0{tuple(p.shape)}\n".encode())
        count += p.numel()
    return h.hexdigest(), count


def size_limit(model) -> int:
    """The most bytes a snapshot of this model can take (tensor bytes plus header room)."""
    params = list(model.parameters())
    return (8 + 4096 + HEADER_ALLOWANCE * len(params)
            + sum(p.numel() * p.element_size() for p in params))


def encode_snapshot(model) -> bytes:
    from safetensors.torch import save
    return save({name: p.detach().to("cpu").contiguous()
                 for name, p in model.named_parameters()})


@torch.no_grad()
def load_snapshot(model, data: bytes) -> None:
    """Copy the snapshot's tensors into `model`; raises SnapshotError, leaving the model
    untouched, when they are not exactly its parameters."""
    from safetensors.torch import load
    try:
        tensors = load(bytes(data))
    except Exception as e:  # safetensors raises its own error types for malformed bytes
        raise SnapshotError(f"not a safetensors snapshot: {e}") from None
    params = dict(model.named_parameters())
    missing, extra = sorted(set(params) - set(tensors)), sorted(set(tensors) - set(params))
    if missing or extra:
        raise SnapshotError(f"snapshot does not fit the model: missing {missing[:3]}, "
                            f"unexpected {extra[:3]}")
    for name, p in params.items():
        t = tensors[name]
        if t.dtype != p.dtype or t.shape != p.shape:
            raise SnapshotError(f"{name}: snapshot has {t.dtype} {tuple(t.shape)}, the model "
                                f"{p.dtype} {tuple(p.shape)}")
    for name, p in params.items():
        p.copy_(tensors[name])
