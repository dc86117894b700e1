"""Vectorizer (log-TF, IDF with unseen terms, normalisation) and pseudolabeling counts."""

import gzip
import itertools
import json
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.feature_extraction.text import HashingVectorizer

import sift.filters.vectorize as vectorize_module
from sift.filters.errors import ParameterError, StateError
from sift.filters.pseudolabel import Pseudolabeler
from sift.filters.vectorize import STOP_WORDS, Vectorizer, normalize_rows, tokenize

REUTERS = Path(__file__).resolve().parents[2] / "data" / "reuters21578"


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
    bad = v.to_state()
    del bad["version"]
    with pytest.raises(StateError, match="vectorizer state version None is not"):
        Vectorizer.from_state(bad)
    bad = {**v.to_state(), "kind": "profile"}
    with pytest.raises(StateError, match="expected vectorizer state, got kind 'profile'"):
        Vectorizer.from_state(bad)
    with pytest.raises(ParameterError, match="tf must be"):
        Vectorizer(tf="bm25")


def test_truncation_keeps_the_first_characters_of_each_token() -> None:
    """``truncate`` cuts every token (not stop words, which are removed whole first) to
    its first characters, counting characters, not bytes; the state keeps it."""
    v = Vectorizer(n_features=2**16, truncate=6).fit(["exports rose", "Zürichsee naïveté"])
    whole = Vectorizer(n_features=2**16).fit(["export rose", "zürich naïvet"])
    X = v.transform(["Exports exported the exporting Zürichsee naïveté"])
    assert X.nnz == 3  # export, zürich, naïvet
    np.testing.assert_array_equal(X.indices, whole.transform(["export zürich naïvet"]).indices)
    assert Vectorizer.from_state(v.to_state()).truncate == 6
    assert "truncate" not in Vectorizer().to_state()["params"]  # older states unchanged
    for bad in (0, -1, 2.5, True, "6"):
        with pytest.raises(ParameterError, match="truncate must be None or an integer >= 1"):
            Vectorizer(truncate=bad)  # type: ignore[arg-type]


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


def test_positive_pseudolabels_from_a_pool_of_exactly_min_pool() -> None:
    """``min_pool`` is the least pool that gets pseudo-positives: 20 ranked examples give
    round(0.5 * 10) = 5 of the top 10, 19 give none."""
    p = Pseudolabeler(max_pos_rank=10, pos_fraction=0.5, min_pool=20)
    idx, lab, _ = p.select(np.linspace(1, 0, 20), np.zeros(20, np.int8), np.random.default_rng(0))
    assert np.sum(lab > 0) == 5 and np.all(idx[lab > 0] < 10)
    _, lab, _ = p.select(np.linspace(1, 0, 19), np.zeros(19, np.int8), np.random.default_rng(0))
    assert lab.size == 0


def test_real_labels_in_the_top_ranks_use_up_part_of_the_positive_quota() -> None:
    """The quota, round(0.5 * 4) = 2, is drawn from the top 4 by the smallest random keys
    (``rng.random(n)``, one per example in example order, as the module doc says); a drawn
    example with a real label is skipped, not replaced by another."""
    n = 10
    scores = np.arange(n, dtype=float)[::-1]  # example i has rank i + 1
    labels = np.zeros(n, np.int8)
    labels[:2] = 1  # ranks 1 and 2 are real positives
    p = Pseudolabeler(max_pos_rank=4, pos_fraction=0.5, min_pool=0)
    counts = set()
    for seed in range(30):
        idx, lab, w = p.select(scores, labels, np.random.default_rng(seed))
        key = np.random.default_rng(seed).random(n)
        drawn = sorted(range(4), key=lambda i: key[i])[:2]  # the two smallest keys of the top 4
        expected = sorted(i for i in drawn if labels[i] == 0)
        assert sorted(idx[lab > 0].tolist()) == expected and np.all(w == 1.0)
        counts.add(len(expected))
    assert counts == {0, 1, 2}  # the seeds cover all three cases


