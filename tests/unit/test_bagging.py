"""Profiles bagged over pseudolabel draws (sift.filters.bagging) and `sift replay --bags`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from sift.cli import main
from sift.errors import ConfigError
from sift.filters.bagging import BaggedBank, bagged_delivery
from sift.filters.errors import ParameterError
from sift.filters.vectorize import Vectorizer
from sift.replay import (
    BaggedFilterer,
    Corpus,
    ReplayConfig,
    build_bank,
    default_specs,
    evaluate,
    replay,
    run_protocol,
)
from sift.topics.records import Document

INF = np.inf
WORDS = {
    "wheat": "wheat grain harvest bushels export tonnes",
    "oil": "crude oil barrels opec refinery prices",
    "gold": "gold ounce mine bullion metal",
}


def corpus() -> Corpus:
    """A small stream whose categories overlap in their filler words."""
    def docs(n: int, start: int) -> list[Document]:
        cats = list(WORDS)
        out = []
        for i in range(n):
            cat = cats[i % 3]
            own = " ".join(WORDS[cat].split()[: 2 + i % 4])
            filler = " ".join(f"w{(i * 7 + k) % 40}" for k in range(8))
            out.append(Document(id=f"d{start + i}", text=f"{own} {filler}", topics=(cat,)))
        return out
    return Corpus(docs(90, 0), docs(60, 1000))


# -- the joint rule, by hand -------------------------------------------------------------
def test_the_mean_margin_decides_and_a_silenced_member_counts_minus_one() -> None:
    S = np.full((3, 1, 2), 0.5)
    # a: margins 0.1, 0.1, -0.1 -> mean +0.033; b: 0.3, 0.3 and -1 -> mean -0.133
    T = np.array([[0.4, 0.2], [0.4, 0.2], [0.6, INF]])
    assert bagged_delivery(S, T, "margin").tolist() == [[True, False]]


def test_abstaining_leaves_silenced_members_out() -> None:
    S = np.full((3, 1, 2), 0.5)
    T = np.array([[0.4, INF], [0.6, INF], [INF, INF]])  # a: 0.1 and -0.1; b: none counted
    assert bagged_delivery(S, T, "abstain").tolist() == [[True, False]]
    assert bagged_delivery(S, T, "margin").tolist() == [[False, False]]  # the -1 keeps a out


def test_the_vote_needs_a_majority() -> None:
    S = np.full((3, 1, 2), 0.5)
    T = np.array([[0.4, 0.4], [0.6, 0.6], [0.5, INF]])  # a: 2 of 3; b: 1 of 3
    assert bagged_delivery(S, T, "vote").tolist() == [[True, False]]
    assert bagged_delivery(S[:2], T[:2], "vote").tolist() == [[False, False]]  # 1 of 2 is no majority


@pytest.mark.parametrize("rule", ["margin", "abstain", "vote"])
def test_one_member_is_its_own_threshold(rule: str) -> None:
    S = np.array([[[0.5, 0.2], [0.1, 0.9]]])
    T = np.array([[0.5, INF]])
    assert bagged_delivery(S, T, rule).tolist() == [[True, False], [False, False]]


def test_bad_rules_and_banks_are_refused() -> None:
    with pytest.raises(ParameterError, match="rule must be one of"):
        bagged_delivery(np.zeros((1, 1, 1)), np.zeros((1, 1)), "mean")
    with pytest.raises(ParameterError, match="at least one bank"):
        BaggedBank([])
    c = corpus()
    vec = Vectorizer(n_features=2**12).fit(d.text for d in c.train)
    X = vec.transform([d.text for d in c.train])
    specs = default_specs(c)
    bank, _ = build_bank(c, specs, ReplayConfig(), vec, X)
    other, _ = build_bank(c, specs[::-1], ReplayConfig(), vec, X)
    with pytest.raises(ParameterError, match="same profiles in the same order"):
        BaggedBank([bank, other])
    with pytest.raises(ParameterError, match="rule must be one of"):
        BaggedBank([bank], rule="mean")


# -- the replay ----------------------------------------------------------------------------
def test_identical_members_decide_as_one_profile() -> None:
    """With pseudolabeling off no seed changes anything, so every member is the same
    profile and the bag must deliver exactly what one profile delivers."""
    c = corpus()
    one = replay(c, ReplayConfig(pseudolabel={}))
    for rule in ("margin", "abstain", "vote"):
        bag = replay(c, ReplayConfig(pseudolabel={}, bags=3, bag_rule=rule))
        assert [(d["doc_id"], d["profile"]) for d in bag.decisions] == \
            [(d["doc_id"], d["profile"]) for d in one.decisions]
        assert bag.metrics["macro_t11su"] == one.metrics["macro_t11su"]
        assert bag.metrics["config"]["bags"] == 3 and bag.metrics["config"]["bag_rule"] == rule


def test_the_members_come_from_consecutive_seeds() -> None:
    c = corpus()
    cfg = ReplayConfig(seed=4, bags=2)
    got = replay(c, cfg)
    vec = Vectorizer().fit(d.text for d in c.train)
    X_train = vec.transform([d.text for d in c.train])
    X_test = vec.transform([d.text for d in c.test])
    specs = default_specs(c)
    names = [s.profile for s in specs]

    def bagged(seeds: tuple[int, ...]) -> tuple[object, list[float]]:
        """Per-profile results and the deliveries' (mean) scores of a hand-built bag."""
        built = [build_bank(c, specs, ReplayConfig(seed=s), vec, X_train) for s in seeds]
        hits = run_protocol(BaggedFilterer(BaggedBank([b for b, _ in built])), X_test, c.test, feedback=True)
        return evaluate(hits, c.test, names, n_initial=built[0][1])["per_profile"], [h.score for h in hits]

    per_profile, scores = bagged((4, 5))
    assert got.metrics["per_profile"] == per_profile
    assert [d["score"] for d in got.decisions] == scores
    assert scores != bagged((4, 4))[1]  # the second member's own draw shows in the scores
    assert got.metrics["config"]["bags"] == 2


