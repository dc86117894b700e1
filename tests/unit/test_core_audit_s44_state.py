"""Audit 44 (learning core), findings 4, 9 and 10: states, example sets and measures
refuse what learning refuses.

A state with a column stored twice in a row, or with values and weights beyond what
learning accepts, loaded and then gave another threshold or failed half-way through the
next judgment; ``ExampleSet.add`` took weights, labels and flags its own ``from_state``
refuses; decoding took ``True`` for version 1 and ``"24"`` for the shape ``(2, 4)``.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import orjson
import pytest
import scipy.sparse as sp

from sift.filters.accumulator import SparseAccumulator
from sift.filters.base import MAX_WEIGHT
from sift.filters.errors import FilterError, ParameterError, StateError
from sift.filters.examples import ExampleSet
from sift.filters.measures import contingency, get_measure, t11su
from sift.filters.state import (
    STATE_VERSION,
    check_version,
    decode_array,
    decode_csr,
    decode_csr_parts,
    encode_array,
    encode_csr,
)


def _raw_csr(data: list[float], indices: list[int], indptr: list[int], shape: Any) -> dict[str, Any]:
    """An encoded CSR matrix written as given (``encode_csr`` would canonicalise it)."""
    return {"shape": shape, "data": encode_array(np.array(data, np.float64)),
            "indices": encode_array(np.array(indices, np.int32)),
            "indptr": encode_array(np.array(indptr, np.int64))}


def _example_set() -> ExampleSet:
    ex = ExampleSet(None, 4)
    ex.add(sp.csr_matrix(np.array([[1.0, 0, 2.0, 0], [0, 3.0, 0, 0]])), [1, -1], [1.0, 0.5], [True, False])
    return ex


def _state(ex: ExampleSet) -> dict[str, Any]:
    return dict(orjson.loads(orjson.dumps(ex.to_state())))


# -- finding 4: corrupt states ----------------------------------------------------------
@pytest.mark.parametrize("indices", [[2, 2, 0], [2, 1, 0]], ids=["duplicate", "unsorted"])
def test_decode_csr_refuses_columns_not_strictly_increasing_in_a_row(indices: list[int]) -> None:
    obj = _raw_csr([1.0, 2.0, 3.0], indices, [0, 2, 3], [2, 4])
    with pytest.raises(StateError, match=r"m\.indices: .*strictly increasing.*row 0"):
        decode_csr_parts(obj, name="m")


def test_decode_csr_still_takes_rows_that_start_lower_than_the_last_ended() -> None:
    # the columns restart at every row: only entries within a row are compared
    obj = _raw_csr([1.0, 2.0, 3.0, 4.0], [1, 3, 0, 2], [0, 2, 2, 4], [3, 4])
    X = decode_csr(obj)
    assert X.toarray().tolist() == [[0, 1.0, 0, 2.0], [0, 0, 0, 0], [3.0, 0, 4.0, 0]]


def test_encode_csr_writes_each_column_once_so_its_output_decodes() -> None:
    X = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([2, 2, 0]), np.array([0, 2, 3])), shape=(2, 4))
    before = (X.data.copy(), X.indices.copy())
    enc = encode_csr(X)
    assert decode_array(enc["indices"]).tolist() == [2, 0] and decode_array(enc["data"]).tolist() == [3.0, 3.0]
    Y = decode_csr(enc)
    assert Y.toarray().tolist() == X.toarray().tolist() == [[0, 0, 3.0, 0], [3.0, 0, 0, 0]]
    assert np.array_equal(X.data, before[0]) and np.array_equal(X.indices, before[1])  # not changed


def test_example_set_state_with_a_duplicate_column_is_refused() -> None:
    st = _state(_example_set())
    st["X"] = _raw_csr([0.5, 0.5, 2.0, 3.0], [0, 0, 2, 1], [0, 3, 4], [2, 4])
    with pytest.raises(StateError, match=r"examples\.X\.indices"):
        ExampleSet.from_state(st)


def test_example_set_state_refuses_values_beyond_max_value() -> None:
    st = _state(_example_set())
    st["X"] = _raw_csr([1.0, 2e200, 3.0], [0, 2, 1], [0, 2, 3], [2, 4])
    with pytest.raises(StateError, match=r"examples\.X.*1e\+06.*2e\+200"):
        ExampleSet.from_state(st)
    st["X"] = _raw_csr([1.0, -MAX_WEIGHT, 3.0], [0, 2, 1], [0, 2, 3], [2, 4])
    assert ExampleSet.from_state(st).X.data.tolist() == [1.0, -MAX_WEIGHT, 3.0]  # the bound itself


def test_example_set_state_refuses_weights_beyond_max_value() -> None:
    st = _state(_example_set())
    st["weights"] = encode_array(np.array([1e300, 1.0]))
    with pytest.raises(StateError, match=r"examples\.weights.*1e\+06.*1e\+300"):
        ExampleSet.from_state(st)
    st["weights"] = encode_array(np.array([MAX_WEIGHT, 1.0]))
    assert ExampleSet.from_state(st).weights.tolist() == [MAX_WEIGHT, 1.0]


def test_example_set_state_round_trip_is_unchanged() -> None:
    ex = _example_set()
    back = ExampleSet.from_state(_state(ex))
    assert (back.X != ex.X).nnz == 0 and back.X.shape == ex.X.shape
    for field in ("labels", "weights", "real", "seq"):
        assert np.array_equal(getattr(back, field), getattr(ex, field))
        assert getattr(back, field).dtype == getattr(ex, field).dtype
    assert (back.next_seq, back.n_evicted, back.n_features, back.capacity) == (2, 0, 4, None)


# -- finding 9: ExampleSet.add ----------------------------------------------------------
X2 = sp.csr_matrix(np.eye(2, 4))


def _add(**kw: Any) -> ExampleSet:
    ex = ExampleSet(None, 4)
    args: dict[str, Any] = {"X": X2, "labels": [1, -1], "weights": [1.0, 1.0], "real": [True, True]}
    args.update(kw)
    ex.add(args["X"], args["labels"], args["weights"], args["real"])
    return ex


@pytest.mark.parametrize("labels", [[1.7, -1], np.array([257, -1]), ["1", "-1"], [0, 1], [True, True],
                                    np.array([1, -1], dtype=object)],
                         ids=["1.7", "257", "strings", "zero", "booleans", "objects"])
def test_add_refuses_labels_other_than_plus_or_minus_one(labels: Any) -> None:
    ex = ExampleSet(None, 4)
    with pytest.raises(ParameterError, match="labels must be"):
        ex.add(X2, labels, [1.0, 1.0], [True, True])
    assert len(ex) == 0 and ex.next_seq == 0


@pytest.mark.parametrize("weights", [[0.0, 1.0], [-1.0, 1.0], [np.nan, 1.0], [np.inf, 1.0],
                                    [1e300, 1.0], ["1", "1"], [True, True]],
                         ids=["zero", "negative", "nan", "inf", "huge", "strings", "booleans"])
def test_add_refuses_weights_outside_zero_to_max_value(weights: Any) -> None:
    ex = ExampleSet(None, 4)
    with pytest.raises(ParameterError, match="weights must be"):
        ex.add(X2, [1, -1], weights, [True, True])
    assert len(ex) == 0 and ex.next_seq == 0


@pytest.mark.parametrize("real", [["no", "yes"], [1.0, 0.0], [1, 0]], ids=["strings", "floats", "ints"])
def test_add_refuses_real_flags_that_are_not_booleans(real: Any) -> None:
    ex = ExampleSet(None, 4)
    with pytest.raises(ParameterError, match="real must be"):
        ex.add(X2, [1, -1], [1.0, 1.0], real)
    assert len(ex) == 0


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, 2e6], ids=["nan", "inf", "-inf", "huge"])
def test_add_refuses_matrix_values_not_finite_or_beyond_max_value(value: float) -> None:
    ex = ExampleSet(None, 4)
    with pytest.raises(ParameterError, match="X must hold finite values"):
        ex.add(sp.csr_matrix(np.array([[value, 0, 0, 0], [0, 1.0, 0, 0]])), [1, -1], [1.0, 1.0],
               [True, True])
    assert len(ex) == 0


def test_add_refuses_another_width_and_a_count_mismatch() -> None:
    ex = ExampleSet(None, 4)
    with pytest.raises(ParameterError, match="X must have 4 columns, got 3"):
        ex.add(sp.csr_matrix(np.eye(2, 3)), [1, -1], [1.0, 1.0], [True, True])
    with pytest.raises(ParameterError, match="got 2 rows but 1 labels"):
        ex.add(X2, [1], [1.0, 1.0], [True, True])


def test_add_accepts_what_it_accepted_before() -> None:
    # int8, int64 and float labels of exactly +-1; weights of exactly MAX_VALUE; no rows at all
    for labels in (np.array([1, -1], np.int8), np.array([1, -1]), np.array([1.0, -1.0])):
        assert _add(labels=labels).labels.tolist() == [1, -1]
    assert _add(weights=[MAX_WEIGHT, 1e-300]).weights.tolist() == [MAX_WEIGHT, 1e-300]
    ex = ExampleSet(None, 4)
    assert ex.add(sp.csr_matrix((0, 4)), [], [], []) == 0 and len(ex) == 0


def test_add_stores_a_column_stored_twice_once() -> None:
    # as Profile does: otherwise the set would hold what its own from_state refuses
    X = sp.csr_matrix((np.array([0.5, 0.5, 1.0]), np.array([2, 2, 1]), np.array([0, 2, 3])), shape=(2, 4))
    ex = _add(X=X)
    assert ex.X.indices.tolist() == [2, 1] and ex.X.data.tolist() == [1.0, 1.0]
    assert X.indices.tolist() == [2, 2, 1]  # the caller's matrix not changed
    back = ExampleSet.from_state(_state(ex))
    assert back.X.toarray().tolist() == ex.X.toarray().tolist()


def test_a_set_add_accepted_round_trips() -> None:
    ex = _add(weights=[MAX_WEIGHT, 0.1], X=sp.csr_matrix(np.array([[-MAX_WEIGHT, 0, 0, 0], [0, 1.0, 0, 0]])))
    back = ExampleSet.from_state(_state(ex))
    assert back.weights.tolist() == [MAX_WEIGHT, 0.1] and back.X.data.tolist() == [-MAX_WEIGHT, 1.0]


@pytest.mark.parametrize("n_features", [-3, 0, "4", 4.0, 4.9, True, None],
                         ids=["negative", "zero", "string", "float", "4.9", "bool", "none"])
def test_example_set_refuses_n_features_that_is_not_a_positive_int(n_features: Any) -> None:
    with pytest.raises(ParameterError, match=r"n_features must be a positive integer, got"):
        ExampleSet(None, n_features)


def test_example_set_takes_numpy_integers_and_refuses_a_boolean_capacity() -> None:
    ex = ExampleSet(np.int64(3), np.int64(4))
    assert type(ex.n_features) is int and ex.n_features == 4
    assert type(ex.capacity) is int and ex.capacity == 3
    with pytest.raises(ParameterError, match="capacity must be"):
        ExampleSet(True, 4)


# -- finding 10 item 6: lax decoding ----------------------------------------------------
@pytest.mark.parametrize("version", [True, 1.0, "1", None], ids=["true", "1.0", "string", "none"])
def test_check_version_refuses_a_version_that_is_not_the_integer(version: Any) -> None:
    assert check_version({"kind": "profile", "version": STATE_VERSION}, "profile")["version"] == 1
    with pytest.raises(StateError, match="version"):
        check_version({"kind": "profile", "version": version}, "profile")


@pytest.mark.parametrize("shape", ["24", [2.7, 4.2], [2.0, 4.0], [True, 4], [2], [2, 4, 1], [-1, 4],
                                   {"a": 2, "b": 4}],
                         ids=["string", "floats", "integral floats", "bool", "one", "three", "negative",
                              "dict"])
def test_decode_csr_refuses_a_shape_that_is_not_two_non_negative_ints(shape: Any) -> None:
    obj = _raw_csr([1.0, 1.0], [0, 1], [0, 1, 2], shape)
    with pytest.raises(StateError, match=r"m: shape must be two dimensions in \[0, 2\*\*31\) \(integers\), got"):
        decode_csr_parts(obj, name="m")


def test_decode_csr_takes_a_tuple_shape() -> None:
    shape, *_ = decode_csr_parts(_raw_csr([1.0, 1.0], [0, 1], [0, 1, 2], (2, 4)))
    assert shape == (2, 4)


@pytest.mark.parametrize("n_features", ["4", 4.9, 4.0, True], ids=["string", "4.9", "4.0", "bool"])
def test_example_set_state_refuses_n_features_that_is_not_an_int(n_features: Any) -> None:
    st = _state(_example_set())
    st["n_features"] = n_features
    with pytest.raises(StateError, match=r"examples: n_features must be a positive integer"):
        ExampleSet.from_state(st)


def test_example_set_state_refuses_a_boolean_capacity() -> None:
    st = _state(_example_set())
    st["capacity"] = True
    with pytest.raises(StateError, match=r"examples: capacity must be"):
        ExampleSet.from_state(st)


def test_accumulator_state_errors_are_state_errors() -> None:
    acc = SparseAccumulator(2)
    acc.add(0, np.array([7, 3]), np.array([1.0, 2.0]))
    good = acc.to_state()
    back = SparseAccumulator.from_state(copy.deepcopy(good), 2)
    assert back.features.tolist() == [3, 7] and back.sums.tolist() == acc.sums[:, acc.order].tolist()
    with pytest.raises(StateError, match=r"accumulator: .*'sums'"):
        SparseAccumulator.from_state({"features": good["features"]}, 2)
    for bad in ([good["features"], good["sums"]], None, "state"):
        with pytest.raises(StateError, match=r"accumulator: state must be an object, got"):
            SparseAccumulator.from_state(bad, 2)  # type: ignore[arg-type]


# -- finding 10 items 1-3: measures -----------------------------------------------------
def test_t11su_without_relevant_documents_is_documented_and_unchanged() -> None:
    # TREC leaves it undefined; sift scores it as answering No, whatever is delivered
    assert t11su(0, 5, 0, 10) == t11su(0, 0, 0, 10) == 1 / 3
    assert t11su.__doc__ is not None and "a + c = 0" in t11su.__doc__
    import sift.filters.measures as measures

    assert measures.__doc__ is not None and "undefined" in measures.__doc__


def test_contingency_refuses_arrays_of_different_lengths() -> None:
    with pytest.raises(ParameterError, match=r"delivered.*relevant.*3.*1"):
        contingency(np.array([True, False, True]), np.array([True]))
    with pytest.raises(ParameterError, match=r"3.*2"):
        contingency(np.array([True, False, True]), np.array([True, False]))
    assert contingency(np.array([True, False]), np.array([True, True])) == (1.0, 0.0, 1.0, 0.0)


def test_get_measure_of_a_list_raises_parameter_error() -> None:
    with pytest.raises(ParameterError, match=r"measure must be one of .*got \['t11su'\]"):
        get_measure(["t11su"])  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"got None"):
        get_measure(None)  # type: ignore[arg-type]
    assert get_measure("t11su") is t11su


@pytest.mark.parametrize("min_nu", [1.0, 2.0, np.nan, np.inf, -np.inf, True, "0"],
                         ids=["1", "2", "nan", "inf", "-inf", "bool", "string"])
def test_t11su_refuses_min_nu_of_one_or_more_or_not_finite(min_nu: Any) -> None:
    with pytest.raises(ParameterError, match=r"min_nu must be a finite number < 1, got"):
        t11su(1.0, 0.0, 1.0, 1.0, min_nu=min_nu)


def test_t11su_with_a_valid_min_nu_is_unchanged() -> None:
    assert t11su(2.0, 1.0, 1.0, 10.0, min_nu=0.0) == 0.5
    assert t11su(2.0, 1.0, 1.0, 10.0, min_nu=np.float64(-0.5)) == t11su(2.0, 1.0, 1.0, 10.0)
    out = t11su(np.array([0.0, 2.0]), np.array([5.0, 1.0]), np.array([0.0, 1.0]), np.zeros(2))
    assert out.tolist() == [1 / 3, (0.5 + 0.5) / 1.5]


def test_errors_are_filter_errors() -> None:
    assert issubclass(ParameterError, FilterError) and issubclass(StateError, FilterError)