def test_pseudolabel_is_seeded() -> None:
    p = Pseudolabeler(max_pos_rank=50, pos_fraction=0.2, min_neg_rank=51, neg_fraction=0.1)
    s = np.random.default_rng(5).uniform(size=200)
    lab = np.zeros(200, np.int8)
    a = p.select(s, lab, np.random.default_rng(7))
    b = p.select(s, lab, np.random.default_rng(7))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_profiles_with_one_seed_share_their_pseudo_negatives() -> None:
    """Picks go by one random key per example: two rankings of the same examples, with
    one seed, draw the same sample from the same rank range (so stacked kNN profiles
    share one sample); the positives still come from each ranking's own top."""
    p = Pseudolabeler(max_pos_rank=10, pos_fraction=0.3, min_neg_rank=1, neg_fraction=0.2, min_pool=0)
    gen = np.random.default_rng(3)
    s1, s2 = gen.uniform(size=500), gen.uniform(size=500)
    lab = np.zeros(500, np.int8)
    i1, l1, _ = p.select(s1, lab, np.random.default_rng(0))
    i2, l2, _ = p.select(s2, lab, np.random.default_rng(0))
    top1, top2 = set(np.argsort(-s1)[:10].tolist()), set(np.argsort(-s2)[:10].tolist())
    assert set(i1[l1 > 0].tolist()) <= top1 and set(i2[l2 > 0].tolist()) <= top2
    neg1, neg2 = set(i1[l1 < 0].tolist()), set(i2[l2 < 0].tolist())
    # one sample of 100, less the examples each ranking's positives took from it
    assert 97 <= len(neg1) <= 100 and 97 <= len(neg2) <= 100
    assert len(neg1 & neg2) >= 100 - 6
    assert neg1 - neg2 <= set(i2[l2 > 0].tolist()) and neg2 - neg1 <= set(i1[l1 > 0].tolist())
    # another seed, another sample
    i3, l3, _ = p.select(s1, lab, np.random.default_rng(1))
    assert set(i3[l3 < 0].tolist()) != neg1


def test_pseudolabel_samples_are_uniform() -> None:
    """Every example of the rank range is picked about equally often (a uniformly random
    subset, as the design asks): 4,000 seeded draws of 10 of the bottom 50."""
    p = Pseudolabeler(max_pos_rank=0, min_neg_rank=51, neg_fraction=0.2, min_pool=0)
    s = np.linspace(1.0, 0.0, 100)
    counts = np.zeros(100)
    for seed in range(4000):
        idx, _, _ = p.select(s, np.zeros(100, np.int8), np.random.default_rng(seed))
        counts[idx] += 1
    assert counts[:50].sum() == 0 and counts.sum() == 40_000
    # expected 800 per example, binomial sd ~25: 6 sd either way
    assert counts[50:].min() > 650 and counts[50:].max() < 950


def test_pseudolabel_parameter_errors() -> None:
    with pytest.raises(ParameterError, match="pos_fraction must be in"):
        Pseudolabeler(pos_fraction=1.5)
    with pytest.raises(ParameterError, match="unknown pseudolabel parameters"):
        Pseudolabeler.from_params({"max_rank": 3})


# -- the batch tokenizer/hasher against the straightforward implementation ------------
# Vectorizer.transform tokenizes and hashes a whole batch in numpy. The reference below
# is the per-document implementation it replaced (regex, list filter, scikit-learn's
# HashingVectorizer, then log-TF, IDF and normalize_rows); the output must be the same
# to the bit: same CSR structure, index dtypes and float64 values.
_REF_TOKEN = re.compile(r"(?u)\b[^\W\d_][\w'-]*\w\b|\b[^\W\d_]\b")


def _ref_tokenize(text: str, stop: frozenset[str]) -> list[str]:
    return [t for t in _REF_TOKEN.findall(text.lower()) if len(t) > 1 and t not in stop]


def _ref_transform(v: Vectorizer, texts: list[str]) -> sp.csr_matrix:
    def analyze(text: str) -> list[str]:
        tokens = _ref_tokenize(text, v._stop)
        if v.truncate is not None:
            tokens = [t[: v.truncate] for t in tokens]
        if v.ngram_max == 2 and len(tokens) > 1:
            tokens = tokens + [f"{a} {b}" for a, b in itertools.pairwise(tokens)]
        return tokens

    hasher = HashingVectorizer(n_features=v.n_features, analyzer=analyze, alternate_sign=False, norm=None,
                               dtype=np.float64)
    X = sp.csr_matrix(hasher.transform(texts), dtype=np.float64)
    if v.tf == "log":
        np.log(X.data, out=X.data)
        X.data += 1.0
    elif v.tf == "binary":
        X.data[:] = 1.0
    X.data *= v.feature_weights()[X.indices]
    if v.normalize:
        X = normalize_rows(X)
    X.sort_indices()
    return X


@contextmanager
def _path(small: bool) -> Iterator[None]:
    """Force the token-by-token path for small batches, or the numpy batch path."""
    saved = vectorize_module._SMALL
    vectorize_module._SMALL = 10**12 if small else 0
    try:
        yield
    finally:
        vectorize_module._SMALL = saved


