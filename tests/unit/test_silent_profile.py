"""A profile that TROT silences (threshold +inf with relevant examples) still explores.

The category is a large share of the unlabelled training documents, so its random
pseudo-negatives outscore its three weak positives and TROT answers No to everything:
without ``silent_explore`` the profile never delivers, so it is never judged and never
learns. With it (the default) it delivers about the top ``fallback_rate`` of the
documents, learns from the judgments and stops when junk lands at the bottom.
"""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest

from sift.filters.errors import ParameterError
from sift.filters.profile import Profile
from sift.filters.vectorize import Vectorizer

RATE = 0.1


@pytest.fixture(scope="module")
def data() -> tuple[Vectorizer, list[str], list[str]]:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(300)]

    def doc(core: list[str], k: int = 6) -> str:
        return " ".join([*core, *rng.choice(words, k, replace=False)])

    pos = [doc(["profit"], 12) for _ in range(3)]  # three weak positives
    big = [doc(["profit", "net", "shr"]) for _ in range(150)]  # relevant, unlabelled
    other = [doc([]) for _ in range(250)]
    train = pos + big + other
    return Vectorizer(n_features=2**12).fit(train), train, [doc([]) for _ in range(20)]


def _profile(v: Vectorizer, train: list[str], **kw: object) -> Profile:
    # the pseudo-negatives at their pseudolabel weight, as the design has it: scaled to
    # the category's prevalence (the default negative_mass) they do not silence it
    kw.setdefault("negative_mass", None)
    p = Profile("earn", query="profit", pseudolabel={"neg_fraction": 1.0, "neg_weight": 1.0},
                fallback_rate=RATE, **kw)  # type: ignore[arg-type]
    p.fit(v.transform(["profit"]), v.transform(train), positives=[0, 1, 2],
          feature_weights=v.feature_weights())
    return p


def test_trot_silenced_profile_never_delivers_without_exploration(data) -> None:
    v, train, _ = data
    p = _profile(v, train, silent_explore=False)
    assert p.threshold_ == math.inf and not p.silenced_
    assert not p.decide(v.transform(train)).any()


def test_silenced_profile_delivers_its_top_documents_at_the_rate(data) -> None:
    v, train, _ = data
    p = _profile(v, train)
    assert p.silenced_ and math.isfinite(p.threshold_)
    X = v.transform(train[3:])  # the unlabelled documents
    scores = p.score(X)
    hits = p.decide(X)
    # about the top fallback_rate of them, and exactly the top-scoring ones
    assert RATE / 2 <= hits.mean() <= 2 * RATE
    assert scores[hits].min() >= scores[~hits].max()
    # the threshold is the rate quantile of the pseudo-negatives' leave-one-out scores
    assert p.threshold_ == p.silent_threshold()


def test_silenced_profile_learns_and_stops_on_junk(data) -> None:
    v, train, junk = data
    p = _profile(v, train, reopen_share=None)  # the gate alone (see the reopen_share tests)
    X = v.transform(train[3:])
    top = int(np.argmax(p.score(X)))
    version = p.version_
    p.learn_one(X[top], relevant=True)  # the first delivery is relevant: keep exploring
    assert (p.n_relevant_, p.version_) == (1, version + 1)
    assert math.isfinite(p.threshold_) and p.silenced_
    state = orjson.loads(orjson.dumps(p.to_state(), option=orjson.OPT_SERIALIZE_NUMPY))
    q = Profile.from_state(state, v.feature_weights())
    assert q.silenced_ and q.threshold_ == p.threshold_
    # junk at the bottom of what it delivers: the exploration stops, TROT decides again
    J = v.transform(junk)
    for i in range(4):
        p.learn_one(J[i], relevant=False)
    assert p.silent_threshold() == math.inf
    assert not p.decide(J[4:]).any()


def test_negative_mass_scales_a_common_category_out_of_silence(data) -> None:
    """The same common category with the pseudo-negatives' TROT weight scaled to its
    prevalence: the many unlabelled look-alikes of its positives say relevant documents
    are common, so TROT itself delivers them (no silence, no fallback cut) and leaves
    the other documents out."""
    v, train, _ = data
    p = _profile(v, train, negative_mass=3.0)
    assert not p.silenced_ and math.isfinite(p.threshold_)
    assert p.threshold_ != p.silent_threshold()
    hits = p.decide(v.transform(train[3:]))  # the 150 relevant, then 250 others
    assert hits[:150].all()
    assert hits[:150].sum() / hits.sum() > 1.5 * 150 / 400


def test_silent_explore_is_validated_and_kept_in_params() -> None:
    with pytest.raises(Exception, match="silent_explore"):
        Profile("x", silent_explore=1)  # type: ignore[arg-type]
    assert Profile("x").get_params()["silent_explore"] is True


