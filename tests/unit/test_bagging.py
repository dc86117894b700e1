"""Profiles bagged over pseudolabel draws (sift.filters.bagging) and `sift replay --bags`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sift.cli import main
from sift.errors import ConfigError
from sift.filters.bagging import (
    RULES,
    BaggedProfile,
    bag_scores,
    bag_threshold,
    bagged_delivery,
    load_profile,
)
from sift.filters.bank import ProfileBank
from sift.filters.errors import ParameterError, StateError
from sift.filters.profile import Profile
from sift.filters.vectorize import Vectorizer
from sift.replay import (
    BankFilterer,
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
    S = np.array([[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]])  # members x documents
    # with thresholds 0.4, 0.4, 0.6 the margins are 0.1, 0.1, -0.1: mean +0.033
    assert bagged_delivery(S, np.array([0.4, 0.4, 0.6]), "margin").tolist() == [True, True]
    # 0.3, 0.3 and a silenced member's -1: mean -0.133
    T = np.array([0.2, 0.2, INF])
    assert np.allclose(bag_scores(S, T, "margin"), [-0.4 / 3, -0.4 / 3])
    assert bagged_delivery(S, T, "margin").tolist() == [False, False]
    assert bag_threshold(T, "margin") == 0.0


def test_abstaining_leaves_silenced_members_out() -> None:
    S = np.full((3, 1), 0.5)
    T = np.array([0.4, 0.6, INF])  # 0.1 and -0.1 counted, the silenced member left out
    assert bagged_delivery(S, T, "abstain").tolist() == [True]
    assert bagged_delivery(S, T, "margin").tolist() == [False]  # the -1 keeps it out
    silent = np.full(3, INF)  # every member answers No: so does the bag
    assert bag_threshold(silent, "abstain") == INF
    assert bagged_delivery(S, silent, "abstain").tolist() == [False]


def test_the_vote_needs_a_majority() -> None:
    S = np.full((3, 2), 0.5)
    S[:, 1] = [0.5, 0.1, 0.1]  # document 0: 2 of 3 members deliver; document 1: 1 of 3
    T = np.array([0.4, 0.5, 0.6])
    assert bagged_delivery(S, T, "vote").tolist() == [True, False]
    assert bagged_delivery(S[:2], T[:2], "vote").tolist() == [True, False]  # 2 of 2; 1 of 2 is no majority


@pytest.mark.parametrize("rule", ["margin", "abstain", "vote"])
def test_one_member_is_its_own_threshold(rule: str) -> None:
    S = np.array([[0.5, 0.49, 0.9]])
    for thr in (0.5, INF):
        assert bagged_delivery(S, np.array([thr]), rule).tolist() == (S[0] >= thr).tolist()


def test_bad_rules_and_members_are_refused() -> None:
    with pytest.raises(ParameterError, match="rule must be one of"):
        bag_scores(np.zeros((1, 1)), np.zeros(1), "mean")
    with pytest.raises(ParameterError, match="members must hold 1 to 25 profiles, got 0"):
        BaggedProfile([])
    with pytest.raises(ParameterError, match="members must all be the same profile"):
        BaggedProfile([Profile("a"), Profile("b")])
    with pytest.raises(ParameterError, match="members must be Profile objects"):
        BaggedProfile(["a"])  # type: ignore[list-item]
    with pytest.raises(ParameterError, match="rule must be one of"):
        BaggedProfile([Profile("a")], rule="mean")
    for bags in (0, 26, True, 2.0):
        with pytest.raises(ParameterError, match="bags must be an integer in"):
            BaggedProfile.of("a", bags)  # type: ignore[arg-type]


# -- a bagged profile in a bank --------------------------------------------------------------
def small() -> tuple[Corpus, Vectorizer, object]:
    c = corpus()
    vec = Vectorizer(n_features=2**12).fit(d.text for d in c.train)
    return c, vec, vec.transform([d.text for d in c.train])


def fitted_bag(c: Corpus, vec: Vectorizer, X: object, name: str = "wheat", bags: int = 3,
               rule: str = "margin") -> BaggedProfile:
    p = BaggedProfile.of(name, bags, rule=rule, query=name)
    p.fit(vec.transform([name]), X, positives=[i for i, d in enumerate(c.train) if name in d.topics][:3])
    return p


def test_the_members_come_from_consecutive_seeds_and_differ() -> None:
    c, vec, X = small()
    p = BaggedProfile.of("wheat", 3, seed=4, query="wheat")
    assert [m.seed for m in p.members] == [4, 5, 6]
    p = fitted_bag(c, vec, X)
    X_test = vec.transform([d.text for d in c.test])
    member_scores = [m.score(X_test).tolist() for m in p.members]
    assert member_scores[0] != member_scores[1]  # each member's own pseudolabel draw


@pytest.mark.parametrize("rule", ["margin", "abstain", "vote"])
def test_a_bank_scores_a_bagged_profile_as_the_profile_does(rule: str) -> None:
    c, vec, X = small()
    X_test = vec.transform([d.text for d in c.test])
    alone = ProfileBank()
    mixed = ProfileBank()
    for name in ("oil", "gold"):
        for bank in (alone, mixed):
            p = Profile(name, query=name)
            p.fit(vec.transform([name]), X, positives=[i for i, d in enumerate(c.train) if name in d.topics][:3])
            bank.add(p)
    bag = fitted_bag(c, vec, X, rule=rule)
    mixed.add(bag)
    S = mixed.score(X_test)
    assert mixed.names == ["oil", "gold", "wheat"]
    assert np.array_equal(S[:, :2], alone.score(X_test))  # the other profiles untouched
    assert np.array_equal(S[:, 2], bag.score(X_test))
    want = bagged_delivery(np.stack([m.score(X_test) for m in bag.members]), bag.member_thresholds, rule)
    assert np.array_equal(S[:, 2] >= mixed.thresholds()[2], want)
    hits = mixed.decide(X_test)
    assert [h.row for h in hits if h.profile == "wheat"] == np.flatnonzero(want).tolist()
    assert all(h.score >= h.threshold for h in hits)
    assert {h.model_version for h in hits if h.profile == "wheat"} <= {bag.version_}


def test_bags_of_every_rule_and_size_score_in_the_bank_bit_for_bit() -> None:
    """The bank combines each group of bagged profiles of one rule and size at once; every
    column must be the profile's own score, bit for bit, for groups of several profiles
    and of ten members (numpy sums more than eight numbers pairwise along a contiguous
    axis: ``bag_scores`` must see the members' axis laid out as ``BaggedProfile.score``
    lays it out, see the next test)."""
    c, vec, X = small()
    X_test = vec.transform([d.text for d in c.test])
    bank = ProfileBank()
    bags = []
    words = " ".join(WORDS.values()).split() + [f"w{k}" for k in range(40)]
    for i, (name, n, rule, model) in enumerate([
            ("wheat", 10, "margin", "rocchio"), ("oil", 10, "margin", "rocchio"),
            ("gold", 2, "abstain", "rocchio"), ("wheat2", 10, "vote", "rocchio"),
            ("oil2", 10, "margin", "kantor"), ("gold2", 3, "margin", "kantor")]):
        pos = [j for j, d in enumerate(c.train) if name.rstrip("2") in d.topics][:3]
        members = []
        for b in range(n):  # members far apart: each its own query, so the sums' bits vary
            query = " ".join(words[(7 * b + k + i) % len(words)] for k in range(3))
            m = Profile(name, query=query, seed=b, model=model)
            m.fit(vec.transform([query]), X, positives=pos)
            members.append(m)
        p = BaggedProfile(members, rule)
        bags.append(p)
        bank.add(p)
        plain = Profile(f"plain{i}", query=name.rstrip("2"))
        plain.fit(vec.transform([name.rstrip("2")]), X, positives=pos)
        bank.add(plain)
    for m in bags[2].members:  # abstain with every member silent (a new threshold, a new version)
        m.threshold_ = INF
        m.version_ += 1
    S = bank.score(X_test)
    for j, p in enumerate(bank):
        assert np.array_equal(S[:, j], p.score(X_test)), p.name
    assert bank.thresholds().tolist() == [p.threshold_ for p in bank]
    assert bank.thresholds()[4] == INF and not any(h.profile == "gold" for h in bank.decide(X_test))


@pytest.mark.parametrize("rule", ["margin", "abstain"])
def test_a_bag_of_rocchio_members_is_one_linear_model(rule: str) -> None:
    """Under margin and abstain a bag of Rocchio members scores as one vector: the same
    values as the rule over the members' own scores, up to rounding, silenced members
    too; vote and other models are not linear."""
    c, vec, X = small()
    X_test = vec.transform([d.text for d in c.test])
    bag = fitted_bag(c, vec, X, bags=4, rule=rule)
    bag.members[1].threshold_ = INF  # silenced (a new threshold, a new version)
    bag.members[1].version_ += 1
    assert bag.linear
    cols, vals, offset = bag.merged()
    assert np.all(np.diff(cols) > 0) and vals.size == cols.size and offset > 0
    by_members = bag.combine(np.stack([m.score(X_test) for m in bag.members]))
    np.testing.assert_allclose(bag.score(X_test), by_members, rtol=0, atol=1e-12)
    assert not fitted_bag(c, vec, X, bags=2, rule="vote").linear
    kantor = BaggedProfile.of("wheat", 2, query="wheat", model="kantor")
    assert not kantor.linear
    with pytest.raises(ParameterError, match="is not linear"):
        kantor.merged()


@pytest.mark.parametrize("rule", ["margin", "abstain", "vote"])
def test_bag_scores_of_many_profiles_are_each_profiles_own(rule: str) -> None:
    """``(B, n, k)`` members-first, C-ordered, as the bank passes them: column ``j`` is
    exactly what ``(B, n)`` of profile ``j`` alone gives."""
    rng = np.random.default_rng(0)
    S = rng.random((12, 50, 4))
    T = rng.random((12, 4)) * 0.8
    T[:3, 1] = INF
    T[:, 2] = INF
    got = bag_scores(S, T, rule)
    for j in range(4):
        assert np.array_equal(got[:, j], bag_scores(np.ascontiguousarray(S[:, :, j]), T[:, j], rule))
    want = bag_threshold(T, rule)
    assert np.array_equal(want, [bag_threshold(T[:, j], rule) for j in range(4)])


def test_every_member_learns_every_judgment() -> None:
    c, vec, X = small()
    bag = fitted_bag(c, vec, X)
    bank = ProfileBank()
    bank.add(bag)
    version = bag.version_
    bag.learn_one(vec.transform([c.test[0].text]), relevant=True)
    assert [m.n_judged_ for m in bag.members] == [1, 1, 1] and bag.n_judged_ == 1
    assert bank.learn_many([("wheat", vec.transform([c.test[1].text]), False)]) == ["wheat"]
    assert [m.n_judged_ for m in bag.members] == [2, 2, 2] and bag.n_relevant_ == 1
    assert bag.version_ == sum(m.version_ for m in bag.members) > version
    X_test = vec.transform([d.text for d in c.test])
    assert np.array_equal(bank.score(X_test)[:, 0], bag.score(X_test))  # the stack follows


def test_state_round_trips_through_json() -> None:
    c, vec, X = small()
    bag = fitted_bag(c, vec, X, rule="abstain")
    bag.learn_many(vec.transform([d.text for d in c.test[:4]]), [True, False, True, False])
    raw = orjson.dumps(bag.to_state(), option=orjson.OPT_SERIALIZE_NUMPY)
    back = load_profile(orjson.loads(raw), vec.feature_weights())
    assert isinstance(back, BaggedProfile) and back.rule == "abstain" and back.bags == 3
    X_test = vec.transform([d.text for d in c.test])
    assert np.array_equal(back.score(X_test), bag.score(X_test))
    assert (back.threshold_, back.version_, back.n_judged_) == (bag.threshold_, bag.version_, bag.n_judged_)
    assert isinstance(load_profile(bag.members[0].to_state(), vec.feature_weights()), Profile)


@pytest.mark.parametrize(("change", "match"), [
    ({"rule": "mean"}, "rule must be one of"),
    ({"members": []}, "members must be a list of 1 to 25"),
    ({"members": "x"}, "members must be a list of 1 to 25"),
    ({"version": 99}, "state version 99"),
])
def test_bad_states_are_refused(change: dict[str, object], match: str) -> None:
    c, vec, X = small()
    state = {**fitted_bag(c, vec, X, bags=2).to_state(), **change}
    with pytest.raises(StateError, match=match):
        load_profile(state, vec.feature_weights())


def test_a_state_without_a_version_or_of_another_kind_is_refused() -> None:
    c, vec, X = small()
    bag = fitted_bag(c, vec, X, bags=2)
    state = bag.to_state()
    del state["version"]
    with pytest.raises(StateError, match="bagged_profile state version None is not"):
        load_profile(state, vec.feature_weights())
    state = {**bag.to_state(), "kind": "profile"}  # a bag's shape under another kind
    with pytest.raises(StateError, match="expected bagged_profile state, got kind 'profile'"):
        BaggedProfile.from_state(state, vec.feature_weights())
    with pytest.raises(StateError, match="expected bagged_profile state, got kind 'profile'"):
        BaggedProfile.from_state(bag.members[0].to_state(), vec.feature_weights())


def test_members_of_other_profiles_are_refused() -> None:
    c, vec, X = small()
    state = fitted_bag(c, vec, X, bags=2).to_state()
    state["members"][1] = fitted_bag(c, vec, X, name="oil", bags=1).members[0].to_state()
    with pytest.raises(StateError, match="members must all be the same profile"):
        load_profile(state, vec.feature_weights())


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


def test_replay_bags_the_profiles_from_consecutive_seeds() -> None:
    c = corpus()
    cfg = ReplayConfig(seed=4, bags=2)
    got = replay(c, cfg)
    vec = Vectorizer().fit(d.text for d in c.train)
    X_train = vec.transform([d.text for d in c.train])
    X_test = vec.transform([d.text for d in c.test])
    specs = default_specs(c)
    names = [s.profile for s in specs]

    def bagged(seeds: tuple[int, ...]) -> tuple[object, list[float]]:
        """Per-profile results and the deliveries' scores of a bank of hand-built bags."""
        built = [build_bank(c, specs, ReplayConfig(seed=s), vec, X_train) for s in seeds]
        bank = ProfileBank()
        for name in names:
            bank.add(BaggedProfile([b[name] for b, _ in built]))  # type: ignore[misc]
        hits = run_protocol(BankFilterer(bank), X_test, c.test, feedback=True)
        return evaluate(hits, c.test, names, n_initial=built[0][1])["per_profile"], [h.score for h in hits]

    per_profile, scores = bagged((4, 5))
    assert got.metrics["per_profile"] == per_profile
    assert [d["score"] for d in got.decisions] == scores
    assert scores != bagged((4, 4))[1]  # the second member's own draw shows in the scores
    assert got.metrics["config"]["bags"] == 2


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
        replay(corpus(), ReplayConfig(bags=2), filterer_factory=lambda bank, vec, X: BankFilterer(bank))


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