def test_every_member_learns_every_judgment() -> None:
    c = corpus()
    vec = Vectorizer(n_features=2**12).fit(d.text for d in c.train)
    X = vec.transform([d.text for d in c.train])
    specs = default_specs(c)
    members = [build_bank(c, specs, ReplayConfig(seed=s), vec, X)[0] for s in (0, 1)]
    bag = BaggedBank(members)
    before = [m["wheat"].n_judged_ for m in members]
    assert bag.learn_one("wheat", vec.transform([c.test[0].text]), relevant=True) is True
    assert [m["wheat"].n_judged_ for m in members] == [n + 1 for n in before]
    assert [m["oil"].n_judged_ for m in members] == [0, 0]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"bags": 0}, "bags must be a positive integer"),
    ({"bags": True}, "bags must be a positive integer"),
    ({"bags": 2.0}, "bags must be a positive integer"),
    ({"bag_rule": "mean"}, "bag_rule must be one of"),
    ({"bags": 2, "full_training": True}, "full training has no pseudolabels"),
])
def test_config_errors_name_the_option(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ReplayConfig(**kwargs)  # type: ignore[arg-type]


def test_bags_do_not_combine_with_a_filterer_factory() -> None:
    with pytest.raises(ConfigError, match="do not combine"):
        replay(corpus(), ReplayConfig(bags=2), filterer_factory=lambda bank, vec, X: BaggedFilterer(
            BaggedBank([bank])))


def test_cli_bags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    c = corpus()
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    for path, docs in ((train, c.train), (test, c.test)):
        path.write_bytes(b"".join(orjson.dumps({"id": d.id, "text": d.text, "topics": list(d.topics)}) + b"\n"
                                  for d in docs))
    out = tmp_path / "out"
    args = ["replay", "--train", str(train), "--test", str(test), "--out", str(out), "--no-plot"]
    assert main([*args, "--bags", "2", "--bag-rule", "vote"]) == 0
    m = orjson.loads((out / "metrics.json").read_bytes())
    assert m["config"]["bags"] == 2 and m["config"]["bag_rule"] == "vote"
    assert "3 profiles (2 bagged from seeds 0-1, vote)" in capsys.readouterr().out
    capsys.readouterr()
    assert main([*args, "--bags", "2", "--full-training"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--bags applies to adaptive filtering" in err[0]
    with pytest.raises(SystemExit) as exc:
        main([*args, "--bags", "0"])
    assert exc.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--bags: must be a positive integer, got 0" in err[0]
