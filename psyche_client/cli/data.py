"""psyche-data: make training data (a text corpus, a tokenizer, token files) and serve it."""

import time
from pathlib import Path

import click
import numpy as np
import tomli_w

from ..data.corpus import stdlib_docstrings
from ..data.http_server import serve_directory
from ..data.manifest import DEFAULT_CHUNK_BYTES, MANIFEST_NAME, build_manifest
from ..data.provider import DataError
from ..data.token_files import EXTENSIONS, write_tokens
from ..data.tokenizer import BpeTokenizer, ByteTokenizer
from .common import fail


@click.group(help="Build and serve training data.")
def main():
    pass


@main.command("build-corpus", help="Write a text corpus of the Python standard library's "
              "docstrings (English prose already on this machine; PSF license).")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Text file to write.")
@click.option("--max-mb", type=click.FloatRange(0.01, 512), default=8, show_default=True,
              help="Stop after this many megabytes of text.")
def build_corpus(out, max_mb):
    text = stdlib_docstrings(int(max_mb * (1 << 20)))
    if not text:
        fail("found no standard library docstrings on this machine")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text, encoding="utf-8")
    click.echo(f"wrote {len(text.encode()):,} bytes of docstrings to {out}")


@main.command(help="Tokenize a text file into token files: OUT/train and OUT/heldout, the "
              "tokenizer as OUT/tokenizer.json, and OUT/data.toml for the TCP data server.")
@click.option("--input", "input_path", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--out", required=True, type=click.Path(file_okay=False))
@click.option("--tokenizer", type=click.Choice(["bpe", "bytes"]), default="bpe", show_default=True,
              help="bpe: train a byte-level BPE on the input; bytes: one token per byte.")
@click.option("--vocab-size", type=click.IntRange(257, 65535), default=2048, show_default=True)
@click.option("--held-out", type=click.FloatRange(0.001, 0.5), default=0.05, show_default=True,
              help="Share of tokens (the end of the text) kept for held-out loss.")
@click.option("--seq-len", type=click.IntRange(1), default=128, show_default=True,
              help="Sequence length written into data.toml.")
def tokenize(input_path, out, tokenizer, vocab_size, held_out, seq_len):
    text = Path(input_path).read_text(encoding="utf-8")
    if not text.strip():
        fail(f"{input_path} is empty")
    t0 = time.time()
    tok = BpeTokenizer.train(text, vocab_size) if tokenizer == "bpe" else ByteTokenizer()
    ids = np.asarray(tok.encode(text), dtype=np.int64)
    token_size = 2 if tok.vocab_size <= 1 << 16 else 4
    cut = int(len(ids) * (1 - held_out))
    out = Path(out)
    for name, part in (("train", ids[:cut]), ("heldout", ids[cut:])):
        (out / name).mkdir(parents=True, exist_ok=True)
        write_tokens(out / name / "tokens-000.bin", part, token_size)
    tok.save(out / "tokenizer.json")
    (out / "data.toml").write_text(tomli_w.dumps(
        {"dir": "train", "token_size": token_size, "seq_len": seq_len}))
    click.echo(f"{len(ids):,} tokens ({tok.vocab_size} ids, {len(text.encode()) / len(ids):.2f} "
               f"bytes/token) in {time.time() - t0:.1f} s: {cut:,} train, {len(ids) - cut:,} "
               f"held out, in {out}")
    digest = write_manifest(out, sorted((out / "train").glob("*.bin"))
                            + sorted((out / "heldout").glob("*.bin")), DEFAULT_CHUNK_BYTES)
    click.echo(f"data manifest {out / MANIFEST_NAME}: sha256 {digest}")


@main.command("manifest", help="Hash token files in chunks into DIR/manifest.json, the data "
              "manifest a run spec pins ([data] manifest and manifest_sha256): clients check "
              "every chunk they read against it. Files are named relative to DIR; give the "
              "token files (or directories of them) under DIR, default every .bin, .ds and "
              ".npy file below it. Prints the manifest's sha256.")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.argument("files", nargs=-1, type=click.Path(exists=True))
@click.option("--chunk-kib", type=click.IntRange(1, 1 << 20), default=DEFAULT_CHUNK_BYTES >> 10,
              show_default=True, help="Chunk size: a client reads (and over HTTP fetches) whole "
              "chunks; more chunks make a larger manifest.")
def manifest(directory, files, chunk_kib):
    root = Path(directory)
    picked = [Path(f) for f in files] or [root]
    paths = sorted({p for f in picked for p in ([f] if f.is_file() else f.rglob("*"))
                    if p.is_file() and p.suffix in EXTENSIONS})
    if not paths:
        fail(f"no token files ({', '.join(EXTENSIONS)}) under {', '.join(map(str, picked))}")
    digest = write_manifest(root, paths, chunk_kib << 10)
    click.echo(f"data manifest {root / MANIFEST_NAME}: sha256 {digest}")


def write_manifest(root: Path, paths, chunk_bytes) -> str:
    def progress(name, size):
        click.echo(f"hashed {name} ({size:,} bytes)", err=True)
    try:
        m = build_manifest(root, paths, chunk_bytes, progress)
    except DataError as e:
        fail(str(e))
    (root / MANIFEST_NAME).write_bytes(m.to_bytes())
    return m.sha256()


@main.command("serve-http", help="Serve a directory of token files over HTTP with byte ranges.")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8000, show_default=True)
def serve_http(directory, host, port):
    server = serve_directory(directory, host, port)
    click.echo(f"serving {directory} at http://{host}:{server.server_address[1]}/")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
