"""psyche-snapshot list and download against a local store (check, which loads the model with
transformers, runs end to end in tests/integration/test_snapshot_resume.py)."""

from click.testing import CliRunner

from psyche_client.cli.snapshot import main
from psyche_client.snapshots import LocalStore, write_snapshot_dir


def test_list_and_download(tmp_path):
    store = LocalStore(tmp_path / "store", progress=False)
    locations = []
    for step in (3, 6):
        d = write_snapshot_dir(tmp_path / "out", run_id="r", epoch=0, step=step,
                               param_hash=f"{step:064x}",
                               files={"config.json": b"{}", "model.safetensors": bytes([step])})
        locations.append(store.put(d))
    runner = CliRunner()
    out = runner.invoke(main, ["list", "--store", str(tmp_path / "store")])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert [ln.split()[0] for ln in lines] == locations  # oldest step first
    assert "step 6" in lines[1] and f"params {6:064x}" in lines[1]
    out = runner.invoke(main, ["download", "--store", str(tmp_path / "store"), locations[1],
                               str(tmp_path / "got")])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "got" / "model.safetensors").read_bytes() == bytes([6])
    out = runner.invoke(main, ["download", "--store", str(tmp_path / "store"), "ab" * 32,
                               str(tmp_path / "none")])
    assert out.exit_code == 1 and "SnapshotNotFound" in out.output
    out = runner.invoke(main, ["list"])
    assert out.exit_code == 2 and "no store" in out.output
