"""benchmarks/judgments_ab.py end to end on a small service: both versions (here the same
checkout twice) build it in processes of their own, apply the same batches by turns and
end with the same profiles."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_judgments_ab_times_both_versions_by_turns(tmp_path: Path) -> None:
    out = tmp_path / "ab.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks/judgments_ab.py"), "--old", str(ROOT),
                          "--profiles", "12", "--batches", "3", "--batch", "16", "--warm", "1",
                          "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(out.read_text())
    assert got["same_profiles"] is True
    per = got["us_per_judgment"]
    assert {k: len(v) for k, v in per.items()} == {"old": 3, "new": 3}
    # the script's arithmetic, not the speed: batches_new_faster counts the batches where
    # new took less than old (from unrounded times; the reported ones are rounded to
    # 0.1 µs, so a pair that rounds equal may count either way)
    pairs = list(zip(per["new"], per["old"], strict=True))
    assert sum(n < o for n, o in pairs) <= got["batches_new_faster"] <= sum(n <= o for n, o in pairs)
    # the median of 3 is one of them, and rounding keeps the order: the rounded median is
    # the median of the rounded times
    assert got["median_us_per_judgment"] == {k: statistics.median(v) for k, v in per.items()}
    assert "12 profiles" in run.stdout


def test_judgments_ab_needs_the_other_checkout() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks/judgments_ab.py")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "--old is required" in run.stderr
