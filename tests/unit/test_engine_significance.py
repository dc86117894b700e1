"""The paired comparison of replay runs (benchmarks/engine_significance.py) on made-up runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from tests.scripts import load_benchmark

sig = load_benchmark("engine_significance")
SCRIPT = Path(sig.__file__)


def run(scores: dict[str, list[float]], *, small: tuple[str, ...] = ()) -> dict[str, Any]:
    """A replay run whose profiles score ``scores`` (one value per seed) on both measures."""
    return {"per_profile": {
        name: {"t11su": s[0], "t11f": s[0], "t11su_seeds": s, "t11f_seeds": s,
               "initial_positives": 1 if name in small else 3, "relevant_in_test": 10}
        for name, s in scores.items()}}


def test_a_clear_gain_is_found_and_counted() -> None:
    rng = np.random.default_rng(1)
    base = {f"p{i}": list(rng.uniform(0.2, 0.6, 3)) for i in range(30)}
    better = {k: [x + 0.1 + 0.01 * (i % 3) for i, x in enumerate(v)] for k, v in base.items()}
    res = sig.pair("x", run(better, small=("p0",)), run(base), seed=0)
    r = res["t11su"]["all"]
    assert r["profiles"] == 30 and r["seeds"] == 3
    assert r["difference"] == pytest.approx(0.11)
    assert r["per_seed_differences"] == [0.1, 0.11, 0.12]
    assert r["seeds_ahead"] == 3
    assert (r["profiles_ahead"], r["profiles_behind"], r["profiles_tied"]) == (30, 0, 0)
    assert r["wilcoxon_p"] < 1e-5
    lo, hi = r["bootstrap_95"]
    assert lo == pytest.approx(0.11) and hi == pytest.approx(0.11)  # every profile gains 0.11
    # the large group leaves out the profile with fewer than 3 initial positives
    assert res["t11su"]["large"]["profiles"] == 29


def test_equal_runs_show_no_difference() -> None:
    scores = {f"p{i}": [0.3, 0.5] for i in range(10)}
    r = sig.pair("x", run(scores), run(scores), seed=0)["t11f"]["all"]
    assert r["difference"] == 0.0 and r["seeds_ahead"] == 0
    assert r["profiles_tied"] == 10 and r["wilcoxon_p"] is None  # nothing left to rank
    assert r["bootstrap_95"] == [0.0, 0.0]


def test_noise_is_not_called_a_difference() -> None:
    rng = np.random.default_rng(7)
    a = {f"p{i}": list(rng.uniform(0, 1, 5)) for i in range(90)}
    b = {f"p{i}": list(rng.uniform(0, 1, 5)) for i in range(90)}
    r = sig.pair("x", run(a), run(b), seed=0)["t11su"]["all"]
    assert r["wilcoxon_p"] > 0.05
    lo, hi = r["bootstrap_95"]
    assert lo < 0 < hi


def test_runs_without_common_profiles_or_with_other_seed_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="no profile in common"):
        sig.pair("x", run({"a": [0.1]}), run({"b": [0.1]}), seed=0)
    with pytest.raises(ValueError, match="seed counts"):
        sig.pair("x", run({"a": [0.1, 0.2]}), run({"a": [0.1]}), seed=0)


def test_auto_pairs_match_adaptive_with_batch_and_the_peer() -> None:
    runs = {"knn/update=every,truncate=6": {}, "knn/update=never,truncate=6": {},
            "rocchio/update=every": {}, "peer:online-logreg": {}}
    labels = [label for label, _, _ in sig.auto_pairs("r.json", runs)]
    assert labels == ["r.json: knn/update=every,truncate=6 vs knn/update=never,truncate=6",
                      "r.json: knn/update=every,truncate=6 vs peer:online-logreg",
                      "r.json: rocchio/update=every vs peer:online-logreg"]


def test_command_line_writes_json_and_rejects_bad_input(tmp_path: Path) -> None:
    scores = {f"p{i}": [0.2 + 0.01 * i, 0.3] for i in range(12)}
    good = tmp_path / "runs.json"
    good.write_bytes(orjson.dumps({"runs": {"rocchio/update=every": run({k: [x + 0.05 for x in v]
                                                                          for k, v in scores.items()}),
                                            "rocchio/update=never": run(scores)}}))
    out = tmp_path / "sig.json"
    done = subprocess.run([sys.executable, str(SCRIPT), str(good), "--out", str(out)],
                          capture_output=True, text=True, check=True)
    assert "rocchio/update=every vs rocchio/update=never" in done.stdout
    res = orjson.loads(out.read_bytes())["pairs"]
    assert res["runs.json: rocchio/update=every vs rocchio/update=never"]["t11f"]["all"]["seeds_ahead"] == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    failed = subprocess.run([sys.executable, str(SCRIPT), str(bad)], capture_output=True, text=True)
    assert failed.returncode == 1 and "not the output of engine_replay.py" in failed.stderr
    failed = subprocess.run([sys.executable, str(SCRIPT), "--pair", f"{good}:nope", f"{good}:rocchio/update=never"],
                            capture_output=True, text=True)
    assert failed.returncode == 2 and "expected FILE:RUN" in failed.stderr
