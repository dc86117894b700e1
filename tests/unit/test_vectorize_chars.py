"""The vectorizer's character n-gram block (``Vectorizer(chars=c)``)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.utils import murmurhash3_32

import sift.filters.vectorize as vectorize_module
from sift.filters.errors import ParameterError
from sift.filters.vectorize import Vectorizer, _beyond_top, tokenize

_TRAIN = ["wheat prices rose", "oil prices fell", "Straße über naïve ΟΔΟΣ", "the don't ab-cd 1987 x2",
          "exports exported exporting"]
_PIECES = ["wheat", "Wheat", "oil", "exports", "exported", "the", "said", "ab", "x", "é", "ß", "ΟΔΟΣ", "中文",
           "𝐀𝐁", "don't", "ab-cd", "1987", " ", "\n", ".", ",", "\ud800", "naïve", "İstanbul", "\u00a0", "\u2003",
           "\x1c", "\u0085", "wheat,", "3.5"]
_texts = st.lists(st.sampled_from(_PIECES), max_size=30).map(" ".join) | st.text(max_size=50)


def _reference(v: Vectorizer, texts: list[str]) -> sp.csr_matrix:
    """The block described in the docstring, written plainly: word columns in the first
    half, the n-grams of every ``" chunk "`` of ``text.lower().split()`` in the second, log-TF x IDF, each row's
    ``char_top`` heaviest n-grams (ties to the lower column), each block normalised and
    scaled."""
    half, rest = v.n_features // 2, v.n_features - v.n_features // 2  # words, then n-grams
    lo, hi = v.char_ngrams
    rows, cols, vals = [], [], []
    w = v.feature_weights()
    for r, text in enumerate(texts):
        words: dict[int, float] = {}
        grams: dict[int, float] = {}
        for token in tokenize(text, stop_words=v._stop):
            head = token if v.truncate is None else token[: v.truncate]
            c = abs(murmurhash3_32(head, seed=0)) % half
            words[c] = words.get(c, 0.0) + 1.0
        for chunk in text.lower().split():
            b = f" {chunk} ".encode("utf-8", "surrogatepass")
            for n in range(lo, hi + 1):
                for p in range(len(b) - n + 1):
                    g = half + abs(murmurhash3_32(b[p : p + n], seed=0)) % rest
                    grams[g] = grams.get(g, 0.0) + 1.0
        weigh = {c: (1.0 + np.log(k)) * w[c] for c, k in {**words, **grams}.items()}
        kept = sorted(grams, key=lambda c: (-weigh[c], c))
        if v.char_top is not None:
            kept = kept[: v.char_top]
        for block, share in ((sorted(words), 1.0 - v.chars), (sorted(kept), v.chars)):
            norm = np.sqrt(sum(weigh[c] ** 2 for c in block)) or 1.0
            for c in block:
                rows.append(r)
                cols.append(c)
                vals.append(weigh[c] / norm * np.sqrt(share))
    X = sp.csr_matrix((vals, (rows, cols)), shape=(len(texts), v.n_features))
    X.sort_indices()
    return X


def _fit(**params: object) -> Vectorizer:
    return Vectorizer(**{"n_features": 2**12, "chars": 0.5, **params}).fit(_TRAIN)  # type: ignore[arg-type]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_texts, min_size=1, max_size=5), st.sampled_from([{}, {"char_top": 7}, {"truncate": 4},
                                                                    {"char_ngrams": (2, 3), "chars": 0.3}]))
def test_the_block_equals_its_plain_description_on_both_paths(texts: list[str], params: dict) -> None:
    v = _fit(**params)
    ref = _reference(v, texts)
    got = {}
    for small in (False, True):
        saved = vectorize_module._SMALL
        vectorize_module._SMALL = 10**12 if small else 0
        try:
            got[small] = v.transform(texts)
        finally:
            vectorize_module._SMALL = saved
        X = got[small]
        np.testing.assert_array_equal(X.indptr, ref.indptr)
        np.testing.assert_array_equal(X.indices, ref.indices)
        np.testing.assert_allclose(X.data, ref.data, rtol=1e-12, atol=0)
    # the two paths agree bit for bit, and a document's vector does not depend on its batch
    np.testing.assert_array_equal(got[False].data.view(np.int64), got[True].data.view(np.int64))
    one = sp.vstack([v.transform([t]) for t in texts], format="csr")
    np.testing.assert_array_equal(one.indices, got[False].indices)
    np.testing.assert_array_equal(one.data.view(np.int64), got[False].data.view(np.int64))


def test_a_chunk_gives_its_padded_ngrams() -> None:
    v = Vectorizer(n_features=2**12, chars=0.5, stop_words="none").fit(["cd"])  # "ab" unseen: idf ln 2
    X, counts = v.transform_counts(["ab ab"])
    half = 2**11
    grams = [b" ab", b"ab ", b" ab "]  # 3-grams, the one 4-gram; no 5-gram of 4 bytes
    want = sorted({half + abs(murmurhash3_32(g, seed=0)) % half for g in grams})
    word = abs(murmurhash3_32("ab", seed=0)) % half
    assert X.indices.tolist() == sorted([word, *want])
    assert counts.tolist() == [2.0] * (1 + len(want))  # every term counted twice
    words, chars = X.indices < half, X.indices >= half
    assert np.sum(X.data[words] ** 2) == pytest.approx(0.5)
    assert np.sum(X.data[chars] ** 2) == pytest.approx(0.5)


def test_inflections_share_ngrams_and_the_training_counts_take_all_ngrams() -> None:
    v = _fit(char_top=3)
    X = v.transform(["exports", "exported", "oil"])
    sims = (X @ X.T).toarray()
    assert sims[0, 1] > 0.2 and sims[0, 2] == 0.0  # different words, shared n-grams
    # document frequencies come from every n-gram of the training documents, not the kept top 3
    half = v.n_features // 2
    assert np.count_nonzero(v.df_[half:]) > 3 * len(_TRAIN)
    assert np.count_nonzero(X[0].indices >= half) == 3


def test_weigh_gives_the_vectors_back_from_the_counts() -> None:
    v = _fit(char_top=5)
    texts = ["wheat exports rose sharply", "oil", "", "naïve Straße"]
    X, counts = v.transform_counts(texts)
    C = sp.csr_matrix((counts.copy(), X.indices.copy(), X.indptr.copy()), shape=X.shape)
    Y = v.weigh(C)
    np.testing.assert_array_equal(Y.indices, X.indices)
    np.testing.assert_array_equal(Y.data.view(np.int64), X.data.view(np.int64))


def test_state_round_trip_and_chars_off_leaves_the_state_as_before() -> None:
    v = _fit(char_top=9, char_ngrams=(2, 4))
    w = Vectorizer.from_state(v.to_state())
    assert w.params() == v.params() and w.params()["chars"] == 0.5
    np.testing.assert_array_equal(w.transform(["wheat oil"]).data, v.transform(["wheat oil"]).data)
    assert "chars" not in Vectorizer(n_features=64).params()
    # chars=0 hashes words over all the columns, as before the option
    plain = Vectorizer(n_features=2**12).fit(_TRAIN)
    assert plain.transform(["wheat"]).indices.tolist() == [abs(murmurhash3_32("wheat", seed=0)) % 2**12]


@pytest.mark.parametrize("params, match", [
    ({"chars": 1.0}, "chars must be"), ({"chars": -0.1}, "chars must be"), ({"chars": True}, "chars must be"),
    ({"chars": "0.5"}, "chars must be"), ({"chars": 0.5, "char_ngrams": (0, 3)}, "char_ngrams"),
    ({"chars": 0.5, "char_ngrams": (4, 3)}, "char_ngrams"), ({"chars": 0.5, "char_ngrams": (3,)}, "char_ngrams"),
    ({"chars": 0.5, "char_top": 0}, "char_top"), ({"chars": 0.5, "normalize": False}, "normalize"),
    ({"chars": 0.5, "ngram_max": 2}, "ngram_max"), ({"chars": 0.5, "n_features": 2}, "n_features"),
])
def test_parameter_errors_name_the_parameter(params: dict, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        Vectorizer(**params)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=25), st.integers(1, 20), st.booleans(), st.integers(0, 2**16))
def test_top_k_by_bins_equals_a_full_sort(sizes: list[int], k: int, coarse: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    row = np.repeat(np.arange(len(sizes)) + 3, sizes)
    if not row.size:
        return
    col = np.concatenate([np.sort(rng.choice(500, s, replace=False)) for s in sizes]).astype(np.int64)
    weight = (rng.choice(np.array([0.0, 0.5, 1.0, 2.25, 7.0]), row.size) if coarse  # many ties
              else rng.random(row.size) * 9)
    want = np.zeros(row.size, dtype=bool)
    for r in np.unique(row):
        idx = np.flatnonzero(row == r)
        ranked = sorted(idx.tolist(), key=lambda i: (-weight[i], col[i]))
        want[ranked[k:]] = True
    np.testing.assert_array_equal(_beyond_top(row, weight, col, k), want)
