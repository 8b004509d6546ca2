import subprocess
import sys

import pytest


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    """Token files of real text (the standard library's docstrings, one token per byte):
    data_dir/train and data_dir/heldout, sequences of 128 tokens. Built once per session."""
    d = tmp_path_factory.mktemp("data")
    def run(*a):
        subprocess.run([sys.executable, "-m", "psyche_client.cli.data", *a],
                       check=True, capture_output=True, text=True)
    run("build-corpus", "--out", str(d / "corpus.txt"), "--max-mb", "2")
    run("tokenize", "--input", str(d / "corpus.txt"), "--out", str(d), "--tokenizer", "bytes",
        "--seq-len", "128")
    return d
