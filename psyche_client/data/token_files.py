"""Token files: raw little-endian u16/u32 streams (`.bin`, `.ds`) or NumPy `.npy` arrays of
uint16/uint32."""

from pathlib import Path

import numpy as np

from .provider import DataError

EXTENSIONS = (".bin", ".ds", ".npy")
DTYPES = {2: np.dtype("<u2"), 4: np.dtype("<u4")}


def list_token_files(directory) -> list:
    d = Path(directory)
    if not d.is_dir():
        raise DataError(f"{d} is not a directory")
    files = sorted(p for p in d.iterdir() if p.suffix in EXTENSIONS and p.is_file())
    if not files:
        raise DataError(f"{d} holds no token files ({', '.join(EXTENSIONS)})")
    return files


def open_tokens(path: Path, token_size: int) -> np.ndarray:
    """A read-only memory map of a file's tokens."""
    if token_size not in DTYPES:
        raise DataError("token_size must be 2 (u16) or 4 (u32)")
    if path.suffix == ".npy":
        arr = np.load(path, mmap_mode="r")
        if arr.ndim != 1 or arr.dtype.kind != "u" or arr.dtype.itemsize != token_size:
            raise DataError(f"{path}: expected a 1-D array of {DTYPES[token_size].name}, "
                            f"got {arr.ndim}-D {arr.dtype}")
        return arr
    size = path.stat().st_size
    if size % token_size:
        raise DataError(f"{path}: {size} bytes is not a whole number of {token_size}-byte tokens")
    if size == 0:
        return np.zeros(0, DTYPES[token_size])
    return np.memmap(path, dtype=DTYPES[token_size], mode="r")


def write_tokens(path, tokens, token_size: int) -> None:
    arr = np.asarray(tokens)
    if arr.size and (arr.min() < 0 or arr.max() >= 1 << (8 * token_size)):
        raise DataError(f"token ids do not fit in {token_size} bytes")
    arr = arr.astype(DTYPES[token_size])
    p = Path(path)
    if p.suffix == ".npy":
        np.save(p, arr)
    else:
        p.write_bytes(arr.tobytes())
