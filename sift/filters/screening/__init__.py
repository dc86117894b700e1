"""Review mode: technology-assisted review with continuous active learning.

:class:`Review` is the stateful, incremental core (add documents, get a batch to
judge, record judgments, estimate R, decide to stop, save and restore state). The
estimators and stopping rules are plain functions in :mod:`.estimators` and
:mod:`.stopping`; :func:`.simulation.simulate` drives a review with gold labels.
Pure numpy / scipy / scikit-learn: no file or network I/O.
"""

from sift.filters.screening.cal import DEFAULTS, STATE_VERSION, Review
from sift.filters.screening.errors import ScreeningError
from sift.filters.screening.estimators import Estimate

__all__ = ["DEFAULTS", "STATE_VERSION", "Estimate", "Review", "ScreeningError"]
