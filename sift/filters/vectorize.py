"""Text to sparse vectors: tokens, log-TF, training-set IDF, length normalisation.

Terms are hashed into a fixed space (``n_features`` columns, MurmurHash3 as in
scikit-learn's :class:`~sklearn.feature_extraction.text.HashingVectorizer`), so
terms first seen in the stream need no vocabulary update, every worker maps a
term to the same column, and the state stays bounded.

Within-document weight: 0 for an absent term, ``1 + ln(tf)`` otherwise (or raw
tf, or binary). Corpus weight: ``idf = ln(N + 1) - ln(n + 1)`` where ``N`` is
the number of training documents and ``n`` those containing the term, learned
by :meth:`Vectorizer.fit` from the training set only; a term never seen in
training gets ``ln(N + 1)``. ``idf="idf2"`` squares it, ``idf="none"`` drops it.
``normalize=True`` scales each document to unit length.

Examples
--------
>>> v = Vectorizer(n_features=2**10).fit(["wheat prices rose", "oil prices fell"])
>>> X = v.transform(["wheat wheat exports"])
>>> X.shape
(1, 1024)
>>> round(float(X.multiply(X).sum()), 6)   # unit length
1.0
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from sklearn.feature_extraction.text import HashingVectorizer

from sift.filters.errors import ParameterError
from sift.filters.state import check_version, decode_array, encode_array

# A deliberately small list of function words. Content words that are stop
# words elsewhere ("interest", "computer", "system", ...) stay: they can be a
# profile's whole query.
STOP_WORDS = frozenset(
    [
        "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been",
        "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "he",
        "her", "his", "how", "i", "if", "in", "into", "is", "it", "its", "may", "more", "most", "no",
        "not", "of", "on", "or", "our", "she", "should", "so", "such", "than", "that", "the", "their",
        "them", "then", "there", "these", "they", "this", "those", "to", "was", "we", "were", "what",
        "when", "which", "who", "will", "with", "would", "you", "your", "said",
    ]
)

_TOKEN = re.compile(r"(?u)\b[^\W\d_][\w'-]*\w\b|\b[^\W\d_]\b")


def tokenize(text: str, *, stop_words: frozenset[str] = STOP_WORDS) -> list[str]:
    """Lower-case word tokens of at least two characters starting with a letter.

    >>> tokenize("U.S. wheat exports rose 5 pct, the USDA said.")
    ['wheat', 'exports', 'rose', 'pct', 'usda']
    """
    return [t for t in _TOKEN.findall(text.lower()) if len(t) > 1 and t not in stop_words]


class Vectorizer:
    """Hashing vectorizer with log-TF, training-set IDF and L2 normalisation.

    Parameters
    ----------
    n_features
        Number of hashed columns (a power of two is customary).
    tf
        ``"log"`` (``1 + ln tf``), ``"raw"`` or ``"binary"``.
    idf
        ``"idf"``, ``"idf2"`` (squared) or ``"none"``.
    normalize
        Scale every document vector to unit Euclidean length.
    stop_words
        ``"default"`` (the small built-in list), ``"none"``, or an iterable of words.
    ngram_max
        1 for words only, 2 to add word bigrams.

    Attributes
    ----------
    n_docs_ : int
        Number of training documents seen by :meth:`fit`/:meth:`partial_fit`.
    df_ : ndarray of shape (n_features,)
        Document frequency per hashed column.
    """

    def __init__(
        self,
        n_features: int = 2**20,
        *,
        tf: str = "log",
        idf: str = "idf",
        normalize: bool = True,
        stop_words: str | Iterable[str] = "default",
        ngram_max: int = 1,
    ) -> None:
        self.n_features = n_features
        self.tf = tf
        self.idf = idf
        self.normalize = normalize
        self.stop_words = stop_words
        self.ngram_max = ngram_max
        self._validate()
        self.n_docs_ = 0
        self.df_: NDArray[np.float64] = np.zeros(n_features, dtype=np.float64)
        self._weights: NDArray[np.float64] | None = None
        self._stop = self._stop_set()
        self._hasher = HashingVectorizer(
            n_features=n_features,
            analyzer=self._analyze,
            alternate_sign=False,
            norm=None,
            dtype=np.float64,
        )

    def _validate(self) -> None:
        if not isinstance(self.n_features, int) or self.n_features < 2:
            raise ParameterError(f"n_features must be an integer >= 2, got {self.n_features!r}")
        if self.tf not in ("log", "raw", "binary"):
            raise ParameterError(f"tf must be 'log', 'raw' or 'binary', got {self.tf!r}")
        if self.idf not in ("idf", "idf2", "none"):
            raise ParameterError(f"idf must be 'idf', 'idf2' or 'none', got {self.idf!r}")
        if self.ngram_max not in (1, 2):
            raise ParameterError(f"ngram_max must be 1 or 2, got {self.ngram_max!r}")

    def _stop_set(self) -> frozenset[str]:
        if isinstance(self.stop_words, str):
            if self.stop_words == "default":
                return STOP_WORDS
            if self.stop_words == "none":
                return frozenset()
            raise ParameterError(f"stop_words must be 'default', 'none' or a list, got {self.stop_words!r}")
        return frozenset(self.stop_words)

    def _analyze(self, text: str) -> list[str]:
        tokens = tokenize(text, stop_words=self._stop)
        if self.ngram_max == 2 and len(tokens) > 1:
            tokens = tokens + [f"{a} {b}" for a, b in itertools.pairwise(tokens)]
        return tokens

    # -- learning -----------------------------------------------------------------
    def fit(self, texts: Iterable[str]) -> Vectorizer:
        """Learn document frequencies from a training set, replacing earlier ones."""
        self.n_docs_ = 0
        self.df_ = np.zeros(self.n_features, dtype=np.float64)
        return self.partial_fit(texts)

    def partial_fit(self, texts: Iterable[str]) -> Vectorizer:
        """Add documents to the document-frequency counts (never call it on unseen stream documents)."""
        counts = self._hasher.transform(list(texts))
        counts = sp.csr_matrix(counts)
        self.n_docs_ += counts.shape[0]
        cols = counts.indices
        self.df_ += np.bincount(cols, minlength=self.n_features).astype(np.float64)
        self._weights = None
        return self

    @property
    def idf_(self) -> NDArray[np.float64]:
        """IDF per column: ``ln(N+1) - ln(n+1)``."""
        out: NDArray[np.float64] = np.log(self.n_docs_ + 1.0) - np.log(self.df_ + 1.0)
        return out

    def feature_weights(self) -> NDArray[np.float64]:
        """The corpus weight applied to every column (idf, idf squared, or ones)."""
        if self._weights is None:
            if self.idf == "none":
                self._weights = np.ones(self.n_features)
            elif self.idf == "idf2":
                self._weights = self.idf_**2
            else:
                self._weights = self.idf_
        return self._weights

    # -- transforming ---------------------------------------------------------------
    def transform(self, texts: Sequence[str] | Iterable[str]) -> sp.csr_matrix:
        """Vectorize texts into a CSR matrix of shape (n_texts, n_features)."""
        X = sp.csr_matrix(self._hasher.transform(list(texts)), dtype=np.float64)
        if self.tf == "log":
            np.log(X.data, out=X.data)
            X.data += 1.0
        elif self.tf == "binary":
            X.data[:] = 1.0
        X.data *= self.feature_weights()[X.indices]
        if self.normalize:
            X = normalize_rows(X)
        X.sort_indices()
        return X

    # -- state ----------------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        stop: Any = self.stop_words if isinstance(self.stop_words, str) else sorted(self.stop_words)
        return {"n_features": self.n_features, "tf": self.tf, "idf": self.idf,
                "normalize": self.normalize, "stop_words": stop, "ngram_max": self.ngram_max}

    def to_state(self) -> dict[str, Any]:
        nz = np.flatnonzero(self.df_)
        return {"kind": "vectorizer", "version": 1, "params": self.params(), "n_docs": self.n_docs_,
                "df_index": encode_array(nz.astype(np.int64)), "df_count": encode_array(self.df_[nz])}

    @classmethod
    def from_state(cls, state: Any) -> Vectorizer:
        s = check_version(state, "vectorizer")
        v = cls(**s["params"])
        idx = decode_array(s["df_index"], name="df_index")
        cnt = decode_array(s["df_count"], name="df_count")
        if idx.shape != cnt.shape or (idx.size and (idx.min() < 0 or idx.max() >= v.n_features)):
            from sift.filters.errors import StateError

            raise StateError("vectorizer: document-frequency arrays are inconsistent")
        v.df_[idx] = cnt
        v.n_docs_ = int(s["n_docs"])
        return v


def normalize_rows(X: sp.csr_matrix) -> sp.csr_matrix:
    """Scale each row to unit Euclidean length (empty rows stay empty)."""
    X = sp.csr_matrix(X, dtype=np.float64, copy=True)
    lengths = np.diff(X.indptr)
    rows = np.repeat(np.arange(X.shape[0]), lengths)
    norms = np.sqrt(np.bincount(rows, weights=X.data**2, minlength=X.shape[0]))
    norms[norms == 0] = 1.0
    X.data /= norms[rows]
    return X