def _assert_identical(X: sp.csr_matrix, R: sp.csr_matrix) -> None:
    assert type(X) is type(R) and X.shape == R.shape
    assert X.indptr.dtype == R.indptr.dtype and X.indices.dtype == R.indices.dtype and X.data.dtype == R.data.dtype
    np.testing.assert_array_equal(X.indptr, R.indptr)
    np.testing.assert_array_equal(X.indices, R.indices)
    np.testing.assert_array_equal(X.data.view(np.int64), R.data.view(np.int64))  # bit for bit


# characters around the tokenizer's edges: letters that are not ASCII (Σ/ς final sigma,
# İ whose lower case has a combining dot, ß, ﬁ), digits that are not ASCII, numerics that
# are not digits (², ½, Ⅻ), marks, the underscore, apostrophes and hyphens, separators,
# NUL, a lone surrogate, letters outside the BMP (𝐀, 𐐀), and stop words
_PIECES = ["a", "b", "z", "Q", "x", "é", "É", "ß", "ﬁ", "Σ", "σ", "ς", "ΑΣ", "İ", "ı", "Ǆ", "ǅ", "ﬀ", "中", "ア",
           "ж", "Ж", "5", "٣", "²", "½", "Ⅻ", "\u0301", "\u0307", "_", "'", "-", "’", " ", "\n", "\t", ".", ",",
           "\x00", "\ud800", "𝐀", "𐐀", "🙂", "the", "said", "s", "wheat", "Wheat", "WHEAT", "oil", "don't",
           "ab-cd", "u.s.", "1987", "x2", "über", "straße", "ΟΔΟΣ", "longstopword", "naïve"]
_texts = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join) | st.text(max_size=60)
_CONFIGS = [
    {"n_features": 2**20},
    {"n_features": 1000, "tf": "raw", "idf": "idf2",
     "stop_words": ["wheat", "longstopword", "naïve", "über", "ab\x00"]},
    {"n_features": 2**10, "tf": "binary", "idf": "none", "normalize": False, "stop_words": "none"},
    {"n_features": 2**12, "ngram_max": 2},
    {"n_features": 2**14, "stop_words": ["x2", "ab-cd", "don't", "straße", "ΟΔΟΣ".lower(), "longstopword"]
     + [f"zz{i}" for i in range(300)]},  # more stop words than the collision-free table takes
    {"n_features": 2**16, "truncate": 3},  # tokens cut to their first characters
    {"n_features": 2**12, "ngram_max": 2, "truncate": 1},
]
_TRAIN = ["wheat prices rose", "oil prices fell", "Straße über naïve ΟΔΟΣ", "the don't ab-cd 1987 x2"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_texts, min_size=1, max_size=6), st.integers(0, len(_CONFIGS) - 1))
def test_batch_transform_equals_the_reference(texts: list[str], config: int) -> None:
    ref_df = _ref_transform(  # reference document frequencies
        Vectorizer(**{**_CONFIGS[config], "tf": "raw", "idf": "none", "normalize": False}),  # type: ignore[arg-type]
        _TRAIN + texts[:2]).getnnz(axis=0).astype(np.float64)
    for small in (False, True):
        with _path(small):
            v = Vectorizer(**_CONFIGS[config]).fit(_TRAIN + texts[:2])  # type: ignore[arg-type]
            np.testing.assert_array_equal(v.df_, ref_df)
            _assert_identical(v.transform(texts), _ref_transform(v, texts))
    for text in texts:
        assert tokenize(text, stop_words=v._stop) == _ref_tokenize(text, v._stop)