@pytest.mark.parametrize("model", ["rocchio", "kantor", "knn"])
def test_fallback_cut_of_a_random_sample_and_of_the_training_set(data, model: str) -> None:
    """The fit's fallback cut: with pseudo-negatives drawn from every rank (a random
    sample of the training set) the ``fallback_rate`` quantile of their leave-one-out
    scores, so the silent threshold at fit; drawn from the bottom ranks only (not a
    sample), the quantile of the whole training set's scores."""
    v, train, _ = data
    X = v.transform(train)
    p = Profile("earn", query="profit", model=model, fallback_rate=RATE,
                pseudolabel={"neg_fraction": 0.5, "neg_weight": 1.0, "min_pool": 0})
    p.fit(v.transform(["profit"]), X, positives=[0, 1, 2], feature_weights=v.feature_weights())
    ex = p.examples_
    sample = p.model_.loo_scores()[(ex.labels < 0) & ~ex.real]
    top = math.ceil(RATE * sample.size)
    # never at or below the model's no-evidence score (Kantor's 1 here)
    floor = math.nextafter(p.model_.no_evidence_score, math.inf)
    assert p.fallback_threshold_ == max(np.sort(sample)[-top], floor)
    q = Profile("earn", query="profit", model=model, fallback_rate=RATE,
                pseudolabel={"neg_fraction": 0.5, "neg_weight": 1.0, "min_neg_rank": 200, "min_pool": 0})
    q.fit(v.transform(["profit"]), X, positives=[0, 1, 2], feature_weights=v.feature_weights())
    top = math.ceil(RATE * X.shape[0])
    assert q.fallback_threshold_ == max(np.sort(q.score(X))[-top], floor)


def test_prevalence_share_counts_the_look_alikes_of_the_lowest_positive(data) -> None:
    v, train, _ = data
    p = _profile(v, train)
    ex = p.examples_
    loo = p.model_.loo_scores()
    sample = np.flatnonzero((ex.labels < 0) & ~ex.real)
    low = min(loo[i] for i in range(len(ex)) if ex.labels[i] > 0 and ex.real[i])
    expected = sum(1 for i in sample if loo[i] >= low) / len(sample)
    assert p.prevalence_share() == p.prevalence_share(loo) == expected
    # the 150 unlabelled relevant documents of the 400 make it common
    assert expected > 0.3
    assert Profile("x", pseudolabel={}).prevalence_share(np.zeros(0)) == 0.0


def test_reopen_share_keeps_a_common_profile_exploring_through_junk(data) -> None:
    """The same junk that stops the exploration of ``test_silenced_profile_learns_and_stops_on_junk``
    (the threshold goes back to TROT's, above the cut) does not stop a profile whose
    relevant documents look common (its prevalence share at least ``reopen_share``); a
    higher bar than its share leaves the gate in charge."""
    v, train, junk = data
    J = v.transform(junk)
    X = v.transform(train[3:])

    def judged(reopen: float | None) -> Profile:
        p = _profile(v, train, reopen_share=reopen)
        p.learn_one(X[int(np.argmax(p.score(X)))], relevant=True)
        for i in range(4):
            p.learn_one(J[i], relevant=False)
        assert p.silenced_
        return p

    gated = judged(None)  # left to TROT's threshold, now above the exploration cut
    assert gated.silent_threshold() == math.inf
    share = gated.prevalence_share()
    assert 0 < share < 0.5
    assert judged(2 * share).threshold_ == gated.threshold_
    opened = judged(share)
    assert opened.prevalence_share() == share
    assert opened.threshold_ == opened.silent_threshold() < gated.threshold_
    hits = opened.decide(X)
    assert RATE / 2 <= hits.mean() <= 2 * RATE
    state = orjson.loads(orjson.dumps(opened.to_state(), option=orjson.OPT_SERIALIZE_NUMPY))
    q = Profile.from_state(state, v.feature_weights())
    assert q.reopen_share == share and q.threshold_ == opened.threshold_


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, math.nan, True, "0.05", [0.05]])
def test_reopen_share_is_validated(bad: object) -> None:
    with pytest.raises(ParameterError, match="reopen_share"):
        Profile("x", reopen_share=bad)  # type: ignore[arg-type]


def test_reopen_share_auto_resolves_per_model() -> None:
    assert [Profile("x", model=m).reopen_share_ for m in ("rocchio", "kantor", "knn")] == [0.05] * 3
    assert Profile("x", model="fusion").reopen_share_ == 0.05  # since the forty-first session
    assert Profile("x", reopen_share=None).reopen_share_ is None
    assert Profile("x", reopen_share=1).reopen_share_ == 1.0
    assert Profile("x").get_params()["reopen_share"] == "auto"


def test_states_without_reopen_share_read_as_none(data) -> None:
    v, train, _ = data
    p = _profile(v, train, reopen_share=0.05)
    state = orjson.loads(orjson.dumps(p.to_state(), option=orjson.OPT_SERIALIZE_NUMPY))
    assert Profile.from_state(state, v.feature_weights()).reopen_share == 0.05
    del state["params"]["reopen_share"]  # a state written before the parameter
    assert Profile.from_state(state, v.feature_weights()).reopen_share is None
