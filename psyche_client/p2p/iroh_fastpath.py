"""A fast path for sending bytes through the `iroh` 1.2.0 Python binding.

Why: the binding is UniFFI-generated. Every `bytes` argument (SendStream.write_all, write,
send_datagram, ...) is lowered into a Rust-owned buffer by `_UniffiRustBufferBuilder.write`,
which copies it one byte at a time from Python:

    for i, byte in enumerate(value):
        self.rbuf.data[self.rbuf.len + i] = byte     # a ctypes item store per byte

That is ~0.2-0.3 us per byte, i.e. 3-5 MB/s, and it holds the GIL (and so the event loop) for
the whole copy: a 100 MB write blocks the process for 20-30 s before a single byte is sent.
Reading is not affected: lifting a returned buffer slices a ctypes `c_char` pointer, which
CPython turns into one `bytes` copy in C.

The fix: replace that one method with a version that reserves the same space the same way and
fills it with a single memcpy (a memoryview slice assignment into a ctypes array laid over the
Rust buffer). The buffer's layout, the length prefix and the reserve/len bookkeeping are the
generated code's own, so the Rust side sees exactly the bytes it saw before.

The patch depends on the exact generated code of iroh 1.2.0, so `install()` refuses (raises
IrohFastPathError) unless the installed distribution is 1.2.0 and the patched classes' source
matches the fingerprints taken from it. Upgrading iroh means re-reading the generated
`iroh_ffi.py`, checking the fix still applies, and updating the pins below.
"""

import contextlib
import ctypes
import hashlib
import importlib.metadata
import inspect

IROH_VERSION = "1.2.0"
# sha256 of inspect.getsource() of the generated classes the fast path relies on (iroh 1.2.0)
_FINGERPRINTS = {
    "_UniffiRustBuffer": "0201c3d05c06413deb2949f72a4c2ea99891733ec82ed753e545155a9a37651c",
    "_UniffiRustBufferBuilder": "a64e20b65ffa65e45d63c3633f2faa7c439a323efba5b36f01f77aaeba95a8a0",
    "_UniffiFfiConverterBytes": "ddfd96bc6823bd214b71ffb02726bc1568803aad733eda4d13d94dcfe01fb866",
}


class IrohFastPathError(RuntimeError):
    pass


_original_write = None


def _fast_write(self, value):
    """Drop-in for _UniffiRustBufferBuilder.write: one memcpy instead of a per-byte loop."""
    mv = memoryview(value)
    if mv.ndim != 1 or mv.itemsize != 1 or not mv.c_contiguous:
        # not a flat byte buffer: keep the generated behaviour (it writes len(value) items)
        return _original_write(self, value)
    n = mv.nbytes
    with self._reserve(n):  # may move the buffer: take its address inside
        if n:
            base = ctypes.cast(self.rbuf.data, ctypes.c_void_p).value + self.rbuf.len
            memoryview((ctypes.c_char * n).from_address(base)).cast("B")[:] = mv.cast("B")


def _ffi():
    try:
        version = importlib.metadata.version("iroh")
    except importlib.metadata.PackageNotFoundError:
        raise IrohFastPathError("the iroh package is not installed (pip install iroh==1.2.0)")
    if version != IROH_VERSION:
        raise IrohFastPathError(
            f"iroh {version} is installed; psyche's send fast path is pinned to "
            f"iroh=={IROH_VERSION} (it patches that version's generated FFI code): "
            "install iroh==1.2.0")
    from iroh import iroh_ffi
    for name, want in _FINGERPRINTS.items():
        obj = getattr(iroh_ffi, name, None)
        got = hashlib.sha256(inspect.getsource(obj).encode()).hexdigest() if obj else None
        if got != want:
            raise IrohFastPathError(
                f"iroh {version}: generated FFI class {name} is not the one the fast path was "
                "written for (modified or rebuilt binding); refusing to patch it")
    return iroh_ffi


def install() -> None:
    """Patch the byte lowering of the installed iroh binding; idempotent."""
    global _original_write
    builder = _ffi()._UniffiRustBufferBuilder
    if builder.write is _fast_write:
        return
    _original_write = builder.write
    builder.write = _fast_write


def is_active() -> bool:
    from iroh import iroh_ffi
    return iroh_ffi._UniffiRustBufferBuilder.write is _fast_write


@contextlib.contextmanager
def disabled():
    """Temporarily restore the generated per-byte copy (for benchmarks and tests only)."""
    from iroh import iroh_ffi
    builder = iroh_ffi._UniffiRustBufferBuilder
    was = builder.write
    builder.write = _original_write or was
    try:
        yield
    finally:
        builder.write = was
