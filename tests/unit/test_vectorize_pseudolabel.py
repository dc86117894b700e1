"""Vectorizer (log-TF, IDF with unseen terms, normalisation) and pseudolabeling counts."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from sift.filters.errors import ParameterError, StateError
from sift.filters.pseudolabel import Pseudolabeler
from sift.filters.vectorize import STOP_WORDS, Vectorizer, tokenize


def _col(v: Vectorizer, term: str) -> int:
    X = v._hasher.transform([term])  # hashed column of one token
    return int(sp.csr_matrix(X).indices[0])


def test_idf_formula_and_unseen_terms() -> None:
    v = Vectorizer(n_features=2**16, tf="raw", normalize=False).fit(
        ["wheat corn", "wheat oil", "gold"]
    )
    X = v.transform(["wheat zinc"])
    w = dict(zip(X.indices.tolist(), X.data.tolist(), strict=True))
    n = 3
    assert w[_col(v, "wheat")] == pytest.approx(math.log(n + 1) - math.log(2 + 1))
    # a term never seen in training: ln(N+1) - ln(0+1)
    assert w[_col(v, "zinc")] == pytest.approx(math.log(n + 1))


def test_log_tf_and_normalisation() -> None:
    v = Vectorizer(n_features=2**16, idf="none", normalize=False).fit(["a b"])
    X = v.transform(["grain grain grain rice"])
    vals = sorted(X.data.tolist())
    assert vals == pytest.approx([1.0, 1.0 + math.log(3)])
    vn = Vectorizer(n_features=2**16).fit(["grain rice", "oil"])
    Xn = vn.transform(["grain grain grain rice", ""])
    assert float(Xn[0].multiply(Xn[0]).sum()) == pytest.approx(1.0)
    assert Xn[1].nnz == 0


def test_idf_squared_option() -> None:
    v1 = Vectorizer(n_features=2**16, tf="raw", normalize=False).fit(["xx yy", "yy"])
    v2 = Vectorizer(n_features=2**16, tf="raw", idf="idf2", normalize=False).fit(["xx yy", "yy"])
    a = v1.transform(["xx"]).data[0]
    b = v2.transform(["xx"]).data[0]
    assert b == pytest.approx(a * a)


def test_stop_words_keep_content_words() -> None:
    assert "interest" not in STOP_WORDS
    assert tokenize("The interest rate") == ["interest", "rate"]
    v = Vectorizer(n_features=2**10).fit(["interest rates"])
    assert v.transform(["interest"]).nnz == 1


def test_vectorizer_state_round_trip_and_validation() -> None:
    v = Vectorizer(n_features=2**12, ngram_max=2).fit(["wheat exports rose", "oil prices"])
    w = Vectorizer.from_state(v.to_state())
    X1 = v.transform(["wheat prices rose sharply"])
    X2 = w.transform(["wheat prices rose sharply"])
    assert (X1 != X2).nnz == 0
    bad = v.to_state()
    bad["version"] = 99
    with pytest.raises(StateError, match="version"):
        Vectorizer.from_state(bad)
    with pytest.raises(ParameterError, match="tf must be"):
        Vectorizer(tf="bm25")


def test_pseudolabel_counts_exactly_as_designed() -> None:
    n = 100
    scores = np.linspace(1.0, 0.0, n)  # example i has rank i + 1
    labels = np.zeros(n, dtype=np.int8)
    p = Pseudolabeler(max_pos_rank=10, pos_fraction=0.5, pos_weight=0.3,
                      min_neg_rank=61, neg_fraction=0.25, neg_weight=0.7, min_pool=0)
    idx, lab, w = p.select(scores, labels, np.random.default_rng(0))
    pos, neg = idx[lab > 0], idx[lab < 0]
    assert pos.size == 5 and np.all(pos < 10)           # 0.5 * 10 of the top 10
    assert neg.size == 10 and np.all(neg >= 60)         # 0.25 * (100 - 61 + 1) of the bottom 40
    assert np.all(w[lab > 0] == 0.3) and np.all(w[lab < 0] == 0.7)


def test_pseudolabel_never_overwrites_real_labels() -> None:
    n = 20
    scores = np.linspace(1.0, 0.0, n)
    labels = np.zeros(n, dtype=np.int8)
    labels[:3] = -1      # real non-relevant at the top
    labels[-3:] = 1      # real relevant at the bottom
    p = Pseudolabeler(max_pos_rank=5, pos_fraction=1.0, min_neg_rank=16, neg_fraction=1.0, min_pool=0)
    idx, lab, _ = p.select(scores, labels, np.random.default_rng(1))
    assert set(idx.tolist()).isdisjoint({0, 1, 2, 17, 18, 19})
    assert sorted(idx[lab > 0].tolist()) == [3, 4]
    assert sorted(idx[lab < 0].tolist()) == [15, 16]


def test_no_positive_pseudolabels_on_a_small_pool() -> None:
    p = Pseudolabeler(max_pos_rank=10, pos_fraction=0.5, min_neg_rank=1, neg_fraction=0.5, min_pool=200)
    _, lab, _ = p.select(np.linspace(1, 0, 50), np.zeros(50, np.int8), np.random.default_rng(0))
    assert not np.any(lab > 0) and np.sum(lab < 0) == 25


def test_pseudolabel_is_seeded() -> None:
    p = Pseudolabeler(max_pos_rank=50, pos_fraction=0.2, min_neg_rank=51, neg_fraction=0.1)
    s = np.random.default_rng(5).uniform(size=200)
    lab = np.zeros(200, np.int8)
    a = p.select(s, lab, np.random.default_rng(7))
    b = p.select(s, lab, np.random.default_rng(7))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_pseudolabel_parameter_errors() -> None:
    with pytest.raises(ParameterError, match="pos_fraction must be in"):
        Pseudolabeler(pos_fraction=1.5)
    with pytest.raises(ParameterError, match="unknown pseudolabel parameters"):
        Pseudolabeler.from_params({"max_rank": 3})
