"""A profile: a scoring model + a TROT threshold + an update policy.

Initial training follows the design's steps B2 to B5: the query text and the
initial positives (weight 1) give a first model; that model pseudolabels the
training set; the final model and threshold are learned from all labels (real
and pseudo). Afterwards every judgment goes through the update policy:

- ``"never"``: batch filtering, judgments are counted and ignored;
- ``"every"``: the model learns the judgment and the threshold is re-trained at once;
- an integer ``n``: judgments wait in a buffer and are applied ``n`` at a time.

The threshold is TROT on the leave-one-out scores of the profile's capped
example set (see :mod:`sift.filters.examples`), so a re-threshold costs one
sparse product over at most ``max_examples`` rows, whatever the history. By
default pseudo-positives are left out of TROT, and a profile whose lowest-scoring
judged deliveries are mostly relevant explores below TROT's threshold (see
``explore``): both chosen on the validation split (``benchmarks/engine_variants.py``).

Examples
--------
>>> from sift.filters.vectorize import Vectorizer
>>> train = ["wheat exports rose", "wheat crop", "oil prices", "gold mine", "oil output"]
>>> v = Vectorizer(n_features=2**12).fit(train)
>>> p = Profile("wheat", query="wheat", model="rocchio", pseudolabel={})  # 5 documents: no pseudolabels
>>> p.fit(v.transform(["wheat"]), v.transform(train), positives=[0], feature_weights=v.feature_weights())
>>> bool(p.decide(v.transform(["wheat harvest"]))[0]), bool(p.decide(v.transform(["oil"]))[0])
(True, False)
>>> p.learn_one(v.transform(["wheat tender"]), relevant=True)
>>> p.n_judged_, p.version_
(1, 2)
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from sift.filters.base import MAX_WEIGHT, ScoringModel
from sift.filters.errors import FilterError, ParameterError, StateError
from sift.filters.examples import ExampleSet, first_bad_value
from sift.filters.kantor import Kantor
from sift.filters.knn import KNN
from sift.filters.measures import get_measure
from sift.filters.pseudolabel import Pseudolabeler
from sift.filters.rocchio import Rocchio
from sift.filters.sparse import rows_equal, stack_rows
from sift.filters.state import (
    MAX_COUNT,
    STATE_VERSION,
    check_version,
    decode_count,
    decode_csr,
    encode_csr,
)
from sift.filters.threshold import stable_argsort, trot, zero_utility_threshold

MODEL_CLASSES: dict[str, type[ScoringModel]] = {"rocchio": Rocchio, "kantor": Kantor, "knn": KNN}

#: ``negative_mass="auto"`` per model: chosen on the validation split (see ``Profile``;
#: fusion with ``reopen_share`` below, three seeds, forty-first session).
AUTO_NEGATIVE_MASS: dict[str, float | None] = {"rocchio": 3.0, "kantor": 3.0, "knn": 3.0,
                                               "fusion": 3.0}
#: ``reopen_share="auto"`` per model, chosen on the validation split with ten seeds (see
#: ``Profile``; fusion three seeds, with ``negative_mass`` above).
AUTO_REOPEN_SHARE: dict[str, float | None] = {"rocchio": 0.05, "kantor": 0.05, "knn": 0.05,
                                              "fusion": 0.05}
#: ``explore="auto"`` per model (others: 0.8), chosen on the validation split (see ``Profile``)
AUTO_EXPLORE: dict[str, float] = {"knn": 0.4}
#: ``size_cut="auto"`` per model (others: None, off), chosen on the validation split with
#: ten seeds (see ``Profile``)
AUTO_SIZE_CUT: dict[str, float] = {"rocchio": 0.3}
#: The largest magnitude of a judged vector's values and of a judgment's weight: far
#: above any vectorizer's, far below what overflows the running sums and their products
#: (the bound on the models' own weights)
MAX_VALUE = MAX_WEIGHT

#: Chosen on a validation split of the Reuters-21578 training set (first 70% as
#: training, last 30% as the stream), never on the test stream: 3 of the top 10 as
#: relevant at weight 0.5; a random fifth of all unlabelled training documents as
#: non-relevant at weight 0.1 (they stand for the unjudged stream, most of which is
#: non-relevant, and give TROT something below the positives to place the threshold
#: against).
DEFAULT_PSEUDOLABEL: dict[str, Any] = {
    "max_pos_rank": 10,
    "pos_fraction": 0.3,
    "pos_weight": 0.5,
    "min_neg_rank": 1,
    "neg_fraction": 0.2,
    "neg_weight": 0.1,
}


def model_class(name: str) -> type[ScoringModel]:
    """The scoring-model class registered under ``name``."""
    if name == "fusion" and "fusion" not in MODEL_CLASSES:
        try:
            from sift.filters.fusion import FusionModel
        except ImportError:
            raise ParameterError("model 'fusion' is not available") from None
        MODEL_CLASSES["fusion"] = FusionModel
    try:
        return MODEL_CLASSES[name]
    except KeyError:
        raise ParameterError(
            f"model must be one of {', '.join([*MODEL_CLASSES, 'fusion'])}, got {name!r}"
        ) from None


def _weight_ok(weight: Any) -> bool:
    """Whether ``weight`` is a judgment's weight: a number (not a bool) in (0, MAX_VALUE]
    (an int too large for a float is not: it raised OverflowError in ``isfinite``)."""
    if isinstance(weight, bool | np.bool_) or not isinstance(
            weight, int | float | np.integer | np.floating):
        return False
    try:
        return bool(math.isfinite(weight) and 0 < weight <= MAX_VALUE)
    except OverflowError:
        return False


def _threshold(value: Any, name: str) -> float:
    """A stored threshold: ``None`` (meaning +inf) or a finite number, nothing else."""
    if value is None:
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise StateError(f"profile: {name} must be null or a finite number, got {value!r}")
    return float(value)


def _legacy_params(params: dict[str, Any], state: dict[str, Any]) -> None:
    """Give ``params`` (a stored profile state's, changed in place) the behaviour the
    profile was fitted with where the state predates a parameter whose default is not
    that behaviour (fiftieth session, docs/reliability.md item 82). The profile then
    writes the values out, so its next record no longer depends on these markers.

    - No ``trot_pseudo_positives``, ``explore`` (e53ad73, 1 December 01:10): TROT counted
      the pseudo-positives and nothing explored. No ``silent_explore`` (b92c9d2, 04:02): a
      profile TROT silenced did not explore.
    - No ``silenced_at_fit`` in the state (329eefc, 14:22, an hour before Kantor's
      ``query_weight`` came with 1.5, 0e6ef01): Kantor's formula was the design's,
      ``query_weight`` 1, for a Kantor profile and a fusion profile's Kantor component
      alike, unless the spec set it. The two commits between the marker and the new
      default wrote states read with 1.5 (one hour of the development history).
    """
    params.setdefault("trot_pseudo_positives", True)
    params.setdefault("explore", 0.0)
    params.setdefault("silent_explore", False)
    if "silenced_at_fit" in state:
        return
    mp = params.get("model_params")
    if not isinstance(mp, dict):
        return  # refused by the constructor, with its reason
    if params.get("model") == "kantor":
        params["model_params"] = {"query_weight": 1.0, **mp}
    elif params.get("model") == "fusion":
        sub = mp.get("kantor")
        if sub is None or isinstance(sub, dict):
            params["model_params"] = {**mp, "kantor": {"query_weight": 1.0, **(sub or {})}}


def ranking_size(scores: NDArray[np.float64], cut: float) -> NDArray[np.bool_]:
    """Which documents of a training ranking look like the top of it: those whose score
    above the median is at least ``cut`` of the top score's (none when the top score is
    the median).

    >>> ranking_size(np.array([1.0, 0.7, 0.5, 0.1, 0.1, 0.1, 0.0]), 0.3).tolist()
    [True, True, True, False, False, False, False]
    """
    base = float(np.median(scores))
    span = float(scores.max()) - base
    if not span > 0:
        return np.zeros(scores.shape, dtype=bool)
    return np.asarray(scores - base >= cut * span)


def _look_alikes(scores: NDArray[np.float64], sample: NDArray[np.bool_], pos: NDArray[np.bool_]) -> int:
    """How many of the ``sample`` examples score at least as high as the lowest of the
    ``pos`` ones (both masks non-empty)."""
    return int(np.count_nonzero(scores[sample] >= scores[pos].min()))


def _relevant_flags(relevant: ArrayLike) -> NDArray[np.bool_]:
    """Judgment labels as booleans: booleans, or 1 and 0 (a string such as ``"false"``
    would otherwise read as relevant)."""
    given = np.asarray(relevant).ravel()
    if given.dtype != bool and not (given.dtype.kind in "iuf" and np.isin(given, (0, 1)).all()):
        raise FilterError(f"relevant must be booleans (or 1 and 0), got {given[:3].tolist()!r}")
    return given.astype(bool)


def _check_values(X: sp.csr_matrix, what: str) -> sp.csr_matrix:
    """``X`` with finite values of at most ``MAX_VALUE`` in magnitude (checked before
    anything is learned: a value that overflows the sums would leave the model's scores
    no longer finite), each column stored once (a column stored twice scores the same but
    counts its halves' squares in the leave-one-out terms): a canonical copy if needed,
    never the caller's matrix changed."""
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()  # first: halves of a column may add up past the limit
    bad = first_bad_value(X.data)
    if bad is not None:
        raise FilterError(f"{what} must hold finite values of at most {MAX_VALUE:g} in "
                          f"magnitude, got {bad!r}")
    return X


def _rows_equal(X: sp.csr_matrix, x: sp.csr_matrix) -> NDArray[np.bool_]:
    """Which rows of ``X`` are the canonical one row ``x`` entry for entry (the same
    columns, the same values): one comparison of the rows of ``x``'s length, no loop.

    >>> X = sp.csr_matrix(np.array([[1.0, 0, 2], [1, 0, 0], [1, 0, 2]]))
    >>> _rows_equal(X, X[2]).tolist()
    [True, False, True]
    """
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return rows_equal(X.indptr, X.indices, X.data, np.arange(X.shape[0]), x.indices, x.data)


def check_rows(X: sp.csr_matrix) -> sp.csr_matrix:
    """Judged document vectors as :meth:`Profile.learn_many` takes them (finite values of
    at most ``MAX_VALUE`` in magnitude, each column once; :class:`FilterError` if not):
    for a caller that checks a batch for several profiles before any learns from it."""
    return _check_values(X, "document vectors")


def _after_version(previous: Any, own: int) -> int:
    """``previous + own``, ``previous`` checked: a version (a non-negative int)."""
    if isinstance(previous, bool) or not isinstance(previous, int | np.integer) \
            or not 0 <= int(previous) <= MAX_COUNT - own:
        raise ParameterError(f"previous must be a model version (an integer in [0, "
                             f"2**62]), got {previous!r:.60}")
    return int(previous) + own


def check_documents(X: Any, n_features: int) -> sp.csr_matrix:
    """``X``, documents to score, as a CSR matrix of ``n_features`` columns with finite
    values (:class:`FilterError` if not): a dense array, a list of rows or another sparse
    format is converted, the caller's matrix never changed.

    >>> check_documents([[0.0, 1.0, 0.0]], 3).shape
    (1, 3)
    >>> check_documents([[0.0, float("nan"), 0.0]], 3)
    Traceback (most recent call last):
    ...
    sift.filters.errors.FilterError: documents must hold finite values, got nan in row 0
    """
    if not isinstance(X, sp.csr_matrix):
        try:
            X = sp.csr_matrix(X)
        except (TypeError, ValueError) as exc:
            raise FilterError(f"documents must be a matrix of {n_features} columns, got "
                              f"{type(X).__name__} ({exc})") from None
    if X.ndim != 2 or X.shape[1] != n_features:
        raise FilterError(f"expected a matrix of {n_features} columns, got {X.shape}")
    if X.data.size and not np.isfinite(X.data).all():
        at = int(np.flatnonzero(~np.isfinite(X.data))[0])
        row = int(np.searchsorted(X.indptr, at, side="right")) - 1
        raise FilterError(f"documents must hold finite values, got {float(X.data[at])!r} in row {row}")
    return X


def _check_update(update: Any) -> str | int:
    if update in ("every", "never"):
        return str(update)
    if isinstance(update, int) and not isinstance(update, bool) and update >= 1:
        return update
    if isinstance(update, str) and update.isdigit() and int(update) >= 1:
        return int(update)
    raise ParameterError(f"update must be 'every', 'never' or a positive integer, got {update!r}")


class Profile:
    """A standing filtering profile.

    Parameters
    ----------
    name
        Profile name.
    query
        Query text (kept for reference; the caller vectorizes it).
    model
        ``"rocchio"``, ``"kantor"``, ``"knn"`` or ``"fusion"``.
    model_params
        Hyperparameters of the model class.
    measure
        Effectiveness measure TROT optimises (see :mod:`sift.filters.measures`).
    update
        ``"every"``, ``"never"`` or a positive integer.
    pseudolabel
        Pseudolabeling parameters (see :class:`~sift.filters.pseudolabel.Pseudolabeler`);
        ``None`` uses :data:`DEFAULT_PSEUDOLABEL`, ``{}`` turns it off.
    max_examples
        Cap of the example set (TROT and kNN pool); ``None`` for no cap.
    seed
        Seed of the pseudolabeling random generator.
    threshold_placement
        Where TROT puts the threshold between the lowest accepted example and the next
        lower one (0: at the accepted score, as the design; 0.5, the default: the
        midpoint, the maximum-margin choice, chosen on the validation split).
    fallback_rate
        While the example set holds no relevant example (a profile created from a
        query alone), TROT has nothing to learn from; the threshold is then set to
        deliver this fraction of the training documents (their score quantile; with
        pseudo-negatives drawn from every rank, as by default, the quantile of those
        pseudo-negatives' leave-one-out scores, a random sample of the training set),
        so the profile delivers something and starts receiving feedback.
    trot_pseudo_positives
        Whether pseudo-positives take part in TROT (they always take part in the
        model). Default False: they are picked by the model itself, so their
        leave-one-out scores sit high and pull the threshold down to them, which for a
        category with one or two relevant documents means delivering their look-alikes.
    silent_explore
        A profile that TROT silences (its threshold is ``+inf`` although it has relevant
        examples: e.g. its pseudo-negatives, a random sample of the unlabelled training
        documents, outweigh its three positives, as for a category that is a large share
        of the collection) would never deliver, never be judged and never recover. With
        ``silent_explore`` (default) such a profile is ``silenced_`` and its threshold is
        at most :meth:`silent_threshold`: it delivers at least the top ``fallback_rate``
        of the unlabelled sample while the ``explore_window`` lowest-scoring real
        examples are mostly relevant (the gate of ``explore``), so relevant feedback
        keeps it exploring and junk at the bottom stops it. A profile silenced by its
        initial training stays silenced (its feedback soon gives TROT a finite but
        still too high threshold); one silenced later only while TROT answers No. So
        the flag depends on the state alone, not on how often the threshold was
        re-trained, and :meth:`learn_many` stays exact. Chosen on the validation split
        (there ``earn`` 0.33 -> 0.71 to 0.81 T11SU over 3 seeds).
    negative_mass
        The TROT weight of the pseudo-negatives, scaled to the profile's prevalence.
        They are a random sample of the unlabelled training documents, so those of
        them scoring at least as high as the lowest real positive (leave-one-out
        scores; ``K`` of them, at least 1) estimate how common documents like the
        relevant ones are. Each pseudo-negative then weighs ``m / K`` in TROT (not in
        the model), ``m`` the real positives' total weight capped at
        ``negative_mass``: those ``K`` weigh as much together as the positives they
        were counted against. A rare category (small ``K``) gets a strict threshold, a
        common one a lenient one; one fixed weight (the pseudolabel's ``neg_weight``)
        is right for one prevalence only. ``None``: the pseudolabel weight, as the
        design has it; ``"auto"`` (default): 3.0 for every model. Chosen on the
        validation split with ten seeds (``benchmarks/engine_features.py``,
        ``benchmarks/results/engine_negative_mass.json``; the figures are in
        ``docs/engine.md``); for fusion together with ``reopen_share`` 0.05, three seeds,
        macro T11SU / T11F +0.037 / +0.028 over ``None`` for both, up in all three
        (``benchmarks/fusion_profile.py --split val --models fusion-design,fusion-mass3``;
        ``docs/fusion.md``).
    explore, explore_rate, explore_window, explore_precision
        Exploration below TROT's threshold. Only delivered documents are judged, so no
        relevant document below the threshold is ever seen and TROT's threshold can only
        creep up: a large category stops at its first few dozen deliveries. After each
        re-threshold the threshold is lowered by :meth:`explore_share` of the way down
        to the zero-utility threshold (the lowest one down to which the examples'
        utility ``2a - b`` stays non-negative, Zhai et al.'s beta-gamma thresholding),
        a share that grows with the relevant judgments received (``explore_rate``) and
        vanishes when the ``explore_window`` lowest-scoring real examples are not
        mostly relevant (precision below ``explore_precision``). ``explore=0`` turns
        it off; ``"auto"`` (default) is 0.8, and 0.4 for kNN: with the prevalence-scaled
        pseudo-negatives (``negative_mass``) kNN explored too far for T11F on the
        validation split (ten seeds: 0.8 gave 0.460 / 0.431 macro T11SU / T11F, 0.4
        0.464 / 0.442, 0 0.462 / 0.444, against batch kNN's 0.393 / 0.440), while for
        Rocchio and Kantor 0.4 changed nothing beyond the seeds' spread.
    reopen_share
        A silenced profile stops exploring when junk lands at the bottom of what it
        delivers (see ``silent_explore``). A common category whose first few
        deliveries happen to be non-relevant is then locked out for good, however many
        relevant documents it would find. With ``reopen_share`` a silenced profile
        whose :meth:`prevalence_share` is at least this keeps its exploration cut
        whatever the bottom judgments say: documents like its relevant ones are common,
        so its top ``fallback_rate`` is worth delivering. ``None``: the gate alone
        decides; ``"auto"`` (default): 0.05 for every model (fusion: see
        ``negative_mass``). Validation split, ten seeds, macro T11SU / T11F against
        ``None``: Rocchio +0.000 / +0.008, Kantor +0.003 / +0.029, kNN +0.002 / +0.018
        (``benchmarks/results/engine_reopen_share.json``; ``docs/engine.md``).
    size_cut
        A floor under ``negative_mass``'s ``K`` from the shape of the training ranking.
        ``K`` counts the pseudo-negatives scoring at least as high as the lowest real
        positive, and where the three positives score far above the category's other
        documents (``coffee`` in Reuters-21578: the training ranking's top 40 are all
        ``coffee``, yet ``K`` = 1) each pseudo-negative then weighs 3 and the first
        threshold sits above nearly every relevant document. The initial model's
        training ranking (query and real positives, before pseudolabeling) shows how
        many documents look like its top: those whose score above the median is at
        least ``size_cut`` of the top score's (:func:`ranking_size`). The pseudo-negatives
        expected among them (their count times the share of the unlabelled training
        documents drawn as pseudo-negatives) is ``size_floor_``, and TROT's ``K`` is at
        least that (no floor when the pseudo-negatives are not drawn from every rank,
        ``min_neg_rank`` above 1). ``None``: no floor; ``"auto"`` (default): 0.3 for
        Rocchio, ``None`` for the others. Validation split, ten seeds, Rocchio macro
        T11SU / T11F: 0.4923 / 0.4722 without, 0.4960 / 0.4736 at 0.3 (up in 9 of 10
        seeds), 0.4956 / 0.4721 at 0.2, 0.4935 / 0.4734 at 0.4; at 0.3 Kantor -0.0007 /
        -0.0009 (its floor stays below its ``K``) and kNN +0.0020 / +0.0017 (up in 6 of 10
        seeds, within their spread), so those stay off; fusion was not measured
        (``benchmarks/results/engine_validation_size_cut_s34.json``; ``docs/engine.md``,
        thirty-fourth session).

    Attributes
    ----------
    model_ : ScoringModel
    examples_ : ExampleSet
    threshold_ : float
        Deliver when ``score >= threshold_`` (``inf``: deliver nothing). Kept above the
        model's ``no_evidence_score`` (kNN's positive vote: 0), so a document the model
        scores with no evidence is never delivered. Before the seventeenth session some
        kNN profiles started at 0 and delivered every document (validation, ten seeds,
        0.464 / 0.442 -> 0.466 / 0.443 with the floor; ``docs/engine.md``).
    version_ : int
        Incremented every time the model or threshold changes.
    n_relevant_ : int
        Relevant judgments applied since :meth:`fit` (they drive exploration).
    silenced_ : bool
        The threshold is capped by :meth:`silent_threshold` (see ``silent_explore``):
        TROT answered No to everything at :meth:`fit` (``silenced_at_fit_``) or does now.
    silenced_at_fit_ : bool
        TROT answered No to everything after the initial training.
    size_floor_ : int
        The least ``K`` TROT's pseudo-negative weights use (see ``size_cut``; 0: none),
        set by :meth:`fit`.
    n_judged_ : int
        Real judgments applied. ``n_pending_`` wait in the buffer; ``n_ignored_`` were
        dropped by ``update="never"``.

    Examples
    --------
    >>> from sift.filters.vectorize import Vectorizer
    >>> train = ["wheat exports rose", "wheat harvest delayed", "wheat prices firm",
    ...          "oil prices fell", "bank rates unchanged", "oil output cut"]
    >>> vec = Vectorizer(n_features=2**10).fit(train)
    >>> p = Profile("wheat", query="wheat", pseudolabel={})
    >>> p.fit(vec.transform(["wheat"]), vec.transform(train), positives=[0, 1],
    ...       feature_weights=vec.feature_weights())
    >>> (p.score(vec.transform(["wheat harvest", "oil prices"])) >= p.threshold_).tolist()
    [True, False]
    >>> p.learn_one(vec.transform(["wheat crop"]), relevant=True)  # model and threshold
    >>> p.n_judged_, p.version_
    (1, 2)
    """

    def __init__(
        self,
        name: str,
        *,
        query: str = "",
        model: str = "rocchio",
        model_params: dict[str, Any] | None = None,
        measure: str = "t11su",
        update: str | int = "every",
        pseudolabel: dict[str, Any] | None = None,
        max_examples: int | None = 2000,
        seed: int = 0,
        fallback_rate: float = 0.01,
        threshold_placement: float = 0.5,
        trot_pseudo_positives: bool = False,
        explore: float | str = "auto",
        explore_rate: float = 0.3,
        explore_window: int = 5,
        explore_precision: float = 0.5,
        silent_explore: bool = True,
        negative_mass: float | str | None = "auto",
        reopen_share: float | str | None = "auto",
        size_cut: float | str | None = "auto",
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ParameterError(f"name must be a non-empty string, got {name!r}")
        self.name = name
        self.query = query
        self.model = model
        if model_params is not None and not isinstance(model_params, dict):
            raise ParameterError(f"model_params must be a dict of parameters or None, got {model_params!r}")
        self.model_params = dict(model_params or {})
        if not isinstance(measure, str):  # a profile's state names its measure
            raise ParameterError(f"measure must be a measure's name, got {measure!r}")
        self.measure = measure
        self.update = _check_update(update)
        if pseudolabel is not None and not isinstance(pseudolabel, dict):
            raise ParameterError(f"pseudolabel must be a dict of parameters or None, got {pseudolabel!r}")
        self.pseudolabel = dict(DEFAULT_PSEUDOLABEL if pseudolabel is None else pseudolabel)
        self.max_examples = max_examples
        self.seed = seed
        self.fallback_rate = fallback_rate
        self.threshold_placement = threshold_placement
        self.trot_pseudo_positives = trot_pseudo_positives
        self.explore = explore
        self.explore_rate = explore_rate
        self.explore_window = explore_window
        self.explore_precision = explore_precision
        self.silent_explore = silent_explore
        self.negative_mass = negative_mass
        self.reopen_share = reopen_share
        self.size_cut = size_cut
        for key, share in (("size_cut", size_cut), ("reopen_share", reopen_share)):
            if not (share is None or share == "auto"
                    or (isinstance(share, int | float) and not isinstance(share, bool)
                        and 0.0 < share <= 1.0)):
                raise ParameterError(f"{key} must be 'auto', None or in (0, 1], got {share!r}")
        if not (negative_mass is None or negative_mass == "auto"
                or (isinstance(negative_mass, int | float) and not isinstance(negative_mass, bool)
                    and math.isfinite(negative_mass) and negative_mass > 0)):
            raise ParameterError(f"negative_mass must be 'auto', None or a positive number, "
                                 f"got {negative_mass!r}")
        if not isinstance(silent_explore, bool):
            raise ParameterError(f"silent_explore must be a boolean, got {silent_explore!r}")
        if not isinstance(trot_pseudo_positives, bool):
            raise ParameterError(f"trot_pseudo_positives must be a boolean, got {trot_pseudo_positives!r}")
        for key, value, low, high in (("explore", 0.0 if explore == "auto" else explore, 0.0, 1.0),
                                      ("explore_rate", explore_rate, 0.0, math.inf),
                                      ("explore_precision", explore_precision, 0.0, 1.0 - 1e-9)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                raise ParameterError(f"{key} must be in [{low:g}, {high:g}], got {value!r}")
        if isinstance(explore_window, bool) or not isinstance(explore_window, int) or explore_window < 1:
            raise ParameterError(f"explore_window must be a positive integer, got {explore_window!r}")
        if not (isinstance(threshold_placement, int | float) and 0.0 <= threshold_placement < 1.0):
            raise ParameterError(f"threshold_placement must be in [0, 1), got {threshold_placement!r}")
        if not (isinstance(fallback_rate, int | float) and 0.0 <= fallback_rate <= 1.0):
            raise ParameterError(f"fallback_rate must be in [0, 1], got {fallback_rate!r}")
        get_measure(measure)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ParameterError(f"seed must be an integer >= 0, got {seed!r}")
        self._pseudo = Pseudolabeler.from_params(self.pseudolabel) if self.pseudolabel else None
        cls = model_class(model)
        known = [n for n in inspect.signature(cls.__init__).parameters if n != "self"]
        unknown = sorted(set(self.model_params) - set(known))
        if unknown:
            raise ParameterError(f"model_params for {model!r}: unknown {', '.join(map(repr, unknown))}"
                                 f" (it takes {', '.join(known)})")
        self.model_ = cls(**self.model_params)
        if max_examples is not None and (isinstance(max_examples, bool)
                                         or not isinstance(max_examples, int)
                                         or max_examples < 1):
            raise ParameterError(f"max_examples must be a positive integer or None, got {max_examples!r}")
        self.examples_ = ExampleSet(max_examples, 1)
        self.threshold_ = math.inf
        self.version_ = 0
        self.n_judged_ = 0
        self.n_ignored_ = 0
        self.n_features_ = 0
        self._weighted = False  # bound to a vectorizer's corpus weights (fit, from_state)
        # judgments waiting for the update policy: (rows, labels +1/-1, weights) blocks
        self._pending: list[tuple[sp.csr_matrix, NDArray[np.int8], NDArray[np.float64]]] = []
        self._fitted = False
        self.fallback_threshold_ = math.inf
        self.size_floor_ = 0
        self.n_relevant_ = 0
        self.silenced_ = self.silenced_at_fit_ = False

    # -- configuration ----------------------------------------------------------------
    def get_params(self) -> dict[str, Any]:
        return {"name": self.name, "query": self.query, "model": self.model,
                "model_params": self.model_params, "measure": self.measure, "update": self.update,
                "pseudolabel": self.pseudolabel, "max_examples": self.max_examples, "seed": self.seed,
                "fallback_rate": self.fallback_rate, "threshold_placement": self.threshold_placement,
                "trot_pseudo_positives": self.trot_pseudo_positives, "explore": self.explore,
                "explore_rate": self.explore_rate, "explore_window": self.explore_window,
                "explore_precision": self.explore_precision,
                "silent_explore": self.silent_explore, "negative_mass": self.negative_mass,
                "reopen_share": self.reopen_share, "size_cut": self.size_cut}

    @property
    def explore_(self) -> float:
        """``explore`` resolved: ``"auto"`` becomes the model's value."""
        if self.explore == "auto":
            return AUTO_EXPLORE.get(self.model, 0.8)
        return float(self.explore)

    @property
    def negative_mass_(self) -> float | None:
        """``negative_mass`` resolved: ``"auto"`` becomes the model's value."""
        if self.negative_mass == "auto":
            return AUTO_NEGATIVE_MASS.get(self.model)
        return None if self.negative_mass is None else float(self.negative_mass)

    @property
    def reopen_share_(self) -> float | None:
        """``reopen_share`` resolved: ``"auto"`` becomes the model's value."""
        if self.reopen_share == "auto":
            return AUTO_REOPEN_SHARE.get(self.model)
        return None if self.reopen_share is None else float(self.reopen_share)

    @property
    def size_cut_(self) -> float | None:
        """``size_cut`` resolved: ``"auto"`` becomes the model's value."""
        if self.size_cut == "auto":
            return AUTO_SIZE_CUT.get(self.model)
        return None if self.size_cut is None else float(self.size_cut)

    @property
    def n_pending_(self) -> int:
        return sum(int(p[1].size) for p in self._pending)

    def _bind(self, n_features: int, feature_weights: NDArray[np.float64] | None) -> None:
        self.n_features_ = n_features
        self._weighted = feature_weights is not None
        if self.examples_.n_features != n_features:
            self.examples_ = ExampleSet(self.max_examples, n_features)
        self.model_.bind(n_features, feature_weights, self.examples_)

    # -- initial training (B2-B5) -------------------------------------------------------------
    def fit(
        self,
        query_vector: sp.csr_matrix | None,
        X_train: sp.csr_matrix | None = None,
        *,
        positives: ArrayLike = (),
        labels: ArrayLike | None = None,
        feature_weights: NDArray[np.float64] | None = None,
        n_features: int | None = None,
    ) -> None:
        """Initial training from a query, a training matrix and its known labels.

        Parameters
        ----------
        query_vector
            The vectorized query text (1 x F), or ``None``.
        X_train
            Training documents (m x F), or ``None``. When every row ends up labelled
            (full training) the example set keeps this matrix itself, not a copy, and
            profiles fitted on the same matrix share its compact form: do not change it
            in place afterwards.
        positives
            Rows of ``X_train`` known relevant (weight 1): integer row numbers (a boolean
            mask is refused; pass ``np.flatnonzero(mask)``).
        labels
            Alternatively, a label per training row: 1 relevant, -1 non-relevant,
            0 unknown (full training passes every label; pseudolabeling then only
            touches the unknown rows).
        feature_weights
            The vectorizer's corpus weights (for ``corpus_weight`` options).
        n_features
            Number of columns when neither a query nor a training matrix is given.
        """
        width = next((m.shape[1] for m in (query_vector, X_train) if m is not None), n_features)
        if width is None:
            raise FilterError("fit needs a query vector, a training matrix or n_features")
        # every argument checked before anything changes: a failed fit leaves the
        # profile as it was
        if X_train is not None:
            X_train = _check_values(X_train if isinstance(X_train, sp.csr_matrix)
                                    else sp.csr_matrix(X_train), "X_train")
        if query_vector is not None:
            query_vector = _check_values(sp.csr_matrix(query_vector), "query_vector")
            if query_vector.shape != (1, width):
                raise FilterError(f"query_vector must be 1 x {width}, got {query_vector.shape}")
        if feature_weights is not None:
            fw = np.asarray(feature_weights)
            if fw.shape != (width,) or not np.isfinite(fw).all():
                raise FilterError(f"feature_weights must be {width} finite numbers (one per column), "
                                  f"got shape {fw.shape}")
        given = np.asarray(positives)
        if given.size and given.dtype.kind not in "iu":
            raise FilterError(f"positives must be row numbers of the training matrix, got "
                              f"{given.dtype} values {given.ravel()[:3].tolist()!r} (for a boolean "
                              f"mask pass np.flatnonzero(mask))")
        self._fitted = False
        self._bind(int(width), feature_weights)
        self.examples_ = ExampleSet(self.max_examples, int(width))
        self.model_.bind(int(width), feature_weights, self.examples_)
        q = None if query_vector is None else sp.csr_matrix(query_vector)
        m = 0 if X_train is None else X_train.shape[0]
        lab = np.zeros(m, dtype=np.int8)
        if labels is not None:
            got = np.asarray(labels)
            if got.shape != (m,):
                raise FilterError(f"labels must have one entry per training row ({m}), got {got.shape}")
            # checked before the cast, which would truncate 0.7 to 0 and wrap 257 to 1
            if got.size and got.dtype.kind not in "iuf":
                raise FilterError(f"labels must be 1, -1 or 0 (unknown), got {got.dtype} values "
                                  f"{got[:3].tolist()!r}")
            ok = (got == 1) | (got == -1) | (got == 0)
            if not ok.all():
                raise FilterError(f"labels must be 1, -1 or 0 (unknown), got {got[~ok][0].item()!r} "
                                  f"at row {int(np.flatnonzero(~ok)[0])}")
            lab = got.astype(np.int8)
        pos_rows = given.astype(np.int64).ravel()
        if pos_rows.size and (pos_rows.min() < 0 or pos_rows.max() >= m):
            bad = pos_rows[(pos_rows < 0) | (pos_rows >= m)][0]
            raise FilterError(f"positives must be rows of the training matrix (0..{m - 1}), got {bad}")
        lab[pos_rows] = 1
        self.size_floor_ = 0
        weights = np.ones(m)
        real = lab != 0
        # B2-B3: model from the query and the known labels
        self.model_.start(q)
        if X_train is not None and real.any():
            rows = np.flatnonzero(real)
            self.model_.learn(X_train[rows], lab[rows], weights[rows], real[rows])
        # B4: pseudolabel the unknown training rows
        if X_train is not None and self._pseudo is not None and (lab == 0).any():
            if isinstance(self.model_, KNN):  # kNN needs its pool before it can score
                rows = np.flatnonzero(real)
                self.examples_.add(X_train[rows], lab[rows], weights[rows], real[rows])
                self._add_query_example(q)
            scores = self.model_.score(X_train)
            rng = np.random.default_rng(self.seed)
            # a pseudo-positive must outscore a document sharing nothing with the model
            blank = float(self.model_.score(sp.csr_matrix((1, int(width))))[0])
            idx, plab, pw = self._pseudo.select(scores, lab, rng, no_evidence=blank)
            self.size_floor_ = self._size_floor(scores, lab, int(np.count_nonzero(plab < 0)))
            lab[idx] = plab
            weights[idx] = pw
            self.examples_ = ExampleSet(self.max_examples, int(width))
            self.model_.bind(int(width), feature_weights, self.examples_)
        # B5: model and threshold from all labels
        self.model_.start(q)
        if X_train is not None:
            rows = np.flatnonzero(lab != 0)
            if rows.size:
                self.model_.learn(X_train[rows], lab[rows], weights[rows], real[rows])
                share = rows.size == m
                sub = X_train if share else X_train[rows]
                self.examples_.add(sub, lab[rows], weights[rows], real[rows], share=share)
        self._add_query_example(q)
        # a refit starts afresh: no judgment applied, ignored or waiting (the version goes on)
        self.n_judged_ = self.n_ignored_ = self.n_relevant_ = 0
        self._pending = []
        self.silenced_ = self.silenced_at_fit_ = False
        self.fallback_threshold_ = math.inf
        ex = self.examples_
        # no positive TROT may use (pseudo-positives are left out of it by default): a
        # query-only profile must still deliver something, or it never gets feedback
        trusted = ex.real if not self.trot_pseudo_positives else np.ones(len(ex), bool)
        no_positive = not np.any((ex.labels > 0) & trusted)
        # the same cut serves a profile that TROT silences (see silent_threshold)
        if (no_positive or self.silent_explore) and X_train is not None and m and self.fallback_rate > 0:
            sample = np.flatnonzero((ex.labels < 0) & ~ex.real)
            if self._pseudo is not None and self._pseudo.negatives_sample_all \
                    and sample.size >= 1.0 / self.fallback_rate:
                # pseudo-negatives drawn from every rank are a random sample of the
                # training set: the cut of their leave-one-out scores (which TROT needs
                # next anyway) instead of scoring all of it (kNN: most of a fit)
                scores = self.model_.loo_scores()[sample]
            else:
                scores = self.model_.score(X_train)
            top = max(math.ceil(self.fallback_rate * scores.size), 1)
            cut = float(np.partition(scores, scores.size - top)[scores.size - top])
            floor = self.model_.no_evidence_score
            if floor is not None and cut <= floor:
                # fewer than the top fallback_rate carry evidence (a query of rare words,
                # or of words no training document has): deliver each document that
                # does, rather than none ever
                cut = math.nextafter(floor, math.inf)
            self.fallback_threshold_ = self._evidence_cut(cut)
        self._rethreshold()
        self._fitted = True
        self.silenced_at_fit_ = self.silenced_

    def _size_floor(self, scores: NDArray[np.float64], labels: NDArray[np.int8], n_sample: int) -> int:
        """How many of the ``n_sample`` pseudo-negatives, drawn from the unlabelled training
        documents (``labels == 0``), are expected to look like the top of the initial
        model's training ranking (:func:`ranking_size` at ``size_cut``): 0 without a cut,
        and when the pseudo-negatives are not drawn from every rank (``min_neg_rank`` above
        1 leaves the top of the ranking out of the sample)."""
        cut = self.size_cut_
        unlabelled = labels == 0
        n_unlabelled = int(np.count_nonzero(unlabelled))
        if cut is None or n_sample == 0 or n_unlabelled == 0 or scores.size == 0 \
                or self._pseudo is None or not self._pseudo.negatives_sample_all:
            return 0
        size = int(np.count_nonzero(ranking_size(scores, cut) & unlabelled))
        return round(size * n_sample / n_unlabelled)

    def _add_query_example(self, q: sp.csr_matrix | None) -> None:
        """kNN's pool takes the query as a relevant pseudo-document (``query_weight``)."""
        model = self.model_
        if isinstance(model, KNN) and model.query_weight > 0 and q is not None and q.nnz:
            self.examples_.add(q, np.ones(1, np.int8), np.array([float(model.query_weight)]),
                               np.zeros(1, bool))

    # -- scoring ------------------------------------------------------------------------
    def score(self, X: sp.csr_matrix) -> NDArray[np.float64]:
        """Scores of the rows of ``X`` (documents of :attr:`n_features_` columns with
        finite values, see :func:`check_documents`)."""
        self._check_fitted()
        return self.model_.score(check_documents(X, self.n_features_))

    def decide(self, X: sp.csr_matrix) -> NDArray[np.bool_]:
        """``score >= threshold_`` for each row of ``X``."""
        return np.asarray(self.score(X) >= self.threshold_)

    # -- feedback ----------------------------------------------------------------------
    def learn_one(self, x: sp.csr_matrix, relevant: bool, weight: float = 1.0) -> None:
        """Apply (or buffer, or ignore) one real judgment of a document vector."""
        self._check_fitted()
        x = x if isinstance(x, sp.csr_matrix) else sp.csr_matrix(x)
        if x.shape != (1, self.n_features_):
            raise FilterError(f"expected a 1 x {self.n_features_} vector, got {x.shape}")
        if not _weight_ok(weight):
            raise FilterError(f"weight must be a positive number of at most {MAX_VALUE:g}, got {weight!r:.60}")
        self.learn_many(x, [relevant], [weight])

    def learn_many(self, X: sp.csr_matrix, relevant: ArrayLike, weights: ArrayLike | None = None) -> None:
        """Apply (or buffer, or ignore) real judgments of the rows of ``X``, in order.

        The result is exactly that of calling :meth:`learn_one` on each row in turn
        (the same running sums, examples, pending buffer and final threshold; with
        weights other than 1, Rocchio's weight totals add a batch's weights pairwise, so
        they may differ from one by one in the last bit), but the
        threshold is re-trained once per batch instead of once per judgment: under
        ``update="every"`` it is current when the call returns, which is when the next
        document can be scored. Under ``update=n`` the complete groups of ``n`` are
        applied and the rest stays pending, as one by one.

        Parameters
        ----------
        X
            Judged document vectors, one per row (``m x n_features``).
        relevant
            One boolean per row.
        weights
            One positive weight per row (default 1).
        """
        self._check_fitted()
        X = X if isinstance(X, sp.csr_matrix) else sp.csr_matrix(X)
        rel = _relevant_flags(relevant)
        m = X.shape[0]
        if X.ndim != 2 or X.shape[1] != self.n_features_ or rel.size != m:
            raise FilterError(f"expected an m x {self.n_features_} matrix and m labels, "
                              f"got {X.shape} and {rel.size} labels")
        X = _check_values(X, "document vectors")
        try:
            w = np.ones(m) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
        except (OverflowError, TypeError, ValueError):  # e.g. an int beyond any float
            raise FilterError(f"weights must be {m} positive numbers of at most {MAX_VALUE:g}, "
                              f"got {weights!r:.60}") from None
        if w.size != m:
            raise FilterError(f"weights must be {m} positive finite numbers, got {w.size} weights")
        bad = ~(np.isfinite(w) & (w > 0) & (w <= MAX_VALUE))
        if bad.any():
            raise FilterError(f"weights must be positive numbers of at most {MAX_VALUE:g}, got "
                              f"{w[bad][:3].tolist()!r} ({int(bad.sum())} bad of {m})")
        if m == 0:
            return
        if self.update == "never":
            self.n_ignored_ += m
            return
        # the rows are the caller's: a buffer it fills again must not change what waits
        self._pending.append((X if self.update == "every" else X.copy(),
                              np.where(rel, 1, -1).astype(np.int8), w))
        every = 1 if self.update == "every" else int(self.update)
        waiting = self.n_pending_
        if waiting >= every:
            self._apply(waiting - waiting % every)

    def check_relabel(self, x: Any, relevant: Any, weight: Any) -> tuple[sp.csr_matrix, int, float]:
        """The arguments of :meth:`relabel`, checked (:class:`FilterError` naming the
        parameter and the value): ``x`` as a canonical ``1 x n_features_`` CSR row of
        finite values, the new label (1 or -1) and the weight as a float. Nothing changes."""
        self._check_fitted()
        if not isinstance(relevant, bool | np.bool_):
            raise FilterError(f"relevant must be a bool, got {relevant!r:.60}")
        if not _weight_ok(weight):
            raise FilterError(f"weight must be a finite number > 0 and <= {MAX_VALUE:g}, got {weight!r:.60}")
        if not isinstance(x, sp.csr_matrix):
            try:
                x = sp.csr_matrix(x)
            except (TypeError, ValueError) as exc:
                raise FilterError(f"x must be one row of {self.n_features_} columns, got "
                                  f"{type(x).__name__} ({exc})") from None
        if x.ndim != 2 or x.shape != (1, self.n_features_):
            raise FilterError(f"x must be one row of {self.n_features_} columns, got shape {x.shape}")
        return _check_values(x, "x"), 1 if relevant else -1, float(weight)

    def relabel(self, x: sp.csr_matrix, relevant: bool, weight: float = 1.0) -> bool:
        """Correct a judgment: document ``x``, judged before with the other label and
        ``weight``, is ``relevant`` (a judge who clicked the wrong answer).

        The caller guarantees that earlier judgment (the same vector ``x``, the same
        weight, the other label); the profile finds it, newest first, and changes it:

        1. still waiting in the buffer of ``update=n``: its label changes there, nothing
           is learned now (it is applied, corrected, with its group);
        2. applied, and a real example equal to ``x`` (entry for entry) with the other
           label and this weight is in the example set: the model takes back the old
           label's contribution (:meth:`ScoringModel.unlearn`) and learns the new one,
           the example's label changes in place (its row, vector and weight stay),
           ``n_relevant_`` follows and the threshold is re-trained (``version_`` moves);
        3. applied and since evicted from the capped example set: the model takes back
           the old label's contribution from its running sums, and ``x`` is learned with
           the new label at once as a judgment is (model, example set, threshold), the
           newest example; ``n_relevant_`` follows, ``n_judged_`` stays (a judgment
           corrected, not a new one: :meth:`judgments` still returns exactly the held
           judgments, this one with its new label, now the newest).

        Neither pending nor held while the example set has evicted no judgment (its
        pseudolabels go first), the judgment cannot have been evicted: the profile never
        learned it, and taking its old label out of the sums would take out what was
        never put in, so the correction is refused (:class:`FilterError`, nothing
        changes). :meth:`find_judgment` tells beforehand which case applies.

        The result is that of learning the judgment with its right label in the first
        place up to the rounding of the running sums (Rocchio's, Kantor's, fusion's
        ``v*``: a value whose contributions were all taken back is set to exactly 0, see
        :data:`~sift.filters.accumulator.RESIDUE`), for kNN exactly; in case 3 the
        judgment is also the newest example instead of an evicted one. Fusion re-solves
        its weights at the re-threshold. Under ``update="never"`` judgments are ignored,
        and so is their correction: nothing changes.

        Parameters
        ----------
        x
            The judged document vector, one row of ``n_features_`` columns.
        relevant
            The right label: a bool (a numpy bool too).
        weight
            The judgment's weight, a finite number > 0 (at most ``MAX_VALUE``).

        Returns
        -------
        bool
            ``True`` when the judgment was corrected where it is held (cases 1 and 2, and
            under ``update="never"``), ``False`` when it had been evicted (case 3).

        Raises
        ------
        FilterError
            An untrained profile, ``x`` not one row of the profile's width (or with values
            not finite or beyond ``MAX_VALUE``), ``relevant`` not a bool, a bad weight; a
            judgment the profile never learned (above); the profile is left as it was.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp
        >>> X = sp.csr_matrix(np.eye(4)[:3] * 0.9 + 0.1)
        >>> p, q = Profile("p"), Profile("p")
        >>> for prof in (p, q):
        ...     prof.fit(X[:1], X, positives=[0])
        >>> p.learn_one(X[1:2], relevant=False)  # the wrong button
        >>> p.relabel(X[1:2], relevant=True)     # corrected where it is held
        True
        >>> q.learn_one(X[1:2], relevant=True)   # right the first time
        >>> bool(np.allclose(p.score(X), q.score(X))), p.threshold_ == q.threshold_
        (True, True)
        >>> p.judgments()[1].tolist(), p.n_judged_, p.n_relevant_
        ([True], 1, 1)
        """
        x, new, w = self.check_relabel(x, relevant, weight)
        if self.update == "never":
            return True
        old = -new
        where, at = self._locate(x, old, w)
        if where is None:
            raise FilterError(self._never_learned(relevant, w))
        if where == "pending":  # 1. waiting in the buffer: its label changes there
            b, i = at
            X, lab, wb = self._pending[b]
            lab = lab.copy()
            lab[i] = new
            self._pending[b] = (X, lab, wb)
            return True
        one = np.ones(1, dtype=bool)
        ex = self.examples_
        self.model_.unlearn(x, np.array([old], np.int8), np.array([w]), one)
        self.model_.learn(x, np.array([new], np.int8), np.array([w]), one)
        if where == "held":  # 2. in the example set: its label changes in place
            ex.set_label(at[0], new)
        else:  # 3. evicted: the judgment is learned again, with its new label, as the newest
            ex.add(x, np.array([new], np.int8), np.array([w]), one)
        self.n_relevant_ = max(self.n_relevant_ + new, 0)
        self._rethreshold()
        return where == "held"

    def find_judgment(self, x: sp.csr_matrix, relevant: bool, weight: float = 1.0) -> str | None:
        """Where this profile has a judgment of document ``x`` labelled ``relevant`` with
        ``weight`` (what :meth:`relabel` of the other label would correct), newest first:

        * ``"pending"``: waiting in the buffer of ``update=n``;
        * ``"held"``: a real example equal to ``x`` (entry for entry) with that label and
          weight is in the example set;
        * ``"evicted"``: neither, but the example set has evicted real examples (once its
          pseudolabels are gone it evicts the oldest judgments), so it may be one of them;
        * ``None``: neither, and no judgment was evicted: the profile never learned it
          (another vector, another label or weight, or ignored under ``update="never"``).

        Nothing changes. The arguments are checked as :meth:`relabel` checks them.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp
        >>> X = sp.csr_matrix(np.eye(4)[:3] * 0.9 + 0.1)
        >>> p = Profile("p", update=2)
        >>> p.fit(X[:1], X, positives=[0])
        >>> p.learn_many(X[1:], [False, True])
        >>> p.find_judgment(X[1], False), p.find_judgment(X[1], True)
        ('held', None)
        """
        x, lab, w = self.check_relabel(x, relevant, weight)
        return self._locate(x, lab, w)[0]

    def _locate(self, x: sp.csr_matrix, label: int, weight: float) -> tuple[str | None, tuple[int, int]]:
        """:meth:`find_judgment` of a checked row, with where: (buffer part, row) when
        pending, (example row, 0) when held."""
        for b in range(len(self._pending) - 1, -1, -1):
            X, lab, wb = self._pending[b]
            hit = np.flatnonzero((lab == label) & (wb == weight) & _rows_equal(X, x))
            if hit.size:
                return "pending", (b, int(hit[-1]))
        rows = self.examples_.matching_rows(x, label=label, weight=weight, real=True)
        if rows.size:
            return "held", (int(rows[-1]), 0)
        return ("evicted" if self._judgments_evicted() else None), (-1, -1)

    def _judgments_evicted(self) -> bool:
        """Whether the example set has evicted real examples (judgments, or the real
        labels of :meth:`fit`), whose labels the model's sums still hold. A state saved
        before the forty-eighth session does not count them apart from the pseudolabels:
        then any eviction with no pseudolabel left (pseudolabels go first) counts."""
        ex = self.examples_
        if ex.n_evicted_real is None:
            return ex.n_evicted > 0 and bool(ex.real.all())
        return ex.n_evicted_real > 0

    @staticmethod
    def _never_learned(relevant: bool, weight: float) -> str:
        return (f"relabel to relevant={relevant}: no judgment of x with the other label and "
                f"weight {weight:g} is pending or held, and no judgment was evicted, so the "
                f"profile never learned it (another vector, label or weight); nothing changed")

    def relearn(self, calls: Sequence[tuple[sp.csr_matrix, ArrayLike]]) -> None:
        """Learn a recorded sequence of :meth:`learn_many` calls (rows and labels, weights
        1) in one step, with one re-threshold: exactly the state the calls leave, model
        version included.

        :meth:`learn_many`'s result does not depend on how judgments are cut into calls
        (the same sums, examples, pending buffer and threshold), only the model version
        does: it counts the calls that applied judgments. So the rows are learned as one
        call and the version set to what the calls would have counted
        (:meth:`relearn_rows` with the calls' rows stacked). The streaming service
        re-learns a profile's judgment journal this way on recovery.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp
        >>> X = sp.csr_matrix(np.eye(4)[:3] * 0.9 + 0.1)
        >>> a, b = Profile("p", update="every"), Profile("p", update="every")
        >>> for p in (a, b):
        ...     p.fit(X[:1], X, positives=[0])
        >>> a.learn_many(X[1:2], [True]); a.learn_many(X[2:], [False])
        >>> b.relearn([(X[1:2], [True]), (X[2:], [False])])
        >>> (a.threshold_, a.version_) == (b.threshold_, b.version_)
        True
        """
        self._check_fitted()
        if not calls:
            return
        labels = [_relevant_flags(rel) for _, rel in calls]
        for (X, _), rel in zip(calls, labels, strict=True):
            if X.ndim != 2 or X.shape[0] != rel.size:
                raise FilterError(f"relearn: a call of {X.shape} rows and {rel.size} labels")
        self.relearn_rows(stack_rows([X for X, _ in calls]), np.concatenate(labels),
                          [rel.size for rel in labels])

    def relearn_rows(self, X: sp.csr_matrix, relevant: ArrayLike, sizes: Sequence[int]) -> None:
        """:meth:`relearn` of calls given as their rows stacked in order (``X``, one label
        each) and the number of rows of each call (``sizes``, summing to the rows of
        ``X``): no matrix per call is needed.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp
        >>> rows = sp.csr_matrix(np.eye(4)[:3] * 0.9 + 0.1)
        >>> one = Profile("p", update="every"); one.fit(rows[:1], rows, positives=[0])
        >>> two = Profile("p", update="every"); two.fit(rows[:1], rows, positives=[0])
        >>> one.relearn_rows(rows[1:], [True, False], [2])     # as one learn_many call
        >>> two.relearn_rows(rows[1:], [True, False], [1, 1])  # as two: one version more
        >>> two.version_ - one.version_, one.threshold_ == two.threshold_
        (1, True)
        """
        self._check_fitted()
        rel = _relevant_flags(relevant)
        counts = [int(n) for n in sizes]
        if X.ndim != 2 or X.shape[0] != rel.size or sum(counts) != rel.size \
                or any(n < 0 for n in counts):
            raise FilterError(f"relearn: {X.shape} rows, {rel.size} labels and calls of "
                              f"{sum(counts)} rows")
        if not counts:
            return
        applies = 0  # the calls that would have applied judgments (one version each)
        if self.update != "never":
            every = 1 if self.update == "every" else int(self.update)
            waiting = self.n_pending_
            for n in counts:
                waiting += n
                if n and waiting >= every:
                    applies += 1
                    waiting %= every
        version = self.version_
        self.learn_many(X, rel)
        if applies:
            self.version_ = version + applies

    def judgments(self) -> tuple[sp.csr_matrix, NDArray[np.bool_], NDArray[np.float64]]:
        """The real judgments the profile holds, oldest first: ``(X, relevant, weights)``.

        Those applied that the example set still keeps (the newest ``n_judged_`` real
        examples: the training positives of :meth:`fit` come before them, and the oldest
        real examples are the first evicted after the pseudolabels), then those pending
        under ``update=n``. Judgments evicted from a full example set are not among them.
        A profile rebuilt from a changed spec learns these again (the streaming service
        does), so a change keeps the feedback it had.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp
        >>> X = sp.csr_matrix(np.eye(4)[:3] * 0.9 + 0.1)
        >>> p = Profile("p", update="every")
        >>> p.fit(X[:1], X, positives=[0])
        >>> p.learn_many(X[1:], [True, False])
        >>> J, rel, w = p.judgments()
        >>> (J != X[1:]).nnz, rel.tolist(), w.tolist()
        (0, [True, False], [1.0, 1.0])
        """
        self._check_fitted()
        ex = self.examples_
        real = np.flatnonzero(ex.real)
        rows = real[real.size - min(self.n_judged_, real.size):]
        parts = [(ex.X[rows], ex.labels[rows] > 0, ex.weights[rows])]
        parts += [(X, lab > 0, w) for X, lab, w in self._pending]
        return (stack_rows([x for x, _, _ in parts]),
                np.concatenate([r for _, r, _ in parts]).astype(bool),
                np.concatenate([w for _, _, w in parts]).astype(np.float64))

    def continue_versions(self, previous: int) -> None:
        """Number this profile's model versions on from ``previous``, the ``version_`` of
        the profile it replaces: ``version_`` becomes ``previous`` plus the versions this
        one has made itself (its fit, the judgments it learned), so a profile rebuilt from
        a changed spec never shows a model version the replaced one had already shown
        (the streaming service's decisions carry it as ``model_version``).

        >>> import numpy as np, scipy.sparse as sp
        >>> X = sp.csr_matrix(np.eye(3) * 0.9 + 0.1)
        >>> p = Profile("p"); p.fit(X[:1], X, positives=[0]); p.version_
        1
        >>> p.continue_versions(7); p.version_
        8
        """
        self.version_ = _after_version(previous, self.version_)

    def flush(self) -> None:
        """Apply buffered judgments now and re-threshold."""
        if self._pending:
            self._apply(self.n_pending_)

    def _apply(self, n: int) -> None:
        """Learn the first ``n`` pending judgments, keep the rest pending, re-threshold."""
        X = stack_rows([p[0] for p in self._pending])
        lab = np.concatenate([p[1] for p in self._pending])
        w = np.concatenate([p[2] for p in self._pending])
        rest = X.shape[0] - n
        self._pending = [(X[n:], lab[n:], w[n:])] if rest else []
        if rest:
            X, lab, w = X[:n], lab[:n], w[:n]
        real = np.ones(n, dtype=bool)
        n_rel = int(np.count_nonzero(lab > 0))
        every = 1 if self.update == "every" else int(self.update)
        if self.model_.settles_per_group and n > every:
            # group by group, as one by one: the model computes its leave-one-out scores
            # where a re-threshold would (see ScoringModel.settles_per_group)
            last = (n - 1) // every * every  # the start of the last group
            with self.model_.settling():
                for start in range(0, last, every):
                    part = slice(start, start + every)
                    self.model_.learn(X[part], lab[part], w[part], real[part])
                    self.examples_.add(X[part], lab[part], w[part], real[part])
                    if np.any((self.examples_.labels > 0) & self._trot_trusted()):
                        self.model_.settle()
            X, lab, w, real = X[last:], lab[last:], w[last:], real[last:]
        self.model_.learn(X, lab, w, real)
        self.examples_.add(X, lab, w, real)
        self.n_judged_ += n
        self.n_relevant_ += n_rel
        self._rethreshold()

    def _trot_trusted(self) -> NDArray[np.bool_]:
        """TROT's examples: all, or without the pseudo-positives."""
        ex = self.examples_
        return np.ones(len(ex), bool) if self.trot_pseudo_positives else ex.real | (ex.labels < 0)

    def _rethreshold(self) -> None:
        ex = self.examples_
        trusted = self._trot_trusted()
        if np.any((ex.labels > 0) & trusted):
            loo = self.model_.loo_scores()
            scores, labels, weights = loo[trusted], ex.labels[trusted], ex.weights[trusted]
            weights = self.trot_weights(scores, labels, ex.real[trusted], weights)
            thr = trot(scores, labels, weights, measure=self.measure, placement=self.threshold_placement)
            self.silenced_ = self.silent_explore and (math.isinf(thr) or self.silenced_at_fit_)
            if self.silenced_:
                thr = min(thr, self.silent_threshold(loo))
            share = self.explore_share(loo) if math.isfinite(thr) else 0.0
            if share > 0:
                zero = zero_utility_threshold(scores, labels, weights, start=thr,
                                              placement=self.threshold_placement)
                thr -= share * (thr - zero)
            floor = self.model_.no_evidence_score
            if floor is not None and thr <= floor:
                # a threshold at the no-evidence score delivers every document (kNN:
                # a positive with no positive among its neighbours scores 0 leave-one-out)
                thr = math.nextafter(floor, math.inf)
            self.threshold_ = thr
        else:
            self.threshold_ = self.fallback_threshold_
            self.silenced_ = False
        self.version_ += 1

    def trot_weights(self, scores: NDArray[np.float64], labels: NDArray[np.int8], real: NDArray[np.bool_],
                     weights: NDArray[np.float64]) -> NDArray[np.float64]:
        """The examples' weights in TROT: ``weights`` with each pseudo-negative's set to
        ``m / K``, ``K`` the number of pseudo-negatives scoring at least as high as the
        lowest real positive (at least 1 and at least ``size_floor_``) and ``m`` the real
        positives' total weight, at most ``negative_mass`` (see there). Unchanged (the same array) without a mass, a
        real positive or a pseudo-negative.

        >>> p = Profile("x", negative_mass=3.0)
        >>> scores = np.array([0.9, 0.5, 0.6, 0.5, 0.2, 0.1])  # m = 2 positives, K = 2 (0.6, 0.5)
        >>> labels = np.array([1, 1, -1, -1, -1, -1], dtype=np.int8)
        >>> real = np.array([True, True, False, False, False, False])
        >>> p.trot_weights(scores, labels, real, np.array([1, 1, .1, .1, .1, .1])).tolist()
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
        """
        mass = self.negative_mass_
        if mass is None:
            return weights
        sample = (labels < 0) & ~real
        pos = (labels > 0) & real
        if not sample.any() or not pos.any():
            return weights
        k = max(_look_alikes(scores, sample, pos), 1, self.size_floor_)
        out = weights.copy()
        out[sample] = min(mass, float(weights[pos].sum())) / k
        return out

    def silent_threshold(self, loo: NDArray[np.float64] | None = None) -> float:
        """The exploration threshold of a profile that TROT has silenced (``+inf``: none).

        The ``1 - fallback_rate`` quantile (the ``ceil(fallback_rate * n)``-th highest) of
        the current leave-one-out scores of the ``n`` pseudo-negatives, a random sample of
        the unlabelled training documents: so the profile delivers about the top
        ``fallback_rate`` of the stream. When fewer than ``1 / fallback_rate``
        pseudo-negatives are left (evicted, or pseudolabeling off), the training-set cut
        of :meth:`fit` (``fallback_threshold_``). ``+inf`` when the cut carries no evidence
        (:meth:`_evidence_cut`), or while the ``explore_window`` real examples with the
        lowest leave-one-out scores are not mostly relevant (smoothed precision
        ``<= explore_precision``, as for :meth:`explore_share`): junk at the bottom of
        what the profile delivers stops it, unless the profile looks common
        (:meth:`prevalence_share` at least ``reopen_share``).

        Parameters
        ----------
        loo
            The model's leave-one-out scores of the example set (computed when omitted).
        """
        if not self.silent_explore or self.fallback_rate <= 0:
            return math.inf
        if loo is None:
            loo = self.model_.loo_scores()
        reopen = self.reopen_share_
        if self._bottom_precision(loo) <= self.explore_precision and not (
                reopen is not None and self.prevalence_share(loo) >= reopen):
            return math.inf
        ex = self.examples_
        sample = np.flatnonzero((ex.labels < 0) & ~ex.real)
        if sample.size < 1.0 / self.fallback_rate:
            return self.fallback_threshold_
        s = loo[sample]
        top = max(math.ceil(self.fallback_rate * s.size), 1)
        return self._evidence_cut(float(np.partition(s, s.size - top)[s.size - top]))

    def _evidence_cut(self, cut: float) -> float:
        """``cut`` as a fallback threshold, or ``+inf`` when a document scoring it carries
        no evidence of relevance: not above the model's ``no_evidence_score`` (Rocchio and
        positive-vote kNN: 0, so a cut at 0 would deliver documents sharing nothing with
        the profile). A model without one (Kantor, fusion, whose fused scores are
        negated dissimilarities, all below 0) takes any finite cut."""
        floor = self.model_.no_evidence_score
        if not math.isfinite(cut) or (floor is not None and cut <= floor):
            return math.inf
        return cut

    def prevalence_share(self, loo: NDArray[np.float64] | None = None) -> float:
        """How common documents like the profile's relevant ones look: the share of the
        pseudo-negatives (a random sample of the unlabelled training documents) whose
        leave-one-out score is at least the lowest real positive's (0 without a
        pseudo-negative or a real positive).

        Parameters
        ----------
        loo
            The model's leave-one-out scores of the example set (computed when omitted).

        Examples
        --------
        >>> from sift.filters.vectorize import Vectorizer
        >>> docs = ["profit net", "profit shr", "profit up", "rain", "profit net shr", "snow"]
        >>> v = Vectorizer(n_features=2**10).fit(docs)
        >>> p = Profile("earn", query="profit", pseudolabel={"neg_fraction": 1.0, "min_pool": 0})
        >>> p.fit(v.transform(["profit"]), v.transform(docs), positives=[0, 1],
        ...       feature_weights=v.feature_weights())
        >>> p.prevalence_share()  # of the other 4 documents, "profit net shr" scores as high
        0.25
        """
        ex = self.examples_
        sample = (ex.labels < 0) & ~ex.real
        pos = (ex.labels > 0) & ex.real
        if not sample.any() or not pos.any():
            return 0.0
        if loo is None:
            loo = self.model_.loo_scores()
        return _look_alikes(loo, sample, pos) / float(np.count_nonzero(sample))

    def _bottom_precision(self, loo: NDArray[np.float64]) -> float:
        """Precision of the ``explore_window`` real examples with the lowest leave-one-out
        scores, smoothed as ``relevant / (window + 1)`` (0 without real examples)."""
        ex = self.examples_
        real = np.flatnonzero(ex.real)
        low = real[stable_argsort(loo[real])[: self.explore_window]]
        return float(np.count_nonzero(ex.labels[low] > 0)) / (int(low.size) + 1.0)

    def explore_share(self, loo: NDArray[np.float64] | None = None) -> float:
        """How far below TROT's threshold the profile explores, as a share of the way
        down to the zero-utility threshold (0: not at all).

        ``explore * (1 - exp(-explore_rate * r)) * lift``, where ``r`` is the number of
        relevant judgments learned since :meth:`fit` and ``lift`` is
        ``max(0, (p - explore_precision) / (1 - explore_precision))`` with ``p`` the
        precision of the ``explore_window`` real examples with the lowest leave-one-out
        scores, smoothed as ``relevant / (window + 1)``. So a profile explores only
        after relevant feedback, and only while the judgments at the bottom of what it
        delivers are still mostly relevant; junk there stops it.

        Parameters
        ----------
        loo
            The model's leave-one-out scores of the example set (computed when omitted).
        """
        explore = self.explore_
        if explore <= 0 or self.n_relevant_ == 0:
            return 0.0
        if not np.any(self.examples_.real):
            return 0.0
        if loo is None:
            loo = self.model_.loo_scores()
        prec = self._bottom_precision(loo)
        lift = max((prec - self.explore_precision) / (1.0 - self.explore_precision), 0.0)
        return float(explore * (1.0 - math.exp(-self.explore_rate * self.n_relevant_)) * lift)

    def _check_fitted(self) -> None:
        if not self._fitted:
            raise FilterError(f"profile {self.name!r} is not trained yet: call fit first")

    # -- state --------------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """A JSON-safe, versioned snapshot (orjson-serialisable; no pickle)."""
        self._check_fitted()
        pend = (sp.vstack([p[0] for p in self._pending], format="csr") if self._pending
                else sp.csr_matrix((0, self.n_features_)))
        plab = [int(v) for p in self._pending for v in p[1]]
        pw = [float(v) for p in self._pending for v in p[2]]
        return {
            "kind": "profile",
            "version": STATE_VERSION,
            "params": self.get_params(),
            "n_features": self.n_features_,
            "feature_weights": self._weighted,
            "threshold": None if math.isinf(self.threshold_) else self.threshold_,
            "fallback_threshold": (None if math.isinf(self.fallback_threshold_)
                                   else self.fallback_threshold_),
            "model_version": self.version_,
            "n_judged": self.n_judged_,
            "n_ignored": self.n_ignored_,
            "n_relevant": self.n_relevant_,
            "silenced": self.silenced_,
            "silenced_at_fit": self.silenced_at_fit_,
            "size_floor": self.size_floor_,
            "model": self.model_.state_dict(),
            "examples": self.examples_.to_state(),
            "pending": {"X": encode_csr(pend), "labels": plab, "weights": pw},
        }

    @classmethod
    def from_state(cls, state: Any, feature_weights: NDArray[np.float64] | None = None,
                   n_features: int | None = None) -> Profile:
        """Rebuild a profile from :meth:`to_state` output, validating it.

        ``n_features`` (or the length of ``feature_weights``) is the width of the
        vectorizer the profile will score with; a state of another width is refused
        before anything of that width is allocated. A profile fitted with corpus weights
        needs ``feature_weights`` (the same vectorizer's) to load; one fitted without
        them loads without them, whatever is given.
        """
        s = check_version(state, "profile")
        expected = n_features if feature_weights is None else int(np.asarray(feature_weights).size)
        if n_features is not None and expected != n_features:
            raise ParameterError(f"n_features {n_features} differs from the {expected} "
                                 "feature weights")
        try:
            params = dict(s["params"])
            # states written before negative_mass existed keep the weights they were fitted with
            params.setdefault("negative_mass", None)
            # states written before reopen_share existed keep the gate alone
            params.setdefault("reopen_share", None)
            # states written before size_cut existed count K as they were fitted to
            params.setdefault("size_cut", None)
            _legacy_params(params, s)
            p = cls(params.pop("name"), **params)
            width = s["n_features"]
            if isinstance(width, bool) or not isinstance(width, int) or not 1 <= width <= 2**31 - 1:
                raise StateError(f"profile: n_features must be an integer in [1, 2**31 - 1], "
                                 f"got {width!r}")
            if expected is not None and width != expected:
                raise StateError(f"profile: state of {width} features for a vectorizer of "
                                 f"{expected}")
            # whether it was fitted with a vectorizer's corpus weights (None: a state from
            # before the flag, bound to what is given): loaded as fitted, so that it scores
            # what its threshold was trained on
            weighted = s.get("feature_weights")
            if weighted is not None and not isinstance(weighted, bool):
                raise StateError(f"profile: feature_weights must be a boolean, got {weighted!r}")
            if weighted and feature_weights is None:
                raise StateError("profile: fitted with a vectorizer's corpus weights; pass "
                                 "feature_weights (Vectorizer.feature_weights()) to load it")
            if weighted is False:
                feature_weights = None
            p._bind(width, feature_weights)
            p.examples_ = ExampleSet.from_state(s["examples"])
            if p.examples_.n_features != width:
                raise StateError(f"profile: examples of {p.examples_.n_features} features in a "
                                 f"profile of {width}")
            p.model_.bind(width, feature_weights, p.examples_)
            p.model_.load_state_dict(s["model"])
            p.threshold_ = _threshold(s["threshold"], "threshold")
            p.fallback_threshold_ = _threshold(s["fallback_threshold"], "fallback_threshold")
            p.version_ = decode_count(s["model_version"], name="profile.model_version")
            p.n_judged_ = decode_count(s["n_judged"], name="profile.n_judged")
            p.n_ignored_ = decode_count(s["n_ignored"], name="profile.n_ignored")
            p.n_relevant_ = decode_count(s.get("n_relevant", 0), name="profile.n_relevant")
            p.size_floor_ = decode_count(s.get("size_floor", 0), name="profile.size_floor")
            silenced = s.get("silenced", False)
            # states written before the flag existed: their sticky flag is the best guess
            at_fit = s.get("silenced_at_fit", silenced)
            for key, flag in (("silenced", silenced), ("silenced_at_fit", at_fit)):
                if not isinstance(flag, bool):
                    raise StateError(f"profile: {key} must be a boolean, got {flag!r}")
            p.silenced_, p.silenced_at_fit_ = silenced, at_fit
            pend = decode_csr(s["pending"]["X"], name="pending")
            labels = list(s["pending"]["labels"])
            weights = list(s["pending"]["weights"])
            if pend.shape[1] != width:
                raise StateError(f"profile: pending judgments of {pend.shape[1]} features in a "
                                 f"profile of {width}")
            if pend.shape[0] != len(labels) or len(labels) != len(weights):
                raise StateError("profile: pending judgments are inconsistent")
            if not all(type(v) is int and v in (1, -1) for v in labels):
                raise StateError(f"profile: pending labels must be +1/-1, got {labels[:3]!r}")
            lab_arr = np.array(labels, dtype=np.int8)
            w_arr = np.array([float(v) for v in weights], dtype=np.float64)
            if not np.all(np.isfinite(w_arr) & (w_arr > 0) & (w_arr <= MAX_VALUE)):
                raise StateError(f"profile: pending weights must be positive numbers of at most "
                                 f"{MAX_VALUE:g}, got {weights[:3]!r}")
            pend = _check_values(pend, "pending judgments")
            p._pending = [(pend, lab_arr, w_arr)] if labels else []
        except StateError:
            raise
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError, FilterError) as exc:
            raise StateError(f"profile: {exc}") from None
        if p.examples_.capacity != p.max_examples:
            raise StateError(f"profile: an example set of capacity {p.examples_.capacity} in a "
                             f"profile of max_examples {p.max_examples}")
        p._fitted = True
        return p