def test_a_specs_own_bags_count_as_the_configs() -> None:
    """Specs with ``bags`` (a --profiles file, the demo's) replay as ``bags`` in the config."""
    c = corpus()
    specs = [dataclasses.replace(s, bags=2, bag_rule="abstain") for s in default_specs(c)]
    by_spec = replay(c, ReplayConfig(), specs)
    by_config = replay(c, ReplayConfig(bags=2, bag_rule="abstain"))
    assert by_spec.metrics["per_profile"] == by_config.metrics["per_profile"]
    assert [d["score"] for d in by_spec.decisions] == [d["score"] for d in by_config.decisions]
    with pytest.raises(ConfigError, match="bags apply to adaptive filtering"):
        replay(c, ReplayConfig(full_training=True), specs)


@pytest.mark.parametrize(("args", "message"), [
    (["profiles", "add", "x", "--query", "x", "--bags", "0"],
     "profile spec field 'bags' must be an integer in [1, 5], got 0"),
    (["profiles", "add", "x", "--query", "x", "--bags", "2", "--bag-rule", "mean"],
     "profile spec field 'bag_rule' must be one of margin, abstain, vote, got 'mean'"),
    (["demo", "--bags", "6"], "--bags must be in [1, 5], got 6"),
])
def test_cli_bad_bags_are_one_line_errors_before_any_broker(
        args: list[str], message: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIFT_BROKER", "kafka://127.0.0.1:1")  # nothing listens there
    assert main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


# -- the conformance checks every estimator passes (as tests/unit/test_profile.py's) ----------
_texts = [f"{WORDS[c]} w{k}" for c in WORDS for k in (1, 9)] + ["zinc smelter", "wheat"]


@settings(max_examples=20, deadline=None)
@given(model=st.sampled_from(["rocchio", "kantor", "knn"]), rule=st.sampled_from(RULES),
       update=st.sampled_from(["every", 2, "never"]),
       judgments=st.lists(st.tuples(st.sampled_from(_texts), st.booleans()), max_size=6))
def test_bagged_state_round_trip_is_exact_and_inputs_stay_untouched(
        model: str, rule: str, update: str | int, judgments: list[tuple[str, bool]]) -> None:
    c, vec, X = small()
    p = BaggedProfile.of("wheat", 3, rule=rule, query="wheat", model=model, update=update)
    p.fit(vec.transform(["wheat"]), X, positives=[i for i, d in enumerate(c.train) if "wheat" in d.topics][:3])
    for text, rel in judgments:
        x = vec.transform([text])
        before = (x.data.copy(), x.indices.copy(), x.indptr.copy())
        p.learn_one(x, relevant=rel)
        assert all(np.array_equal(a, b) for a, b in zip((x.data, x.indices, x.indptr), before, strict=True))
    blob = orjson.dumps(p.to_state())
    q = load_profile(orjson.loads(blob), vec.feature_weights())
    assert isinstance(q, BaggedProfile) and orjson.dumps(q.to_state()) == blob
    X_test = vec.transform([d.text for d in c.test[:20]])
    snapshot = X_test.data.copy()
    assert np.array_equal(p.score(X_test), q.score(X_test)) and p.threshold_ == q.threshold_
    assert np.array_equal(X_test.data, snapshot)
    for r in (p, q):  # and they keep learning identically
        r.learn_one(vec.transform(["wheat tender"]), relevant=True)
    assert np.array_equal(p.score(X_test), q.score(X_test)) and p.threshold_ == q.threshold_


def test_seeded_bags_are_reproducible() -> None:
    c, vec, X = small()
    a, b = (orjson.dumps(fitted_bag(c, vec, X, bags=3).to_state()) for _ in range(2))
    assert a == b