def test_batch_transform_edge_cases() -> None:
    v = Vectorizer(n_features=2**16).fit(_TRAIN)
    long_token = "a" + "bcd-é" * 2000  # far more than 255 four-byte blocks
    batches = [
        [""], ["", "", ""], ["the of said"], ["wheat"] * 5, [long_token, "wheat " + long_token + "s"],
        ["wheat " * 100_000 + "oil"], ["ΑΣ.Β ΑΣ'Β İstanbul ǅemal"], ["\ud800wheat\udfff oil"],
        ["x" * 9 + " " + "𝐀𝐁 𐐀𐐁"],
        [" ".join("q" * k for k in range(250, 270)), "é" * 130],  # around 64 blocks (hashed one by one above)
    ]
    for small in (False, True):
        with _path(small):
            for texts in batches:
                _assert_identical(v.transform(texts), _ref_transform(v, texts))
            # bytes are UTF-8, as scikit-learn decodes them; anything else is refused with
            # the package's error naming the document's index, on both paths
            _assert_identical(v.transform([b"wheat \xc3\xa9t\xc3\xa9", "oil"]),
                              _ref_transform(v, ["wheat été", "oil"]))
            with pytest.raises(ParameterError, match=r"texts\[0\].*float nan"):
                v.transform([np.nan])
            with pytest.raises(ParameterError, match=r"texts\[1\].*NoneType"):
                v.transform(["wheat", None])
            with pytest.raises(ParameterError, match=r"texts\[2\].*not UTF-8"):
                v.transform(["wheat", b"oil", b"\xffwheat"])
            with pytest.raises(ParameterError, match=r"texts\[0\].*int 3"):
                v.transform([3])
            assert v.transform([]).shape == (0, 2**16)  # (scikit-learn's hasher raised on an empty batch)


def test_reuters_vectors_equal_the_reference() -> None:
    docs = {}
    for part in ("train", "test"):  # tracked in git: a missing file is a broken checkout
        path = REUTERS / f"{part}.jsonl.gz"
        assert path.is_file(), f"{path} missing: the checkout is incomplete"
        with gzip.open(path, "rt", encoding="utf-8") as f:
            docs[part] = [json.loads(line)["text"] for line in f]
    v = Vectorizer().fit(docs["train"])
    ref_df = _ref_transform(Vectorizer(tf="raw", idf="none", normalize=False), docs["train"]).getnnz(axis=0)
    np.testing.assert_array_equal(v.df_, ref_df.astype(np.float64))
    for part in ("train", "test"):
        _assert_identical(v.transform(docs[part]), _ref_transform(v, docs[part]))
    test = docs["test"]
    _assert_identical(sp.vstack([v.transform(test[i : i + 256]) for i in range(0, len(test), 256)], format="csr"),
                      _ref_transform(v, test))
    # one at a time (the token-by-token path for small batches)
    _assert_identical(sp.vstack([v.transform([d]) for d in test[:500]], format="csr"), _ref_transform(v, test[:500]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(alphabet="abcdefgh ,.\u00e9\u0130", max_size=60), min_size=1, max_size=12))
def test_weigh_gives_transform_back_from_the_counts(texts: list[str]) -> None:
    """A vector travels as its term counts (the streaming service's shard copies): weighing
    them must give transform's vector bit for bit, and leave the counts untouched."""
    vec = Vectorizer(n_features=2**10).fit(["abc de", "fgh abc", "de de"])
    X, counts = vec.transform_counts(texts)
    assert np.array_equal(X.toarray(), vec.transform(texts).toarray())
    assert counts.shape == X.data.shape and np.all(counts >= 1) and np.all(counts == np.round(counts))
    C = sp.csr_matrix((counts.copy(), X.indices.copy(), X.indptr.copy()), shape=X.shape)
    before = C.data.copy()
    got = vec.weigh(C)
    assert np.array_equal(C.data, before)  # the input is not modified
    assert np.array_equal(got.indptr, X.indptr) and np.array_equal(got.indices, X.indices)
    assert np.array_equal(got.data, X.data)  # bit for bit, not approximately


def test_weigh_refuses_counts_of_another_width_and_the_fusion_vectorizer_refuses_counts() -> None:
    from sift.filters.representations import FusionVectorizer

    vec = Vectorizer(n_features=64).fit(["wheat corn"])
    with pytest.raises(ParameterError, match="64 columns"):
        vec.weigh(sp.csr_matrix((1, 65)))
    fusion = FusionVectorizer(n_features=2**13, lsa_components=3, char_top=50)
    with pytest.raises(ParameterError, match="term counts"):
        fusion.transform_counts(["wheat"])
    with pytest.raises(ParameterError, match="term counts"):
        fusion.weigh(sp.csr_matrix((1, 2**13)))


def test_the_fingerprint_follows_the_weights() -> None:
    a = Vectorizer(n_features=64).fit(["wheat corn", "oil"])
    b = Vectorizer(n_features=64).fit(["wheat corn", "oil"])
    assert a.fingerprint() == b.fingerprint() and len(a.fingerprint()) == 16
    b.partial_fit(["sugar"])  # other document frequencies: other weights
    assert a.fingerprint() != b.fingerprint()
    assert Vectorizer(n_features=64, tf="raw").fit(["wheat corn", "oil"]).fingerprint() \
        != a.fingerprint()
