"""Text representations whose cosine dissimilarities the fusion ranker combines.

Three views of the same documents, each L2-normalised so that a dot product is
a cosine similarity:

``word``
    word unigram + bigram TF-IDF (sublinear tf, English stop words removed);
``char``
    character 3-5-gram TF-IDF within word boundaries (robust to inflection and
    the newswire's abbreviations);
``lsa``
    latent semantic analysis: a truncated SVD of the word TF-IDF matrix.

:class:`FusionVectorizer` is the streaming counterpart used by the ``fusion``
profile model: a hashed :class:`~sift.filters.vectorize.Vectorizer` whose
vectors carry a word block and a character n-gram block in separate column
ranges, and which fits one LSA projection on the training matrix.

Pure computation (scikit-learn); no I/O.

Examples
--------
>>> texts = ["wheat crop exports rise", "wheat harvest and grain exports",
...          "oil prices fall", "crude oil output cut"]
>>> reps = TextRepresentations(lsa_components=2).fit(texts)
>>> d = reps.dissimilarities(0)
>>> d.shape, reps.names_
((4, 3), ['word', 'char', 'lsa'])
>>> bool(d[1, 0] < d[2, 0])  # the other wheat story is closer in word TF-IDF
True
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import HashingVectorizer, TfidfVectorizer
from sklearn.preprocessing import normalize

from sift.filters.base import init_params
from sift.filters.errors import ParameterError, StateError
from sift.filters.fusion import ContextWeights, FusionContext, FusionError
from sift.filters.sparse import restrict
from sift.filters.state import check_version, decode_array, encode_array
from sift.filters.vectorize import Vectorizer, _documents, _integer, _switch, normalize_rows

REPRESENTATIONS: tuple[str, ...] = ("word", "char", "lsa")

#: A seed scikit-learn's ``random_state`` accepts.
_MAX_SEED = 2**32 - 1


def _int_param(name: str, value: Any, low: int, high: int | None = None) -> int:
    """``value`` as a Python int in ``[low, high]`` (numpy integers accepted; bools, floats
    and strings refused with a :class:`ParameterError` naming ``name`` and the value)."""
    v = _integer(value)
    if not isinstance(v, int) or isinstance(v, bool) or v < low or (high is not None and v > high):
        span = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ParameterError(f"{name} must be an integer {span}, got {value!r}")
    return v


def _real_param(name: str, value: Any) -> float:
    """``value`` as a Python float (numpy numbers accepted; bools and strings refused)."""
    if (not isinstance(value, int | float | np.integer | np.floating)
            or isinstance(value, bool | np.bool_) or not math.isfinite(value)):
        raise ParameterError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _ngram_range(value: Any) -> tuple[int, int]:
    """``(lo, hi)`` integers with ``1 <= lo <= hi`` (no float is truncated)."""
    bad = ParameterError(f"char_ngram_range must be two integers (lo, hi) with 1 <= lo <= hi, "
                         f"got {value!r}")
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray) or len(value) != 2:
        raise bad
    lo_n, hi_n = (_integer(x) for x in value)
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (lo_n, hi_n)):
        raise bad
    if not 1 <= lo_n <= hi_n:
        raise bad
    return lo_n, hi_n


class TextRepresentations:
    """Fit word TF-IDF, character n-gram TF-IDF and LSA on a corpus.

    Parameters
    ----------
    names
        Which representations, in column order (subset of ``word``, ``char``,
        ``lsa``).
    lsa_components
        Dimension of the LSA space (an integer >= 1; at most one less than the number of
        documents and of word features). LSA needs at least two word features: with
        fewer, :meth:`fit` raises :class:`~sift.filters.fusion.FusionError` (leave
        ``"lsa"`` out of ``names``) rather than return fewer columns than ``names``.
    min_df
        Minimum document frequency (an integer >= 1) of a word or character n-gram;
        1 when there are fewer than ``10 * min_df`` texts.
    seed
        Seed of the randomised SVD (an integer in ``[0, 2**32 - 1]``).

    Every parameter is checked when the object is made
    (:class:`~sift.filters.errors.ParameterError` or
    :class:`~sift.filters.fusion.FusionError`, naming it and the value).

    Attributes
    ----------
    names_ : list of str
        Representations, in column order.
    matrices_ : dict of str to matrix
        Row-normalised document matrix of each representation.
    """

    def __init__(
        self,
        names: Sequence[str] = REPRESENTATIONS,
        lsa_components: int = 150,
        min_df: int = 2,
        seed: int = 0,
    ) -> None:
        self.names = names
        self.lsa_components = lsa_components
        self.min_df = min_df
        self.seed = seed
        self._checked()

    def get_params(self) -> dict[str, Any]:
        """The hyperparameters given to :meth:`__init__`, by name."""
        return init_params(self)

    def _checked(self) -> tuple[list[str], int, int, int]:
        """``(names, lsa_components, min_df, seed)``, validated."""
        names = self.names
        if isinstance(names, str | bytes) or not isinstance(names, Iterable):
            raise FusionError(f"names must be a non-empty list of names among "
                              f"{', '.join(REPRESENTATIONS)}, got {names!r}")
        names = list(names)
        unknown = [n for n in names if not isinstance(n, str) or n not in REPRESENTATIONS]
        if unknown or not names:
            raise FusionError(
                f"names must be a non-empty subset of {', '.join(REPRESENTATIONS)}, got {names}"
            )
        return (names, _int_param("lsa_components", self.lsa_components, 1),
                _int_param("min_df", self.min_df, 1), _int_param("seed", self.seed, 0, _MAX_SEED))

    def fit(self, texts: Iterable[str]) -> TextRepresentations:
        """Fit every representation on ``texts`` (any iterable of texts, not a bare
        string) and keep the document matrices.

        Raises
        ------
        ParameterError
            If ``texts`` is a string or holds something other than a text (naming its
            index), or a parameter is bad.
        FusionError
            With fewer than 2 texts, no word or character n-gram left (all stop words, or
            below ``min_df``), or ``lsa`` asked of texts with fewer than two word features.
        """
        names, lsa_components, min_df0, seed = self._checked()
        texts = _documents(texts)
        if len(texts) < 2:
            raise FusionError(f"need at least 2 texts, got {len(texts)}")
        min_df = min_df0 if len(texts) >= 10 * min_df0 else 1
        mats: dict[str, Any] = {}
        word: sp.csr_matrix | None = None
        if "word" in names or "lsa" in names:
            vec = TfidfVectorizer(sublinear_tf=True, stop_words="english", ngram_range=(1, 2),
                                  min_df=min_df, dtype=np.float64)
            word = _fit_tfidf(vec, texts, "word")
            if "word" in names:
                mats["word"] = word
        if "char" in names:
            cvec = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True,
                                   min_df=min_df, dtype=np.float64, max_features=300_000)
            mats["char"] = _fit_tfidf(cvec, texts, "character n-gram")
        if "lsa" in names:
            assert word is not None
            if word.shape[1] < 2:
                raise FusionError(
                    f"lsa needs at least 2 word features (a truncated SVD keeps fewer "
                    f"dimensions than it has features), the texts give {word.shape[1]}; "
                    f"leave 'lsa' out of names")
            k = max(1, min(lsa_components, min(word.shape) - 1))
            svd = TruncatedSVD(n_components=k, random_state=seed)
            mats["lsa"] = normalize(svd.fit_transform(word))
        self.names_ = names
        self.matrices_ = mats
        return self

    def dissimilarities(self, query: int) -> NDArray[np.float64]:
        """Cosine dissimilarity ``1 - cos`` of every document to document ``query``.

        Returns an (n, J) array; row ``query`` is zero. ``query`` must be an integer
        (numpy integers too; not a bool or a float).
        """
        mats = getattr(self, "matrices_", None)
        if mats is None:
            raise FusionError("TextRepresentations is not fitted yet; call fit first")
        n = next(iter(mats.values())).shape[0]
        if isinstance(query, bool | np.bool_) or not isinstance(query, int | np.integer):
            raise FusionError(f"query must be an integer document index, got {query!r}")
        query = int(query)
        if not 0 <= query < n:
            raise FusionError(f"query = {query} is outside [0, {n})")
        cols = []
        for name in self.names_:
            m = self.matrices_[name]
            sims = m @ m[query].T
            sims = sims.toarray().ravel() if sp.issparse(sims) else np.asarray(sims).ravel()
            cols.append(np.clip(1.0 - sims, 0.0, 2.0))
        out = np.column_stack(cols).astype(np.float64)
        out[query] = 0.0
        return out


def _fit_tfidf(vec: TfidfVectorizer, texts: list[Any], what: str) -> sp.csr_matrix:
    """``vec`` fitted on ``texts``; an empty vocabulary is a :class:`FusionError`."""
    try:
        return vec.fit_transform(texts).tocsr()
    except ValueError as exc:
        if "empty vocabulary" in str(exc) or "no terms remain" in str(exc):
            raise FusionError(f"texts: no {what} features left (every word a stop word, "
                              f"or below min_df); {exc}") from None
        raise


def _top_per_row(X: sp.csr_matrix, k: int) -> sp.csr_matrix:
    """Keep the ``k`` largest entries of each row (ties: lower column first)."""
    counts = np.diff(X.indptr)
    if counts.size == 0 or counts.max(initial=0) <= k:
        return X
    rows = np.repeat(np.arange(X.shape[0]), counts)
    order = np.lexsort((X.indices, -X.data, rows))
    rank = np.arange(order.size) - np.repeat(X.indptr[:-1], counts)
    keep = np.zeros(order.size, dtype=bool)
    keep[order[rank < k]] = True
    out = sp.csr_matrix((X.data[keep], X.indices[keep], np.concatenate([[0], np.cumsum(
        np.bincount(rows[keep], minlength=X.shape[0]))])), shape=X.shape)
    out.sort_indices()
    return out


class FusionVectorizer(Vectorizer):
    """Hashed word block + hashed character n-gram block + an LSA projection.

    Columns ``[0, n_features // 2)`` hold the word log-TF-IDF vector (exactly as
    :class:`~sift.filters.vectorize.Vectorizer`, with half the columns), columns
    ``[n_features // 2, n_features)`` the character n-gram log-TF-IDF vector
    (``char_wb`` n-grams, IDF from the same training documents, only the
    ``char_top`` heaviest n-grams of a document kept to bound its size). Each
    block is normalised to unit length, then scaled by ``sqrt(1 - char_weight)``
    and ``sqrt(char_weight)``: the whole vector has unit length and the dot
    product of two documents is ``(1 - c) cos_word + c cos_char``, which is what
    single models (Rocchio, Kantor, kNN) see. The fusion model reads the blocks
    separately.

    :meth:`fit` also fits a truncated SVD (LSA) on the training matrix restricted
    to the ``lsa_columns`` word columns of highest document frequency; it is kept
    once, here, and reaches the models through :meth:`feature_weights`, which
    returns a :class:`~sift.filters.fusion.ContextWeights` array.

    Parameters
    ----------
    n_features
        Total number of columns (both blocks), 4 to ``2**31 - 1``.
    char_weight
        Share ``c`` of the character block in the dot product, in ``[0, 1)``;
        0 leaves the character block out.
    char_ngram_range
        Character n-gram lengths: two integers ``(lo, hi)``, ``1 <= lo <= hi``.
    char_top
        Character n-grams kept per document (``None``: all).
    lsa_components, lsa_columns
        LSA dimension (0: no LSA) and how many frequent word columns it reads.
    seed
        Seed of the randomised SVD (an integer in ``[0, 2**32 - 1]``).
    tf, idf, stop_words, ngram_max
        As in :class:`~sift.filters.vectorize.Vectorizer` (word block).

    Integer parameters accept numpy integers, ``char_weight`` numpy floats; bools are
    refused (:class:`~sift.filters.errors.ParameterError`, naming the parameter).

    Examples
    --------
    >>> texts = ["wheat exports rose", "wheat crop", "oil prices", "crude oil output"]
    >>> v = FusionVectorizer(n_features=2**12, lsa_components=2).fit(texts)
    >>> X = v.transform(["wheat harvest"])
    >>> round(float(X.multiply(X).sum()), 6), bool(X.indices.max() >= 2**11)
    (1.0, True)
    >>> ctx = v.feature_weights().context
    >>> ctx.word_stop, ctx.char_start, ctx.lsa_map.shape[1]
    (2048, 2048, 2)
    """

    def __init__(
        self,
        n_features: int = 2**20,
        *,
        char_weight: float = 0.5,
        char_ngram_range: tuple[int, int] | list[int] = (3, 5),
        char_top: int | None = 200,
        lsa_components: int = 100,
        lsa_columns: int = 20_000,
        seed: int = 0,
        tf: str = "log",
        idf: str = "idf",
        normalize: bool = True,
        stop_words: str | Iterable[str] = "default",
        ngram_max: int = 1,
    ) -> None:
        n_features = _integer(n_features)
        if isinstance(n_features, bool) or not isinstance(n_features, int) or n_features < 4:
            raise ParameterError(f"n_features must be an integer >= 4, got {n_features!r}")
        try:
            cw = _real_param("char_weight", char_weight)
        except ParameterError:
            cw = -1.0
        if not 0.0 <= cw < 1.0:
            raise ParameterError(f"char_weight must be a number in [0, 1), got {char_weight!r}")
        lo_n, hi_n = _ngram_range(char_ngram_range)
        if char_top is not None:
            char_top = _int_param("char_top", char_top, 1)
        lsa_components = _int_param("lsa_components", lsa_components, 0)
        lsa_columns = _int_param("lsa_columns", lsa_columns, 2)
        seed = _int_param("seed", seed, 0, _MAX_SEED)
        char_weight = cw
        if not _switch("normalize", normalize):
            raise ParameterError("FusionVectorizer always normalises (normalize=True)")
        super().__init__(n_features, tf=tf, idf=idf, normalize=True, stop_words=stop_words,
                         ngram_max=ngram_max)
        self.char_weight = float(char_weight)
        self.char_ngram_range = (lo_n, hi_n)
        self.char_top = char_top
        self.lsa_components = lsa_components
        self.lsa_columns = lsa_columns
        self.seed = seed
        self.word_stop = n_features // 2
        self._hasher = HashingVectorizer(n_features=self.word_stop, analyzer=self._analyze,
                                         alternate_sign=False, norm=None, dtype=np.float64)
        self._char_hasher = HashingVectorizer(
            n_features=n_features - self.word_stop, analyzer="char_wb",
            ngram_range=self.char_ngram_range, alternate_sign=False, norm=None, dtype=np.float64)
        self.lsa_cols_ = np.zeros(0, dtype=np.int64)
        self.lsa_map_ = np.zeros((0, 0))
        self._context: FusionContext | None = None

    def get_params(self) -> dict[str, Any]:
        """The hyperparameters given to :meth:`__init__`, by name."""
        return init_params(self)

    @property
    def has_char(self) -> bool:
        return self.char_weight > 0

    # -- learning -----------------------------------------------------------------
    def fit(self, texts: Iterable[str]) -> FusionVectorizer:
        """Learn document frequencies of both blocks, then the LSA projection."""
        docs = _documents(texts)
        super().fit(docs)
        self.lsa_cols_ = np.zeros(0, dtype=np.int64)
        self.lsa_map_ = np.zeros((0, 0))
        self._context = None
        if self.lsa_components > 0 and len(docs) >= 3:
            df = self.df_[: self.word_stop]
            nz = np.flatnonzero(df)
            top = nz[np.argsort(-df[nz], kind="stable")[: self.lsa_columns]]
            cols = np.sort(top).astype(np.int64)
            Xr = restrict(self.transform(docs), cols)
            k = min(self.lsa_components, min(Xr.shape) - 1)
            if k >= 1:
                svd = TruncatedSVD(n_components=k, random_state=self.seed)
                svd.fit(Xr)
                self.lsa_cols_ = cols
                self.lsa_map_ = np.ascontiguousarray(svd.components_.T, dtype=np.float64)
        return self

    def partial_fit(self, texts: Iterable[str]) -> FusionVectorizer:
        """Add documents to both blocks' document frequencies (the LSA is not refitted)."""
        docs = _documents(texts)
        words = self._hash(self._hasher, docs)
        self.n_docs_ += words.shape[0]
        self.df_[: self.word_stop] += np.bincount(words.indices, minlength=self.word_stop)
        if self.has_char:
            chars = self._hash(self._char_hasher, docs)
            n_char = self.n_features - self.word_stop
            self.df_[self.word_stop :] += np.bincount(chars.indices, minlength=n_char)
        self._weights = None
        self._context = None
        return self

    def context(self) -> FusionContext:
        """The column layout and LSA projection, for :class:`~sift.filters.fusion.FusionModel`."""
        if self._context is None:
            self._context = FusionContext(
                word_stop=self.word_stop,
                char_start=self.word_stop if self.has_char else None,
                lsa_cols=self.lsa_cols_, lsa_map=self.lsa_map_)
        return self._context

    def feature_weights(self) -> ContextWeights:
        """The corpus weights, carrying :meth:`context`."""
        return ContextWeights(super().feature_weights(), self.context())

    # -- transforming ---------------------------------------------------------------
    @staticmethod
    def _hash(hasher: HashingVectorizer, docs: list[Any]) -> sp.csr_matrix:
        """The term counts of ``docs`` from ``hasher``; 0 rows for no documents (where
        scikit-learn's hasher raises StopIteration)."""
        if not docs:
            return sp.csr_matrix((0, hasher.n_features), dtype=np.float64)
        return sp.csr_matrix(hasher.transform(docs))

    def _weigh(self, X: sp.csr_matrix, offset: int, scale: float) -> sp.csr_matrix:
        X = sp.csr_matrix(X, dtype=np.float64)
        if self.tf == "log":
            np.log(X.data, out=X.data)
            X.data += 1.0
        elif self.tf == "binary":
            X.data[:] = 1.0
        if X.nnz:  # (nothing to weigh: an unfitted IDF vectorizer may say so)
            X.data *= super().feature_weights()[X.indices + offset]
        if offset and self.char_top is not None:
            X = _top_per_row(X, self.char_top)
        X = normalize_rows(X)
        X.data *= scale
        return X

    def transform(self, texts: Sequence[str] | Iterable[str]) -> sp.csr_matrix:
        """Vectorize texts into a CSR matrix of shape (n_texts, n_features)."""
        docs = _documents(texts)
        c = self.char_weight
        words = self._weigh(self._hash(self._hasher, docs), 0, math.sqrt(1.0 - c))
        n_char = self.n_features - self.word_stop
        if self.has_char:
            chars = self._weigh(self._hash(self._char_hasher, docs), self.word_stop, math.sqrt(c))
        else:
            chars = sp.csr_matrix((len(docs), n_char))
        X = sp.csr_matrix(sp.hstack([words, chars], format="csr"), dtype=np.float64)
        X.sort_indices()
        return X

    def transform_counts(self, texts: Sequence[str] | Iterable[str]
                         ) -> tuple[sp.csr_matrix, NDArray[np.float64]]:
        """Not available: the character block keeps each row's top weights, which its
        counts alone do not give back."""
        raise ParameterError("FusionVectorizer: vectors cannot be rebuilt from term counts")

    def weigh(self, counts: sp.csr_matrix, *, copy: bool = True) -> sp.csr_matrix:
        """Not available (see :meth:`transform_counts`)."""
        raise ParameterError("FusionVectorizer: vectors cannot be rebuilt from term counts")

    # -- state ----------------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        return {**super().params(), "char_weight": self.char_weight,
                "char_ngram_range": list(self.char_ngram_range), "char_top": self.char_top,
                "lsa_components": self.lsa_components, "lsa_columns": self.lsa_columns,
                "seed": self.seed}

    def to_state(self) -> dict[str, Any]:
        state = super().to_state()
        state["kind"] = "fusion_vectorizer"
        state["lsa_cols"] = encode_array(self.lsa_cols_)
        state["lsa_map"] = encode_array(self.lsa_map_)
        return state

    @classmethod
    def from_state(cls, state: Any) -> FusionVectorizer:
        """Rebuild a fitted vectorizer from :meth:`to_state` output, validating it (the
        parameters, ``n_docs`` and document frequencies as
        :meth:`Vectorizer.from_state <sift.filters.vectorize.Vectorizer.from_state>` does,
        then the LSA projection).

        Raises
        ------
        StateError
            If the state is not a fusion vectorizer state of this version, or corrupt.
        """
        s = check_version(state, "fusion_vectorizer")
        v = cls._from_params(s, "fusion_vectorizer")
        v._load_counts(s, "fusion_vectorizer")
        try:
            cols = decode_array(s["lsa_cols"], name="lsa_cols", dtype=np.int64, ndim=1)
            lsa = decode_array(s["lsa_map"], name="lsa_map", dtype=np.float64, ndim=2)
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"fusion_vectorizer: {exc}") from None
        if lsa.shape[0] != cols.size or (cols.size and (cols.min() < 0 or cols.max() >= v.word_stop
                                                        or np.any(np.diff(cols) <= 0))):
            raise StateError("fusion_vectorizer: LSA columns and projection are inconsistent")
        v.lsa_cols_ = cols
        v.lsa_map_ = lsa if cols.size else np.zeros((0, 0))
        return v
