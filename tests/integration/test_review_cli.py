"""``sift review`` against a real broker and worker: start, load, answer, status, rm.

The command line plays the whole client side of review mode: the review is created
(waiting for its first status), a screening file is loaded as documents naming it, a
simulated reviewer answers its requests from the file's labels until the stop signal,
and the status is read back; then the review is deleted.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from sift.agents.harness import WorkerProcess, read_all, settings_env, wait_for
from sift.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "screening" / "Donners_2021.jsonl.gz"
pytestmark = pytest.mark.integration


@pytest.fixture
def settings(review_settings: Settings) -> Settings:
    return review_settings


def sift(settings: Settings, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **settings_env(settings)}
    return subprocess.run([sys.executable, "-m", "sift.cli", "review", *args], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_a_review_run_from_the_command_line_reaches_its_stop_signal(
        settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    name = "donners cli"
    title = orjson.loads((DATA.parent / "reviews.json").read_bytes())["Donners_2021"]
    w = WorkerProcess(settings, "w1").start()
    try:
        w.wait_ready()
        # refused before anything is sent (since the forty-eighth session) ...
        bad = sift(settings, "start", "x", "--query", "q", "--param", "draws=-1", "--wait", "30")
        assert bad.returncode == 1 and "review 'x': draws must be" in bad.stderr, bad
        assert len(bad.stderr.strip().splitlines()) == 1
        # ... and sent anyway (another client), dead-lettered by the worker
        from sift.commands.review import start

        spec = {"profile": "x", "mode": "review", "query": "q", "params": {"draws": -1}}
        assert start(settings, spec, 30) == 1
        assert "bad_params" in capsys.readouterr().err
        started = sift(settings, "start", name, "--query", title, "--param", "n_top=10",
                       "--param", "draws=20", "--param", "min_batches=5",
                       "--param", "target_recall=0.9", "--param", "random_state=0",
                       "--wait", "60")
        assert started.returncode == 0, started.stderr
        assert f"{name}: 0 documents" in started.stdout
        loaded = sift(settings, "load", name, str(DATA))
        assert loaded.returncode == 0, loaded.stderr
        assert "sent 258 documents" in loaded.stdout
        answered = sift(settings, "answer", name, "--gold", str(DATA), "--until-stop", "240")
        assert answered.returncode == 0, answered.stderr
        assert ": STOP" in answered.stdout or ": complete" in answered.stdout
        status = sift(settings, "status", name, "--json")
        assert status.returncode == 0, status.stderr
        st = orjson.loads(status.stdout)
        assert st["review"] == name and st["documents"] == 258
        assert st["stop"] or st["complete"]
        assert st["found"] >= 0.9 * 15 * 0.8 and st["screened"] < 258  # found most, not all read
        # every judgment was sent keyed by the review, with the gold label
        with gzip.open(DATA) as fh:
            gold = {str(r["id"]): bool(r["label"]) for r in map(orjson.loads, fh)}
        sent = [orjson.loads(v) for k, v, _, _ in read_all(settings, settings.topic("judgments"))
                if k == name.encode()]
        assert sent and all(j["relevant"] == gold[j["doc_id"]] for j in sent)
        gone = sift(settings, "rm", name)
        assert gone.returncode == 0 and "sent deletion" in gone.stdout
        after = sift(settings, "status", name)
        assert after.returncode == 1 and f"review {name!r} was deleted" in after.stderr, after
    finally:
        w.stop()


def test_a_killed_workers_review_goes_on_in_its_replacement(settings: Settings,
                                                             tmp_path: Path) -> None:
    """The review's record and its chunks (texts, each batch's ranks) come back from the
    table's changelog: a worker killed (SIGKILL) mid-review is replaced by a fresh one
    (another data directory: nothing local survives) that takes the review on to its stop
    signal, counting the judgments made before."""
    from dataclasses import replace

    name = "donners restart"
    title = orjson.loads((DATA.parent / "reviews.json").read_bytes())["Donners_2021"]
    # the killed worker's partitions move once the group gives it up: after the session
    # timeout (the broker's least is 6 s)
    settings = replace(settings, session_timeout=8.0, heartbeat_interval=2.0)
    w1 = WorkerProcess(settings, "w1").start()
    w2 = None
    try:
        w1.wait_ready()
        assert sift(settings, "start", name, "--query", title, "--param", "n_top=10",
                    "--param", "random_state=0", "--wait", "60").returncode == 0
        assert sift(settings, "load", name, str(DATA)).returncode == 0
        partial = sift(settings, "answer", name, "--gold", str(DATA), "--limit", "25")
        assert partial.returncode == 0 and "answered 25 requests" in partial.stdout
        def applied() -> dict[str, object] | None:
            # one status a poll; a failed one (no status read yet) is "not yet", not an error
            res = sift(settings, "status", name, "--json")
            st = orjson.loads(res.stdout) if res.returncode == 0 else None
            return st if st is not None and st["screened"] == 25 else None

        before = wait_for(applied, 60, "the 25 judgments applied")
        assert before["batches"] >= 2 and not before["stop"]
        w1.kill()
        fresh = replace(settings, data_dir=str(tmp_path / "w2"))
        w2 = WorkerProcess(fresh, "w2").start()
        w2.wait_ready()
        done = sift(fresh, "answer", name, "--gold", str(DATA), "--until-stop", "240")
        assert done.returncode == 0, done.stderr
        after = orjson.loads(sift(fresh, "status", name, "--json").stdout)
        assert after["documents"] == 258 and (after["stop"] or after["complete"])
        assert after["screened"] > before["screened"] and after["batches"] > before["batches"]
    finally:
        w1.kill()
        if w2 is not None:
            w2.stop()
