"""The peer of the engine benchmark: online logistic regression per profile.

Same features (sift's vectorizer output, restricted to the columns seen in
training: a dense coefficient vector over 2**20 hashed columns per profile would
not fit), same starting examples (each sift profile's initial labelled set:
its initial positives and pseudolabels), same feedback rule (only delivered
documents are judged), delivering at p >= 0.5. scikit-learn's
``SGDClassifier(loss="log_loss")`` with ``partial_fit``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import SGDClassifier

from sift.filters.bank import Hit, ProfileBank
from sift.filters.sparse import restrict
from sift.filters.vectorize import Vectorizer


class OnlineLogisticPeer:
    """A Filterer (see sift.replay) of one SGD logistic regression per profile."""

    def __init__(self, bank: ProfileBank, vec: Vectorizer, X_train: sp.csr_matrix, seed: int = 0) -> None:
        self.cols = np.unique(X_train.indices).astype(np.int64)
        self.names = bank.names
        self.models: dict[str, SGDClassifier] = {}
        for p in bank:
            ex = p.examples_
            clf = SGDClassifier(loss="log_loss", random_state=seed)
            X = restrict(ex.X, self.cols)
            y = (ex.labels > 0).astype(int)
            # partial_fit needs both classes declared; weights as given
            clf.partial_fit(X, y, classes=np.array([0, 1]), sample_weight=ex.weights)
            self.models[p.name] = clf
        self._stack()

    def _stack(self) -> None:
        self.W = np.stack([self.models[n].coef_.ravel() for n in self.names], axis=1)
        self.b = np.array([self.models[n].intercept_[0] for n in self.names])

    def decide(self, X: sp.csr_matrix) -> list[Hit]:
        z = np.asarray(restrict(X, self.cols) @ self.W) + self.b
        p = 1.0 / (1.0 + np.exp(-z))
        rows, cols = np.nonzero(p >= 0.5)
        return [Hit(int(r), self.names[c], float(p[r, c]), 0.5, 0) for r, c in zip(rows, cols, strict=True)]

    def learn(self, profile: str, x: sp.csr_matrix, relevant: bool) -> bool:
        clf = self.models[profile]
        clf.partial_fit(restrict(x, self.cols), np.array([int(relevant)]))
        j = self.names.index(profile)
        self.W[:, j] = clf.coef_.ravel()
        self.b[j] = clf.intercept_[0]
        return True
