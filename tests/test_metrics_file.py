"""The metrics file a client appends while tests read it: a record is one line written at once,
and a reader leaves a line still being written for its next read (a join test on chain once read
half of a long `apply` record and failed with a JSONDecodeError)."""

import threading

import pytest

pytest.importorskip("torch")

from psyche_client.training.trainer import Metrics  # noqa: E402
from tests.integration.test_training import read_metrics  # noqa: E402


def test_a_line_still_being_written_is_left_for_the_next_read(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"event": "heldout", "step": 1}\n{"event": "apply", "trainers": ["ab')
    assert read_metrics(path) == [{"event": "heldout", "step": 1}]
    with path.open("a") as f:
        f.write('cd"]}\n')
    assert [r["event"] for r in read_metrics(path)] == ["heldout", "apply"]


def test_records_longer_than_a_buffer_read_while_they_are_written(tmp_path):
    path = tmp_path / "metrics.jsonl"
    metrics = Metrics(path)
    done = threading.Event()

    def write():
        for step in range(300):
            metrics.write(event="apply", step=step, trainers=["ab" * 32] * 400)  # ~27 KB
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    while not done.is_set():
        records = read_metrics(path)  # never a cut line
        assert all(len(r["trainers"]) == 400 for r in records)
    writer.join()
    assert [r["step"] for r in read_metrics(path)] == list(range(300))
