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

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.preprocessing import normalize

from sift.filters.fusion import FusionError

REPRESENTATIONS: tuple[str, ...] = ("word", "char", "lsa")


class TextRepresentations:
    """Fit word TF-IDF, character n-gram TF-IDF and LSA on a corpus.

    Parameters
    ----------
    names
        Which representations, in column order (subset of ``word``, ``char``,
        ``lsa``).
    lsa_components
        Dimension of the LSA space.
    min_df
        Minimum document frequency of a word or character n-gram.
    seed
        Seed of the randomised SVD.

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

    def fit(self, texts: Sequence[str]) -> TextRepresentations:
        """Fit every representation on ``texts`` and keep the document matrices."""
        names = list(self.names)
        unknown = [n for n in names if n not in REPRESENTATIONS]
        if unknown or not names:
            raise FusionError(
                f"names must be a non-empty subset of {', '.join(REPRESENTATIONS)}, got {names}"
            )
        if self.lsa_components < 1:
            raise FusionError(f"lsa_components must be >= 1, got {self.lsa_components}")
        if len(texts) < 2:
            raise FusionError(f"need at least 2 texts, got {len(texts)}")
        min_df = self.min_df if len(texts) >= 10 * self.min_df else 1
        mats: dict[str, Any] = {}
        word: sp.csr_matrix | None = None
        if "word" in names or "lsa" in names:
            vec = TfidfVectorizer(sublinear_tf=True, stop_words="english", ngram_range=(1, 2),
                                  min_df=min_df, dtype=np.float64)
            word = vec.fit_transform(texts).tocsr()
            if "word" in names:
                mats["word"] = word
        if "char" in names:
            cvec = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True,
                                   min_df=min_df, dtype=np.float64, max_features=300_000)
            mats["char"] = cvec.fit_transform(texts).tocsr()
        if "lsa" in names:
            assert word is not None
            k = max(1, min(self.lsa_components, min(word.shape) - 1))
            svd = TruncatedSVD(n_components=k, random_state=self.seed)
            mats["lsa"] = normalize(svd.fit_transform(word))
        self.names_ = names
        self.matrices_ = mats
        return self

    def dissimilarities(self, query: int) -> NDArray[np.float64]:
        """Cosine dissimilarity ``1 - cos`` of every document to document ``query``.

        Returns an (n, J) array; row ``query`` is zero.
        """
        n = next(iter(self.matrices_.values())).shape[0]
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
