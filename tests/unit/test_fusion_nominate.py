"""``sift nominate``: the runnable paths and their one-line errors on bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from sift.cli import main
from sift.commands.nominate import rdpg_run, run_in_thread, simulate_rdpg
from sift.filters.fusion import FusionError, solve_weights

WORDS = {
    "grain": "wheat corn harvest bushels usda crop grain export farmers",
    "oil": "crude oil opec barrels refinery prices output gulf tanker",
    "money": "dollar yen currency exchange rates central bank interest",
}


def _corpus(path: Path, per_topic: int = 12, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    rows = []
    for topic, words in WORDS.items():
        vocab = words.split()
        for i in range(per_topic):
            text = " ".join(rng.choice(vocab, size=12)) + f" story {topic} number {i}"
            rows.append({"id": f"{topic}{i}", "text": text, "topics": [topic]})
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    return path


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], match: str) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith("sift nominate: error:")
    assert match in err


def test_rdpg_cli_writes_results_and_png(tmp_path: Path) -> None:
    out = tmp_path / "rdpg"
    assert main(["nominate", "--simulate", "rdpg", "--runs", "3", "--k", "20", "--seed", "1",
                 "--out", str(out)]) == 0
    res = json.loads((out / "rdpg.json").read_text())
    assert res["alphas"] == [round(0.1 * i, 1) for i in range(11)]
    for obs in ("P", "Abar"):
        for ranker in ("ilp", "ase", "lse"):
            s = res["mrr"][obs][ranker]
            assert all(0 < m <= 1 for m in s["mean"])
            assert all(lo <= m <= hi for lo, m, hi in zip(s["lo"], s["mean"], s["hi"], strict=True))
    # interestingness is LSE at alpha = 0 and ASE at alpha = 1 on the true P
    assert res["mrr"]["P"]["lse"]["mean"][0] == 1.0
    assert res["mrr"]["P"]["ase"]["mean"][-1] == 1.0


def test_rdpg_fixed_positions_vary_only_the_samples() -> None:
    res = simulate_rdpg(3, runs=3, k=20, fixed_positions=True)
    p_rows = np.array(res["per_run"]["P"]["ilp"])
    assert np.all(p_rows == p_rows[0])  # P observed: the same in every run
    assert len(res["positions"]) == 51 and res["positions"][0] == [0.5, 0.5]


def test_rdpg_run_excludes_query_and_s() -> None:
    rng = np.random.default_rng(0)
    x = np.vstack([[0.5, 0.5], rng.uniform(0.05, 0.7, size=(20, 2))])
    one = rdpg_run(np.random.default_rng(1), k=10, x=x)
    # reciprocal ranks of one held-out item among 21 - 1 - 5 candidates
    for by in one.values():
        for vals in by.values():
            assert all(1 / 15 <= v <= 1 for v in vals)


def test_text_cli_writes_metrics(tmp_path: Path) -> None:
    data = _corpus(tmp_path / "docs.jsonl.gz")
    out = tmp_path / "grain"
    assert main(["nominate", "--data", str(data), "--category", "grain", "--positives", "3",
                 "--trials", "4", "--seed", "0", "--time-limit", "5", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    for key in ("mrr_ilp", "mrr_singleton", "mrr_by_representation", "wilcoxon_p", "seconds"):
        assert key in m
    assert set(m["mrr_by_representation"]) == {"word", "char", "lsa"}
    assert 0 < m["mrr_ilp"] <= 1 and 0 < m["mrr_singleton"] <= 1
    assert 0 <= m["wilcoxon_p"] <= 1
    assert len(m["per_trial"]["ilp"]) == 4


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--simulate", "rdpg", "--runs", "0"], "--runs"),
        (["--simulate", "rdpg", "--k", "-1"], "--k"),
        (["--simulate", "rdpg", "--time-limit", "0"], "--time-limit"),
        ([], "--simulate rdpg or --data"),
        (["--simulate", "rdpg", "--data", "x.jsonl"], "exclusive"),
        (["--data", "x.jsonl"], "--category"),
        (["--data", "DATA", "--category", "grain", "--positives", "0"], "--positives"),
        (["--data", "DATA", "--category", "grain", "--trials", "0"], "--trials"),
        (["--data", "DATA", "--category", "grain", "--positives", "11"], "needs at least"),
        (["--data", "DATA", "--category", "nosuch"], "has 0 documents"),
        (["--data", "MISSING", "--category", "grain"], "MISSING"),
    ],
)
def test_cli_bad_input_is_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], match: str
) -> None:
    data = _corpus(tmp_path / "docs.jsonl.gz")
    argv = ["nominate", *[{"DATA": str(data), "MISSING": str(tmp_path / "MISSING")}.get(a, a)
                          for a in extra], "--out", str(tmp_path / "o")]
    _one_line_error(capsys, argv, match)


@pytest.mark.parametrize(
    ("d", "pos", "query", "match"),
    [
        ([[0.1, 0.2], [0.3, 0.1], [0.5, 0.5]], [], 0, "empty"),  # S empty
        ([[0.0, 0.0], [0.3, 0.1], [0.5, 0.5]], [0, 1], 0, "query item itself"),  # S holds v*
        ([[0.0, 0.0], [0.3, np.nan], [0.5, 0.5]], [1], 0, "finite"),
        ([[0.0, 0.0], [0.3, np.inf], [0.5, 0.5]], [1], 0, "finite"),
        (np.zeros((3, 0)), [1], 0, "J = 0"),
    ],
)
def test_nomination_bad_input_is_one_line_error(
    d: object, pos: list[int], query: int, match: str
) -> None:
    with pytest.raises(FusionError, match=match) as info:
        solve_weights(d, pos, query=query)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_run_in_thread_returns_result_abandons_or_reraises() -> None:
    import time

    assert run_in_thread(lambda: 7, time.monotonic() + 30) == 7
    # a job still running at the deadline is abandoned: None, not its result
    assert run_in_thread(lambda: time.sleep(2.0) or 1, time.monotonic() + 0.01) is None

    def boom() -> int:
        raise FusionError("inside")

    with pytest.raises(FusionError, match="inside"):
        run_in_thread(boom, time.monotonic() + 30)
