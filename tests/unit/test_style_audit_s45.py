"""The forty-fifth session's style audit: errors of the package's own kind, naming the
parameter and the value, for inputs that used to pass silently or raise foreign errors."""

from __future__ import annotations

import numpy as np
import pytest

from sift.errors import ConfigError, SiftError
from sift.filters.errors import FilterError, ParameterError
from sift.filters.profile import Profile
from sift.filters.rocchio import Rocchio
from sift.filters.screening.errors import ScreeningError
from sift.filters.vectorize import Vectorizer
from sift.settings import Settings

TEXTS = ["wheat crop harvest", "oil prices rise", "wheat exports fall", "oil field output"]


def _fit(labels: object) -> Profile:
    vec = Vectorizer().fit(TEXTS)
    p = Profile("wheat", query="wheat")
    p.fit(vec.transform(["wheat"]), vec.transform(TEXTS), labels=labels)
    return p


@pytest.mark.parametrize(("labels", "shown"), [
    ([0.7, 0, 1, 0], "got 0.7 at row 0"),  # the cast made it 0: the row silently unknown
    ([1, 0, 1.9, 0], "got 1.9 at row 2"),  # ... and this one 1
    ([1, 0, 257, 0], "got 257 at row 2"),  # int8 wraps 257 to 1
    ([1, 0, 1000, 0], "got 1000 at row 2"),  # OverflowError before
    (["1", "0", "1", "0"], "<U1 values"),  # a bare ValueError before
    ([True, False, True, False], "bool values"),
])
def test_fit_refuses_labels_other_than_1_minus_1_and_0(labels: object, shown: str) -> None:
    with pytest.raises(FilterError, match=r"labels must be 1, -1 or 0 \(unknown\), got ") as info:
        _fit(labels)
    assert shown in str(info.value)


def test_fit_takes_whole_labels_of_any_numeric_type() -> None:
    a, b = _fit([1, -1, 0, 0]), _fit(np.array([1.0, -1.0, 0.0, 0.0]))
    assert a.examples_.labels.tolist() == b.examples_.labels.tolist()
    assert a.threshold_ == b.threshold_


def test_fit_names_the_positive_out_of_range() -> None:
    vec = Vectorizer().fit(TEXTS)
    with pytest.raises(FilterError, match=r"rows of the training matrix \(0\.\.3\), got 9"):
        Profile("wheat", query="wheat").fit(vec.transform(["wheat"]), vec.transform(TEXTS),
                                           positives=[0, 9])


@pytest.mark.parametrize("value", [10**30, 10**400, -(10**400)], ids=["1e30", "1e400", "-1e400"])
def test_huge_integers_are_refused_as_parameters(value: int) -> None:
    # np.isfinite raised TypeError on integers beyond 64 bits
    with pytest.raises(ParameterError, match="alpha must be a finite number"):
        Rocchio(alpha=value)


def test_screening_and_fusion_errors_are_filter_errors() -> None:
    # one `except FilterError` catches whatever the learning core refuses
    from sift.filters.fusion import FusionError

    for error in (ScreeningError, FusionError):
        assert issubclass(error, FilterError)
        assert issubclass(error, ValueError) and issubclass(error, SiftError)


def test_settings_says_whether_a_variable_was_set() -> None:
    assert Settings.is_set("broker", {"SIFT_BROKER": ""})
    assert not Settings.is_set("broker", {"BROKER": "x", "SIFT_BROKERS": "y"})
    with pytest.raises(ConfigError, match="no setting named 'brokers'"):
        Settings.is_set("brokers", {})


def test_vectorizer_get_params_has_every_hyperparameter() -> None:
    import inspect

    v = Vectorizer(2**12, tf="raw", truncate=5, chars=0.2, char_ngrams=(2, 4), char_top=50,
                   stop_words=["wheat"])
    got = v.get_params()
    assert set(got) == set(inspect.signature(Vectorizer).parameters)
    assert got["truncate"] == 5 and got["char_ngrams"] == (2, 4) and got["stop_words"] == ["wheat"]
    copy = Vectorizer(**got).fit(TEXTS)
    assert (copy.transform(TEXTS) != v.fit(TEXTS).transform(TEXTS)).nnz == 0
    # params() (the state's) leaves the later options out at their defaults; get_params does not
    assert "truncate" not in Vectorizer().params() and Vectorizer().get_params()["truncate"] is None


def test_a_stack_names_the_model_it_cannot_take() -> None:
    from sift.filters.kantor import Kantor, KantorStack
    from sift.filters.knn import KNN, KNNStack
    from sift.filters.rocchio import LinearStack

    for stack, model, other in ((LinearStack, "Rocchio", Kantor()), (KantorStack, "Kantor", KNN()),
                                (KNNStack, "kNN", Rocchio())):
        with pytest.raises(ParameterError, match=f"takes {model} models only, got "
                                                 f"{type(other).__name__}"):
            stack([other])


@pytest.mark.parametrize(("labels", "shown"), [([1, 0, 0.7], "0.7"), ([1, 0, 2], "2"),
                                               (["1", "0", "0"], "<U1")])
def test_simulate_refuses_labels_other_than_0_and_1(labels: list[object], shown: str) -> None:
    from sift.filters.screening.simulation import simulate

    # 0.7 was truncated to 0 and 2 counted twice among the relevant
    with pytest.raises(ScreeningError, match=f"labels must be 0 or 1, got .*{shown}"):
        simulate(["a", "b", "c"], ["x y", "y z", "z w"], labels, topic=None, seed=0)


def test_get_params_rebuilds_an_unfitted_copy() -> None:
    import inspect

    from sift.filters.bagging import BaggedProfile
    from sift.filters.fusion import DissimilarityFusion, SingletonRanker
    from sift.filters.representations import FusionVectorizer, TextRepresentations

    made = [DissimilarityFusion(objective="meanrank", time_limit=2.0, method="sweep", seed=3),
            SingletonRanker(objective="mrr", seed=4),
            TextRepresentations(names=["word", "lsa"], lsa_components=7, min_df=2, seed=5),
            FusionVectorizer(2**12, char_weight=0.25, char_top=50, lsa_components=9, seed=6),
            BaggedProfile([Profile("a", query="a"), Profile("a", query="a", seed=1)],
                          rule="vote")]
    for obj in made:
        params = obj.get_params()
        assert set(params) == set(inspect.signature(type(obj)).parameters), type(obj).__name__
        copy = type(obj)(**params)
        assert copy.get_params() == params, type(obj).__name__
    assert made[0].get_params()["time_limit"] == 2.0 and made[4].get_params()["rule"] == "vote"
