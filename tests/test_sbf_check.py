"""scripts/build-sbf --check: the SBF ELF kept in the repository against the inputs it was
built from (sbf/psyche_coordinator.inputs). Runs on a copy of those files, no toolchain."""
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COPIED = [
    "programs/psyche-coordinator/src",
    "programs/psyche-coordinator/core/src",
    "programs/psyche-coordinator/Cargo.toml",
    "programs/psyche-coordinator/core/Cargo.toml",
    "programs/sbf-int128",
    "programs/sbf-probe",
    "patches",
    "sbf",
    "Cargo.toml",
    "Cargo.lock",
    "scripts/build-sbf",
]


def copy_tree(tmp_path: Path) -> Path:
    for rel in COPIED:
        src, dst = ROOT / rel, tmp_path / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, dst)
    return tmp_path


def check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(root / "scripts" / "build-sbf"), "--check"],
        capture_output=True, text=True, timeout=60,
    )


def test_the_kept_elf_matches_its_inputs_until_one_changes(tmp_path):
    root = copy_tree(tmp_path)
    ok = check(root)
    assert ok.returncode == 0, ok.stderr
    assert "match their inputs" in ok.stdout

    core_lib = root / "programs/psyche-coordinator/core/src/lib.rs"
    core_lib.write_text(core_lib.read_text() + "\n// an edit after the build\n")
    (root / "sbf" / "new-input.patch").write_text("")
    stale = check(root)
    assert stale.returncode == 1
    assert "programs/psyche-coordinator/core/src/lib.rs" in stale.stderr
    assert "sbf/new-input.patch" in stale.stderr
    assert "rebuild it with scripts/build-sbf" in stale.stderr


@pytest.mark.parametrize("name", ["psyche_coordinator.so", "psyche_sbf_probe.so"])
def test_an_elf_other_than_the_recorded_one_is_refused(tmp_path, name):
    root = copy_tree(tmp_path)
    elf = root / "sbf" / name
    elf.write_bytes(elf.read_bytes() + b"\0")
    refused = check(root)
    assert refused.returncode == 1
    assert f"sbf/{name} is not the ELF that sbf/psyche_coordinator.inputs records" in refused.stderr
