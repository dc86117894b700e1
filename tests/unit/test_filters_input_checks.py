"""Input checks of the vectorizers, TROT and Rocchio's switches.

Each case was an input the learning core took silently and turned into something
wrong (a string read as one document per character, NaN vectors, a truthy string
read as True) or into an unhelpful error (a bare StopIteration, a MemoryError).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from sift.filters.errors import FilterError, ParameterError, StateError
from sift.filters.representations import FusionVectorizer
from sift.filters.rocchio import Rocchio
from sift.filters.threshold import scut, trot, trot_with_value, zero_utility_threshold
from sift.filters.vectorize import MAX_FEATURES, Vectorizer

TEXTS = ["wheat crop exports rose", "oil price rise", "gold mine output", "wheat tender egypt",
         "oil output opec", "gold bullion price", "corn crop", "crude oil", "silver mine",
         "wheat harvest"]


def json_round_trip(state: dict[str, Any]) -> Any:
    return json.loads(json.dumps(state))


@pytest.fixture(scope="module")
def vec() -> Vectorizer:
    return Vectorizer(n_features=2**10).fit(TEXTS)


@pytest.fixture(scope="module")
def fvec() -> FusionVectorizer:
    return FusionVectorizer(n_features=2**12, lsa_components=2).fit(TEXTS)


# -- 1. a bare string is not an iterable of documents ----------------------------------

def _calls(v: Vectorizer) -> dict[str, Callable[[Any], Any]]:
    return {"fit": v.fit, "partial_fit": v.partial_fit, "transform": v.transform,
            "transform_counts": v.transform_counts}


@pytest.mark.parametrize("method", ["fit", "partial_fit", "transform", "transform_counts"])
@pytest.mark.parametrize("kw", [{}, {"ngram_max": 2}, {"chars": 0.3}])
def test_vectorizer_refuses_a_bare_string(method: str, kw: dict[str, Any]) -> None:
    v = Vectorizer(n_features=2**10, **kw).fit(TEXTS)
    df, n_docs = v.df_.copy(), v.n_docs_
    call = _calls(v)[method]
    with pytest.raises(ParameterError, match=r"iterable of texts expected, got a str \('wheat prices rose'\)"):
        call("wheat prices rose")
    with pytest.raises(ParameterError, match="iterable of texts expected, got a bytes"):
        call(b"wheat prices rose")
    with pytest.raises(ParameterError, match="iterable of texts expected, got a str"):
        call(np.str_("wheat"))
    with pytest.raises(ParameterError, match="iterable of texts expected, got NoneType"):
        call(None)
    assert v.n_docs_ == n_docs and np.array_equal(v.df_, df)  # nothing learned


@pytest.mark.parametrize("method", ["fit", "partial_fit", "transform"])
def test_fusion_vectorizer_refuses_a_bare_string(fvec: FusionVectorizer, method: str) -> None:
    v = FusionVectorizer.from_state(fvec.to_state())
    call = {"fit": v.fit, "partial_fit": v.partial_fit, "transform": v.transform}[method]
    with pytest.raises(ParameterError, match="iterable of texts expected, got a str"):
        call("wheat prices rose")
    assert v.n_docs_ == fvec.n_docs_ and np.array_equal(v.df_, fvec.df_)


def test_iterables_of_texts_other_than_lists_still_work(vec: Vectorizer) -> None:
    docs = ["wheat prices", "oil output"]
    ref = vec.transform(docs)
    for texts in (tuple(docs), (d for d in docs), np.array(docs), iter(docs)):
        X = vec.transform(texts)
        assert np.array_equal(X.indptr, ref.indptr) and np.array_equal(X.data, ref.data)


# -- 2. FusionVectorizer.from_state checks n_docs and the document frequencies ----------

@pytest.mark.parametrize("bad", [-5, -1, 2.5, "7", None, True, 10**30])
def test_fusion_vectorizer_state_with_a_bad_n_docs_is_a_state_error(fvec: FusionVectorizer,
                                                                    bad: Any) -> None:
    state = json_round_trip(fvec.to_state())
    state["n_docs"] = bad
    with pytest.raises(StateError, match="fusion_vectorizer: n_docs must be a count"):
        FusionVectorizer.from_state(state)


def test_vectorizer_state_n_docs_beyond_what_a_state_carries_is_a_state_error(vec: Vectorizer) -> None:
    state = json_round_trip(vec.to_state())
    state["n_docs"] = 10**30  # (orjson refuses integers beyond 64 bits: to_state could not be written)
    with pytest.raises(StateError, match=r"vectorizer: n_docs must be a count in \[0, 2\*\*62\], got 10+$"):
        Vectorizer.from_state(state)


def test_fusion_vectorizer_state_with_frequencies_above_n_docs_is_a_state_error(
        fvec: FusionVectorizer) -> None:
    state = json_round_trip(fvec.to_state())
    state["n_docs"] = 1  # the frequencies go up to 3
    with pytest.raises(StateError, match=r"document frequencies must be in \[0, n_docs = 1\]"):
        FusionVectorizer.from_state(state)
    del state["n_docs"]
    with pytest.raises(StateError, match="fusion_vectorizer: "):
        FusionVectorizer.from_state(state)


def test_fusion_vectorizer_state_round_trip_stays_exact(fvec: FusionVectorizer) -> None:
    again = FusionVectorizer.from_state(json_round_trip(fvec.to_state()))
    A, B = fvec.transform(TEXTS), again.transform(TEXTS)
    assert np.array_equal(A.toarray(), B.toarray())
    assert again.n_docs_ == fvec.n_docs_ and fvec.fingerprint() == again.fingerprint()
    assert np.array_equal(again.lsa_map_, fvec.lsa_map_)


# -- 3. weigh refuses counts that are no term counts ------------------------------------

@pytest.mark.parametrize("bad", [0.0, -1.0, 0.5, math.nan, math.inf, -math.inf])
def test_weigh_refuses_counts_below_one_or_not_finite(vec: Vectorizer, bad: float) -> None:
    C = sp.csr_matrix((np.array([2.0, bad, 1.0]), np.array([1, 2, 5]), np.array([0, 1, 3])),
                      shape=(2, vec.n_features))
    with pytest.raises(ParameterError, match=r"counts must be finite term counts of at least 1, got "
                                             + repr(float(bad)).replace("(", r"\(")):
        vec.weigh(C)


@pytest.mark.parametrize("kw", [{}, {"idf": "idf2"}, {"normalize": False}, {"tf": "raw"},
                                {"tf": "binary"}, {"chars": 0.3, "char_top": 5}, {"ngram_max": 2}])
def test_weigh_of_valid_counts_gives_transform_bit_for_bit(kw: dict[str, Any]) -> None:
    v = Vectorizer(n_features=2**12, **kw).fit(TEXTS)
    docs = [*TEXTS, "wheat wheat wheat oil", "", "the of and"]
    X, counts = v.transform_counts(docs)
    C = X.copy()
    C.data = counts.copy()
    assert np.array_equal(v.weigh(C).data, X.data)
    C32 = sp.csr_matrix((counts.astype(np.int32), X.indices, X.indptr), shape=X.shape)
    assert np.array_equal(v.weigh(C32).data, X.data)
    W = v.weigh(C, copy=False)  # in place, as the streaming service calls it
    assert np.array_equal(W.data, X.data) and np.array_equal(W.indices, X.indices)


# -- 4. boolean switches take booleans only ---------------------------------------------

@pytest.mark.parametrize("bad", ["no", "false", 1, 0, None, 1.0])
def test_vectorizer_normalize_must_be_a_bool(bad: Any) -> None:
    with pytest.raises(ParameterError, match=r"normalize must be a bool, got " + repr(bad)):
        Vectorizer(n_features=2**10, normalize=bad)
    with pytest.raises(ParameterError, match="normalize must be a bool"):
        FusionVectorizer(n_features=2**10, normalize=bad)


@pytest.mark.parametrize("bad", ["false", "no", 1, None])
def test_rocchio_nonnegative_must_be_a_bool(bad: Any) -> None:
    with pytest.raises(ParameterError, match=r"nonnegative must be a bool, got " + repr(bad)):
        Rocchio(nonnegative=bad)


def test_numpy_bools_are_taken_as_python_bools(vec: Vectorizer) -> None:
    v = Vectorizer(n_features=2**10, normalize=np.bool_(False)).fit(TEXTS)
    assert v.normalize is False
    ref = Vectorizer(n_features=2**10, normalize=False).fit(TEXTS)
    assert v.fingerprint() == ref.fingerprint()
    json.dumps(v.to_state())
    r = Rocchio(nonnegative=np.bool_(False))
    assert r.nonnegative is False and r.get_params() == Rocchio(nonnegative=False).get_params()


@pytest.mark.parametrize("bad", [None, "no", 0])
def test_vectorizer_state_with_a_non_bool_normalize_is_a_state_error(vec: Vectorizer, bad: Any) -> None:
    state = json_round_trip(vec.to_state())
    state["params"]["normalize"] = bad
    with pytest.raises(StateError, match="vectorizer: normalize must be a bool"):
        Vectorizer.from_state(state)


# -- 5. an empty batch with word bigrams ------------------------------------------------

def test_bigram_vectorizer_fits_and_transforms_no_documents() -> None:
    words = Vectorizer(n_features=2**10).fit([])
    v = Vectorizer(n_features=2**10, ngram_max=2).fit([])
    assert v.n_docs_ == words.n_docs_ == 0
    assert np.array_equal(v.df_, words.df_) and np.array_equal(v.idf_, words.idf_)
    v.partial_fit(iter([]))
    assert v.n_docs_ == 0
    X = v.transform([])
    assert X.shape == (0, 2**10) and X.nnz == 0 and X.dtype == np.float64
    v.fit(TEXTS)
    X, counts = v.transform_counts([])
    assert X.shape == (0, 2**10) and counts.size == 0
    assert v.weigh(X).shape == (0, 2**10)


def test_fusion_vectorizer_fits_and_transforms_no_documents() -> None:
    v = FusionVectorizer(n_features=2**10, lsa_components=2).fit([])
    assert v.n_docs_ == 0 and not v.df_.any()
    assert v.transform([]).shape == (0, 2**10)
    v.fit(TEXTS).partial_fit([])
    assert v.n_docs_ == len(TEXTS)


# -- 6. a state's width is checked before anything of that width is allocated -----------

@pytest.mark.parametrize("width", [2**40, 2**31, MAX_FEATURES + 1])
def test_vectorizer_state_too_wide_is_a_state_error(vec: Vectorizer, width: int) -> None:
    state = json_round_trip(vec.to_state())
    state["params"]["n_features"] = width
    with pytest.raises(StateError, match=r"vectorizer: params\.n_features must be an integer of at most 2\*\*31 - 1"):
        Vectorizer.from_state(state)


def test_fusion_vectorizer_state_too_wide_is_a_state_error(fvec: FusionVectorizer) -> None:
    state = json_round_trip(fvec.to_state())
    state["params"]["n_features"] = 2**40
    with pytest.raises(StateError, match=r"fusion_vectorizer: params\.n_features .* 2\*\*31 - 1"):
        FusionVectorizer.from_state(state)


@pytest.mark.parametrize("bad", ["1024", 1024.0, None, [1024]])
def test_vectorizer_state_with_a_width_of_another_type_is_a_state_error(vec: Vectorizer, bad: Any) -> None:
    state = json_round_trip(vec.to_state())
    state["params"]["n_features"] = bad
    with pytest.raises(StateError, match=r"vectorizer: params\.n_features must be an integer"):
        Vectorizer.from_state(state)


def test_vectorizer_wider_than_the_bound_is_a_parameter_error() -> None:
    with pytest.raises(ParameterError, match=r"n_features must be an integer in \[2, 2\*\*31 - 1\], got 1099511627776"):
        Vectorizer(n_features=2**40)


# -- 7. messages that name the parameter; numpy integers ------------------------------

@pytest.mark.parametrize("bad", [None, 5, [1, 2], ["wheat", 3], b"none", "english"])
def test_stop_words_of_another_kind_is_a_parameter_error(bad: Any) -> None:
    with pytest.raises(ParameterError, match=r"stop_words must be 'default', 'none' \(no stop words\) or an "
                                             r"iterable of strings, got "):
        Vectorizer(n_features=2**10, stop_words=bad)


def test_stop_words_iterables_of_strings_still_work() -> None:
    for words in (["wheat", "rose"], ("wheat", "rose"), {"wheat", "rose"}, frozenset(["wheat", "rose"])):
        # (idf "none": unfitted, an IDF vectorizer refuses to transform since the
        # forty-sixth session; its vectors were explicit zeros)
        v = Vectorizer(n_features=2**10, stop_words=words, idf="none")
        assert v.transform(["wheat rose oil"]).nnz == 1


@pytest.mark.parametrize("width", [np.int64(1024), np.int32(1024), np.uint16(1024)])
def test_numpy_integer_widths_are_accepted(width: Any) -> None:
    v = Vectorizer(n_features=width).fit(TEXTS)
    ref = Vectorizer(n_features=1024).fit(TEXTS)
    assert type(v.n_features) is int and v.n_features == 1024
    assert v.fingerprint() == ref.fingerprint()
    assert np.array_equal(v.transform(TEXTS).toarray(), ref.transform(TEXTS).toarray())
    json.dumps(v.to_state())
    f = FusionVectorizer(n_features=width * 4, lsa_components=0)
    assert type(f.n_features) is int and f.n_features == 4096


@pytest.mark.parametrize("bad", [True, np.bool_(True), 1024.0, "1024"])
def test_widths_that_are_no_integers_are_refused(bad: Any) -> None:
    with pytest.raises(ParameterError, match="n_features must be an integer"):
        Vectorizer(n_features=bad)
    with pytest.raises(ParameterError, match="n_features must be an integer"):
        FusionVectorizer(n_features=bad)


# -- 8. TROT's weights and start --------------------------------------------------------

_SCORES, _LABELS = [0.9, 0.5, 0.3], [1, -1, 1]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -1.0, -1e-300])
def test_trot_refuses_weights_that_are_negative_or_not_finite(bad: float) -> None:
    weights = [1.0, bad, 1.0]
    match = r"weights must be finite and non-negative, got " + repr(float(bad))
    with pytest.raises(FilterError, match=match):
        trot(_SCORES, _LABELS, weights, measure="t11u")
    with pytest.raises(FilterError, match=match):
        trot_with_value(_SCORES, _LABELS, weights, measure="t11u")
    with pytest.raises(FilterError, match=match):
        scut(_SCORES, _LABELS, weights)
    with pytest.raises(FilterError, match=match):
        zero_utility_threshold(_SCORES, _LABELS, weights, start=0.9)


def test_trot_weight_zero_leaves_an_example_out() -> None:
    assert trot_with_value([0.9, 0.5, 0.3], [1, -1, 1], [1.0, 0.0, 1.0], measure="t11u") == \
        trot_with_value([0.9, 0.3], [1, 1], measure="t11u")
    assert zero_utility_threshold([0.9, 0.5, 0.3], [1, -1, 1], [1.0, 0.0, 1.0], start=0.9) == 0.3


def test_zero_utility_threshold_refuses_a_nan_start() -> None:
    with pytest.raises(FilterError, match=r"start must be a number \(or an infinity\), got nan"):
        zero_utility_threshold(_SCORES, _LABELS, start=math.nan)
    with pytest.raises(FilterError, match="start must be a number"):
        zero_utility_threshold(_SCORES, _LABELS, start="0.5")  # type: ignore[arg-type]
    assert zero_utility_threshold(_SCORES, _LABELS, start=math.inf) == math.inf  # as before
    assert zero_utility_threshold(_SCORES, _LABELS, start=np.float32(0.9)) == 0.3
