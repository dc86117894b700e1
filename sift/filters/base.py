"""The interface every scoring model follows.

A model turns document vectors into scores. It is bound once to its profile's
context (number of columns, corpus weights, the profile's :class:`ExampleSet`),
started from a query vector, then learns from labelled examples incrementally.
``learn`` returns nothing; ``unlearn`` takes learned examples back (a corrected
judgment). ``loo_scores`` scores each example of the bound set
by the model trained without that example (what TROT needs; scoring judged
examples by a model trained on them biases the threshold upwards).

Stacked scoring: :meth:`ScoringModel.build_stack` receives several models of
the same class and returns an object whose ``score(X)`` gives the scores of
every document against every model in one sparse product where possible.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from sift.filters.errors import FilterError, ParameterError

if TYPE_CHECKING:  # examples.py imports MAX_WEIGHT from here
    from sift.filters.examples import ExampleSet


class Stack:
    """Scores documents against several models at once (fallback: one at a time)."""

    def __init__(self, models: Sequence[ScoringModel]) -> None:
        self.models = list(models)

    def score(self, X: sp.csr_matrix) -> NDArray[np.float64]:
        out = np.zeros((X.shape[0], len(self.models)))
        for j, m in enumerate(self.models):
            out[:, j] = m.score(X)
        return out

    def update(self, j: int, model: ScoringModel) -> bool:
        """Take model ``j``'s new state into the stack; ``False`` asks for a rebuild.

        The fallback stack scores each model directly, so it is always current.
        """
        self.models[j] = model
        return True


class ScoringModel(ABC):
    """Base class of the scoring models (Rocchio, Kantor, kNN, fusion)."""

    name: ClassVar[str] = ""

    n_features_: int
    feature_weights_: NDArray[np.float64] | None
    examples_: ExampleSet | None

    @property
    def no_evidence_score(self) -> float | None:
        """A score at or below this carries no evidence of relevance, so a profile never
        delivers it whatever its threshold (``None``, the default: any score may be)."""
        return None

    def bind(
        self,
        n_features: int,
        feature_weights: NDArray[np.float64] | None,
        examples: ExampleSet | None,
    ) -> None:
        """Attach the profile's context (not part of the model's own state)."""
        self.n_features_ = n_features
        self.feature_weights_ = feature_weights
        self.examples_ = examples

    @abstractmethod
    def start(self, query: sp.csr_matrix | None) -> None:
        """Forget everything learned and start from the query vector."""

    @abstractmethod
    def learn(
        self,
        X: sp.csr_matrix,
        labels: NDArray[np.int8],
        weights: NDArray[np.float64],
        real: NDArray[np.bool_],
    ) -> None:
        """Learn from labelled rows (1 relevant, -1 non-relevant)."""

    @abstractmethod
    def unlearn(
        self,
        X: sp.csr_matrix,
        labels: NDArray[np.int8],
        weights: NDArray[np.float64],
        real: NDArray[np.bool_],
    ) -> None:
        """Take back examples learned before with these labels and weights (the inverse of
        :meth:`learn`; a profile correcting a judgment unlearns its old label and learns
        the new one). Running sums lose the rows' contributions, up to rounding (a
        cancellation residue is set to 0, see
        :data:`~sift.filters.accumulator.RESIDUE`); what is derived from them (cached
        products, selections, solved weights) is brought up to date as after
        :meth:`learn`. The examples themselves are the profile's to change."""

    @abstractmethod
    def score(self, X: sp.csr_matrix) -> NDArray[np.float64]:
        """Score of each row of ``X``."""

    @abstractmethod
    def loo_scores(self) -> NDArray[np.float64]:
        """Leave-one-out scores of the bound examples, in their order."""

    #: Whether computing :meth:`loo_scores` changes the model (it brings something up to
    #: date lazily, from the examples of that moment): a profile then learns a batch of
    #: judgments group by group (a judgment, or a group of ``update=n``), settling the
    #: model (:meth:`settle`) after each group where its re-threshold would compute the
    #: scores, so that a batch leaves the model as judgments one by one do.
    settles_per_group: ClassVar[bool] = False

    @contextlib.contextmanager
    def settling(self) -> Iterator[None]:
        """While a profile settles a batch group by group (see ``settles_per_group``),
        before the batch's own re-threshold: a model may bound the work it brings up to
        date there (fusion: ``batch_solve_seconds``). Nothing by default."""
        yield

    def settle(self) -> None:
        """Bring up to date what computing :meth:`loo_scores` would, where a re-threshold
        would compute them (see ``settles_per_group``). By default: compute them."""
        self.loo_scores()

    @abstractmethod
    def get_params(self) -> dict[str, Any]:
        """Hyperparameters as given to ``__init__``."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Learned state, JSON-safe."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore learned state from :meth:`state_dict`."""

    @classmethod
    def build_stack(cls, models: Sequence[ScoringModel]) -> Stack:
        return Stack(models)

    def _examples(self) -> ExampleSet:
        if self.examples_ is None:
            raise FilterError(f"{self.name} model is not bound to an example set")
        return self.examples_


def init_params(obj: object) -> dict[str, Any]:
    """Every argument of ``type(obj).__init__`` by name, read from the attribute of that
    name (scikit-learn's convention: hyperparameters kept under their own names), for the
    ``get_params`` of the classes that follow it.

    >>> class Demo:
    ...     def __init__(self, k: int = 3, *, rule: str = "mean") -> None:
    ...         self.k, self.rule = k, rule
    >>> init_params(Demo(5))
    {'k': 5, 'rule': 'mean'}
    """
    return {name: getattr(obj, name) for name in inspect.signature(type(obj)).parameters}


#: The largest weight a model's hyperparameters may give (query, positive and negative
#: weights): far above any useful one, far below what overflows the scores
MAX_WEIGHT = 1e6


def check_positive(name: str, value: Any, *, allow_zero: bool = False,
                   at_most: float | None = None) -> None:
    """Refuse ``value`` unless it is a finite Python ``int`` or ``float`` (not a boolean),
    above 0 (at least 0 with ``allow_zero``) and at most ``at_most``.

    Raises
    ------
    ParameterError
        Naming ``name`` and the value received.

    Examples
    --------
    >>> check_positive("alpha", 0.5)
    >>> check_positive("alpha", 10**400)
    Traceback (most recent call last):
    ...
    sift.filters.errors.ParameterError: alpha must be a finite number > 0, got 1000...
    """
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    try:
        ok = ok and math.isfinite(value)  # (an int beyond a float's range overflows)
    except OverflowError:
        ok = False
    ok = ok and (value >= 0 if allow_zero else value > 0)
    ok = ok and (at_most is None or value <= at_most)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        if at_most is not None:
            bound += f" and <= {at_most:g}"
        raise ParameterError(f"{name} must be a finite number {bound}, got {value!r:.60}")
