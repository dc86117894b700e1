"""The common window of the concurrent scale-out benchmark (benchmarks/scale_concurrent.py)
on made-up samples."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scripts import load_benchmark

sc = load_benchmark("scale_concurrent")


def samples(solo_rate: float, pair_rate: float, *, n: int = 41, dt: float = 0.5,
            solo_cpu: float = 0.4, pair_cpu: float = 0.8) -> list[tuple[float, int, int, float, float]]:
    return [(k * dt, int(solo_rate * k * dt), int(pair_rate * k * dt),
             solo_cpu * k * dt, pair_cpu * k * dt) for k in range(n)]


def test_the_window_opens_at_the_start_and_closes_when_the_first_group_reaches_its_share() -> None:
    s = samples(100, 180)  # solo reaches 90 % of 1,000 at t = 9, the pair 90 % of 2,000 at t = 10
    w = sc.window(s, start=2.0, solo_target=1000, pair_target=2000)
    assert w["seconds"] == 7.0
    assert (w["solo_count"], w["pair_count"]) == (700, 1260)
    assert w["speedup"] == 1.8
    assert (w["solo_cores"], w["pair_cores"]) == (0.4, 0.8)
    assert w["per_cpu_s_ratio"] == 0.9  # 1260 / 5.6 against 700 / 2.8


def test_the_pair_finishing_first_closes_the_window() -> None:
    s = samples(100, 250)  # the pair reaches 1,800 of 2,000 at t = 7.2, before solo's 9
    w = sc.window(s, start=0.0, solo_target=1000, pair_target=2000)
    assert w["seconds"] == 7.5  # the first sample at or past 1,800
    assert w["speedup"] == 2.5


def test_a_start_after_the_samples_or_a_window_never_closed_is_an_error() -> None:
    s = samples(100, 180, n=5)
    with pytest.raises(ValueError, match="no sample after"):
        sc.window(s, start=99.0, solo_target=1000, pair_target=2000)
    with pytest.raises(ValueError, match="neither group reached 90%"):
        sc.window(s, start=0.0, solo_target=1000, pair_target=2000)
    with pytest.raises(ValueError, match="share"):
        sc.window(s, start=0.0, solo_target=1, pair_target=1, share=0)


def test_a_solo_group_that_scored_nothing_is_an_error() -> None:
    s = [(t, 0, 10 * int(t), 0.0, t) for t in (0.0, 1.0, 2.0)]
    with pytest.raises(ValueError, match="solo group scored nothing"):
        sc.window(s, start=0.0, solo_target=100, pair_target=10)


def test_the_summary_is_the_median_of_the_rounds() -> None:
    rounds = [{"speedup": x, "per_cpu_s_ratio": y}
              for x, y in ((1.6, 0.8), (1.9, 0.95), (1.75, 0.9))]
    out = sc.summary(rounds)
    assert out["median_speedup"] == 1.75
    assert (out["min_speedup"], out["max_speedup"]) == (1.6, 1.9)
    assert out["median_per_cpu_s_ratio"] == 0.9


def test_completion_times_each_group_to_the_end_of_its_own_backlog() -> None:
    s = samples(100, 150)  # targets reached at t = 10 (solo, 1,000) and t = 10 (pair, 1,500)
    c = sc.completion(s, start=2.0, solo_target=1000, pair_target=1500)
    assert (c["solo_seconds"], c["pair_seconds"]) == (8.0, 8.0)
    assert (c["solo_count"], c["pair_count"]) == (800, 1200)
    assert c["speedup"] == 1.5 and c["overlap"] == 1.0
    assert c["per_cpu_s_ratio"] == 0.75  # 1200 / 6.4 against 800 / 3.2


def test_completion_counts_what_a_lagging_pair_scores_after_the_window() -> None:
    # the pair scores at 150/s, then (its copies catching up) at 250/s: the window, which
    # ends when solo reaches 90 % (t = 9), sees 150/s; its whole backlog took 12 s for 2,000
    s = [(t, int(100 * t), int(150 * t if t <= 10 else 1500 + 250 * (t - 10)), 0.4 * t, 0.8 * t)
         for t in (k * 0.5 for k in range(29))]
    w = sc.window(s, start=0.0, solo_target=1000, pair_target=2000)
    c = sc.completion(s, start=0.0, solo_target=1000, pair_target=2000)
    assert w["speedup"] == 1.5
    assert c["pair_seconds"] == 12.0 and c["speedup"] == round(2000 / 12 / 100, 3)


def test_a_group_stopping_just_short_is_done_at_its_last_move_and_one_far_short_is_an_error() -> None:
    s = [(float(t), min(100 * t, 998), min(200 * t, 2000), 0.4 * t, 0.8 * t) for t in range(15)]
    c = sc.completion(s, start=0.0, solo_target=1000, pair_target=2000)
    assert c["solo_seconds"] == 10.0  # 998 of 1,000 (99.8 %) at t = 10, then still
    with pytest.raises(ValueError, match="solo group did not finish"):
        sc.completion(s, start=0.0, solo_target=1100, pair_target=2000)


def test_log_problems_counts_the_errors_and_warnings_logged_since_the_last_read(tmp_path: Path) -> None:
    log = tmp_path / "w0.log"
    log.write_text("[2026-12-03 12:00:00] INFO sift.agents.app: started\n"
                   "[2026-12-03 12:00:01] WARNING sift.agents.app: consumer skipped x\n"
                   "[2026-12-03 12:00:02,1] [77] [ERROR] [^Agent]: Crashed reason=Boom()\n"
                   "Traceback (most recent call last):\n"
                   '  File "x.py", line 1, in <module>\n')
    end, got = sc.log_problems(log)
    assert (got["errors"], got["warnings"]) == (2, 1)
    assert got["first_errors"][0].endswith("Crashed reason=Boom()")
    assert got["first_warnings"] == ["[2026-12-03 12:00:01] WARNING sift.agents.app: consumer skipped x"]
    partial = "[2026-12-03 12:0"  # a line being written
    with open(log, "a") as fh:
        fh.write("[2026-12-03 12:01:00] ERROR sift.agents.app: scoring failed\n" + partial)
    end2, again = sc.log_problems(log, end)  # only what is new, in whole lines
    assert (again["errors"], again["warnings"]) == (1, 0)
    assert end2 == log.stat().st_size - len(partial)
    with open(log, "a") as fh:
        fh.write("1:01] WARNING sift.agents.app: late\n")
    assert sc.log_problems(log, end2)[1]["first_warnings"] == [
        "[2026-12-03 12:01:01] WARNING sift.agents.app: late"]  # the line read whole
    assert sc.log_problems(tmp_path / "none.log", 5) == (5, {"errors": 0, "warnings": 0,
                                                             "first_errors": [],
                                                             "first_warnings": []})
