"""`sift demo`, the main job, against the test broker: with feedback one document late
at most (`--chunk 1`) the stream through Kafka must give exactly what `sift replay`
gives in process on the same data."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest

from sift.cli import main
from sift.topics.codecs import read_jsonl
from sift.topics.records import Document

REUTERS = Path(__file__).resolve().parents[2] / "data" / "reuters21578"


def small_corpus(tmp_path: Path, n_train: int, n_test: int) -> tuple[Path, Path]:
    """The first ``n_train`` Reuters training and ``n_test`` test documents, written to
    ``tmp_path`` (training gzipped, as the bundled file)."""
    train = list(read_jsonl(REUTERS / "train.jsonl.gz", Document.from_obj))[:n_train]
    test = list(read_jsonl(REUTERS / "test.jsonl.gz", Document.from_obj))[:n_test]
    train_path, test_path = tmp_path / "train.jsonl.gz", tmp_path / "test.jsonl"
    with gzip.open(train_path, "wb") as fh:
        fh.writelines(orjson.dumps(d.to_obj()) + b"\n" for d in train)
    test_path.write_bytes(b"".join(orjson.dumps(d.to_obj()) + b"\n" for d in test))
    return train_path, test_path


@pytest.mark.parametrize("bags", [1, 3])
def test_demo_stream_equals_replay_with_feedback_after_every_document(
    broker_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], bags: int,
) -> None:
    """Also with bagged profiles (``--bags 3``: three members a profile in the worker's
    table, deciding on their mean margin as the replay's)."""
    train_path, test_path = small_corpus(tmp_path, 800, 40)
    monkeypatch.setenv("SIFT_BROKER", broker_url)
    out = tmp_path / "result.json"
    assert main(["demo", "--train", str(train_path), "--test", str(test_path), "--chunk", "1",
                 "--bags", str(bags), "--out", str(out)]) == 0
    result = orjson.loads(out.read_bytes())
    assert result["documents"] == 40 and result["dead_letters"] == 0 and result["bags"] == bags
    assert result["decisions"] > 0 and result["judgments"] == result["decisions"]
    assert result["stream"] == result["replay"]
    assert "macro_t11su" in capsys.readouterr().out


def test_demo_review_reaches_its_target_on_a_bundled_screening_set(
        broker_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``sift demo --review``: review mode through Kafka, a simulated reviewer, to the stop
    signal; the recall at the stop is measured against the labels."""
    monkeypatch.setenv("SIFT_BROKER", broker_url)
    out = tmp_path / "review.json"
    assert main(["demo", "--review", "Donners_2021", "--target-recall", "0.9",
                 "--out", str(out)]) == 0
    result = orjson.loads(out.read_bytes())
    assert result["documents"] == 258 and result["relevant"] == 15 and result["stop"]
    assert result["recall_at_stop"] >= 0.8 and result["cost_at_stop"] < 1.0
    assert result["answered"] == result["screened"] <= 258


def test_demo_review_names_the_datasets_it_knows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--review", "nope"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Donners_2021" in err


def _free_pair() -> int:
    """A port whose next port is free too (the demo's broker and its controller)."""
    import socket

    from sift.devbroker import free_port

    for _ in range(50):
        port = free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise AssertionError("no two free ports in a row")


def test_a_terminated_demo_takes_its_broker_with_it(tmp_path: Path) -> None:
    """``kill`` (SIGTERM) of a running demo left the local broker it had started running
    (a 512 MB JVM on the port), since only its own clean end stopped it."""
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import time

    from sift.devbroker import DevBroker, port_open

    port = _free_pair()
    data = DevBroker(port=port, controller_port=port + 1).data  # .cache/kafka/data-<port>
    existed = data.exists()
    env = {k: v for k, v in os.environ.items() if k != "SIFT_BROKER"}
    env["PYTHONFAULTHANDLER"] = "1"
    proc = subprocess.Popen([sys.executable, "-m", "sift.cli", "demo", "--port", str(port),
                             "--no-compare", "--chunk", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    try:
        assert proc.stdout is not None
        lines = []
        for raw in proc.stdout:  # until the stream has begun: broker and worker up
            lines.append(raw.decode(errors="replace"))
            if "profiles trained" in lines[-1]:
                break
        assert port_open(port), lines
        # since the forty-fifth session SIGTERM ends a demo as Ctrl-C does: it stops its
        # worker, deletes its run's topics and stops its broker before it exits
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:  # where it hangs: faulthandler's stacks on SIGABRT
            proc.send_signal(signal.SIGABRT)
            out, _ = proc.communicate(timeout=30)
            raise AssertionError("the demo did not end after SIGTERM:\n"
                                 + out.decode(errors="replace")[-8000:]) from None
        ended = out.decode(errors="replace")
        # 130: interrupted and cleaned up; 143: the interrupt was lost in the Kafka
        # client's network loop and the watchdog deleted the topics and ended it
        assert proc.returncode in (130, 143), (proc.returncode, ended[-2000:])
        assert "removed this run's" in ended, ended[-2000:]
        print(f"demo ended {time.monotonic() - t0:.1f} s after SIGTERM ({proc.returncode})")
        deadline = time.monotonic() + 60
        while port_open(port) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not port_open(port), "the demo's broker outlived it"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if not existed:  # the broker's folder for a random port (about 200 MB) is not kept
            shutil.rmtree(data, ignore_errors=True)
