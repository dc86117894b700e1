"""Continuous active learning with power-law sampling: the :class:`Review` object.

One review is one topic and a collection of documents that may grow. Each batch:

1. the training set is the pseudo document (the topic text, relevant), every judged
   document, and ``k`` unjudged documents drawn uniformly and *temporarily* labelled
   non-relevant;
2. a logistic regression on TF-IDF features ranks every document;
3. the ``n_top`` best-ranked unjudged documents are taken with certainty (a take-all
   stratum that keeps the screening order close to greedy CAL), and ``b`` draws are made
   with replacement from a power law of the rank over all other documents (judged ones
   included, so every document keeps a positive probability and the inclusion
   probabilities stay well defined);
4. the reviewer judges the unique new documents, best-ranked first.

See :mod:`sift.filters.screening.estimators` for the estimators of R.
"""

from __future__ import annotations

import base64
import inspect
import math
import numbers
import re
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.svm import LinearSVC

from sift.filters.screening.errors import ScreeningError
from sift.filters.screening.estimators import (
    Estimate,
    batch_miss_log,
    hansen_hurwitz,
    horvitz_thompson,
    inclusion_from_log_miss,
    pairwise_inclusion,
    power_law,
)
from sift.filters.screening.stopping import bound_rule, target_rule
from sift.filters.sparse import unique

STATE_VERSION = 1
#: Bounds beyond which a review cannot run: draws are drawn and stored one by one, and
#: liblinear does not return for a C below about 1e-150 or above about 1e160 (MAX_C
#: leaves a wide margin: 1e6 is weak regularisation already).
MAX_DRAWS = 100_000
MIN_C = 1e-12
MAX_C = 1e6
#: The largest ``class_ratio`` and ``topic_weight``: training weights beyond it overflow to
#: infinity (``topic_weight`` 1e308) or make liblinear's problem as ill-posed as a huge C.
MAX_WEIGHT = 1e6
EstimatorName = Literal["ht", "hh", "bound"]
_ESTIMATORS = ("ht", "hh", "bound")
_LEARNERS = ("lr", "svm", "lr+svm")


def _enc(a: NDArray[Any]) -> dict[str, Any]:
    arr = np.ascontiguousarray(a)
    return {
        "dtype": arr.dtype.str,
        "shape": list(arr.shape),
        "b64": base64.b64encode(arr.tobytes()).decode("ascii"),
    }


def _show(value: Any) -> str:
    """``repr`` of a received value, on one line and short (for error messages)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _bad(name: str, value: Any, why: str) -> ScreeningError:
    return ScreeningError(f"state field {name!r} {why}, got {_show(value)}")


def _int(obj: Any, name: str, lo: int, hi: int) -> int:
    """A JSON integer (not a boolean, not a float) in ``[lo, hi]``."""
    if not isinstance(obj, int) or isinstance(obj, bool) or not lo <= obj <= hi:
        raise _bad(name, obj, f"must be an integer in [{lo}, {hi}]")
    return obj


def _dec(obj: Any, name: str, dtype: str | None = None) -> NDArray[Any]:
    """An array of :func:`_enc`; ``dtype`` given: a 1-d array of exactly that dtype."""
    if not isinstance(obj, dict) or set(obj) != {"dtype", "shape", "b64"}:
        raise _bad(name, obj, "is not an encoded array")
    if obj["dtype"] not in ("<f8", "<i8", "|b1") or (dtype is not None and obj["dtype"] != dtype):
        raise _bad(name, obj["dtype"], f"has unsupported dtype (want {dtype or '<f8, <i8, |b1'})")
    shape = obj["shape"]
    if (not isinstance(shape, list) or (dtype is not None and len(shape) != 1)
            or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**40
                       for s in shape)):
        raise _bad(name, shape, "has a bad shape (want a list of one size)"
                   if dtype is not None else "has a bad shape")
    if not isinstance(obj["b64"], str):
        raise _bad(name, obj["b64"], "has a payload that is not a base64 string")
    dt = np.dtype(obj["dtype"])
    expected = math.prod(shape) * dt.itemsize
    if len(obj["b64"]) != 4 * math.ceil(expected / 3):  # before decoding anything
        raise ScreeningError(f"state field {name!r}: payload does not match shape {tuple(shape)}")
    try:
        raw = base64.b64decode(obj["b64"], validate=True)
    except ValueError:
        raise _bad(name, obj["b64"], "has a payload that is not base64") from None
    if len(raw) != expected:
        raise ScreeningError(f"state field {name!r}: payload does not match shape {tuple(shape)}")
    return np.frombuffer(raw, dtype=dt).reshape(shape).copy()


def _ids(obj: Any, name: str, index: dict[str, int] | None = None) -> list[str]:
    """A list of distinct non-empty strings (known to ``index`` when given)."""
    if not isinstance(obj, list):
        raise _bad(name, obj, "must be a list of document ids")
    for d in obj:
        if not isinstance(d, str) or not d or (index is not None and d not in index):
            raise _bad(name, d, "has an entry that is not a document id of the review"
                       if index is not None else "has an entry that is not a non-empty string")
    if len(set(obj)) != len(obj):
        raise _bad(name, obj, "has duplicate ids")
    return list(obj)


_BATCH_KEYS = {"ranks", "certain", "draws", "draw_p", "draw_new", "found_before", "b"}
_STATE_KEYS = ("params", "ids", "texts", "labels", "log_miss", "ever_certain", "sampled",
               "pending", "order", "epoch_start", "rng", "batches", "scores")


def _batch(obj: Any, t: int, n: int, exponent: float) -> dict[str, Any]:
    """Batch ``t`` of a state of ``n`` documents, checked (vectorized) for consistency.

    The draws' probabilities are checked against the power law of their ranks (their
    ratios, and the smallest possible probability), which also catches an ``exponent``
    that is not the one the batches were drawn with.
    """
    where = f"batches[{t}]"
    if not isinstance(obj, dict) or not set(obj) >= _BATCH_KEYS:
        raise _bad(where, obj, f"must be an object with {', '.join(sorted(_BATCH_KEYS))}")
    ranks = _dec(obj["ranks"], f"{where}.ranks", "<i8")
    m = len(ranks)
    if m > n:
        raise _bad(f"{where}.ranks", m, f"ranks more documents than the {n} of the review")
    if m and (ranks.min() < 0 or ranks.max() > m):
        raise _bad(f"{where}.ranks", int(ranks.min() if ranks.min() < 0 else ranks.max()),
                   f"must hold ranks in [0, {m}]")
    counts = np.bincount(ranks, minlength=m + 1)
    k = m - int(counts[0])
    if np.any(counts[1 : k + 1] != 1):
        raise _bad(f"{where}.ranks", k, "must rank the documents 1..k once each, k")
    certain = _dec(obj["certain"], f"{where}.certain", "<i8")
    if len(certain) and (certain.min() < 0 or certain.max() >= m
                         or np.any(np.diff(certain) <= 0) or np.any(ranks[certain] != 0)):
        raise _bad(f"{where}.certain", certain.tolist(),
                   f"must be the increasing indices below {m} of the unranked documents")
    if len(certain) != int(counts[0]):
        raise _bad(f"{where}.certain", len(certain),
                   f"must list the {int(counts[0])} unranked documents")
    b = _int(obj["b"], f"{where}.b", 0, 2**31)
    draws = _dec(obj["draws"], f"{where}.draws", "<i8")
    draw_p = _dec(obj["draw_p"], f"{where}.draw_p", "<f8")
    draw_new = _dec(obj["draw_new"], f"{where}.draw_new", "|b1")
    for name, a in (("draws", draws), ("draw_p", draw_p), ("draw_new", draw_new)):
        if len(a) != b:
            raise _bad(f"{where}.{name}", len(a), f"must have b = {b} entries")
    if b and (draws.min() < 0 or draws.max() >= m or np.any(ranks[draws] == 0)):
        raise _bad(f"{where}.draws", draws.tolist(),
                   f"must be indices below {m} of ranked documents")
    if b:
        lowest = float(m) ** -(1.0 + exponent) * (1 - 1e-9)  # rank m of m: m^-a / sum <= m
        ok = (draw_p >= lowest) & (draw_p <= 1)  # False for NaN
        if not np.all(ok):
            raise _bad(f"{where}.draw_p", float(draw_p[~ok][0]),
                       f"must hold probabilities in [{lowest:.3g}, 1]")
        # p_j * r_j^a is the power law's 1 / normalising constant, the same for all draws
        scaled = draw_p * ranks[draws].astype(np.float64) ** exponent
        if not np.allclose(scaled, scaled[0], rtol=1e-6, atol=0.0):
            raise _bad(f"{where}.draw_p", draw_p.tolist(),
                       f"does not follow the power law of exponent {exponent!r} of the ranks")
    found_before = _int(obj["found_before"], f"{where}.found_before", 0, n)
    # judged_before (since the forty-third session): the judgments made before the batch,
    # from which its known relevant count is derived at estimate time; a state written
    # before has none, and its batches keep the count stored when they were made
    judged_before = (_int(obj["judged_before"], f"{where}.judged_before", found_before, n)
                     if "judged_before" in obj else None)
    return {"ranks": ranks, "certain": certain, "draws": draws, "draw_p": draw_p,
            "draw_new": draw_new, "found_before": found_before,
            "judged_before": judged_before, "b": b}


def _check_judged_before(batches: list[dict[str, Any]], order: list[str],
                         index: dict[str, int], n: int) -> None:
    """Each batch's ``judged_before`` against the judgment order (ScreeningError if not).

    At most the judgments made, never decreasing; the documents a batch took or drew as
    new were judged after it (or are not yet), the ones it re-drew before it.
    """
    pos = np.full(n, len(order) + 1, dtype=np.int64)  # unjudged: after every judgment
    pos[np.fromiter((index[d] for d in order), dtype=np.int64, count=len(order))] = (
        np.arange(len(order), dtype=np.int64))
    last = 0
    for t, b in enumerate(batches):
        k = b["judged_before"]
        if k is None:
            continue
        where = f"batches[{t}].judged_before"
        if k > len(order) or k < last:
            raise _bad(where, k, f"must be in [{last}, {len(order)}] (the judgments made, "
                       "not fewer than the batch before's)")
        new = np.concatenate([b["certain"], b["draws"][b["draw_new"]]])
        old = b["draws"][~b["draw_new"]]
        if np.any(pos[new] < k) or np.any(pos[old] >= k):
            raise _bad(where, k, "does not match the order of the judgments and the "
                       "batch's new documents")
        last = k


def _check_pending(batches: list[dict[str, Any]], pending: list[str],
                   labels: NDArray[np.int64], ids: list[str]) -> None:
    """``pending`` against the last batch: exactly its new documents (the ones it took with
    certainty and its draws of unjudged ones) that are not judged yet (ScreeningError if
    not; the order is not checked)."""
    want: set[str] = set()
    if batches:
        last = batches[-1]
        new = np.unique(np.concatenate([last["certain"], last["draws"][last["draw_new"]]]))
        want = {ids[i] for i in new[labels[new] < 0]}
    got = set(pending)
    if got != want:
        extra, missing = sorted(got - want), sorted(want - got)
        if extra:
            raise _bad("pending", extra[0], "has a document the last batch did not ask for")
        raise _bad("pending", pending, f"lacks {len(missing)} unjudged document(s) the last "
                   f"batch asked for (first {missing[0]!r})")


def _check_log_miss(batches: list[dict[str, Any]], log_miss: NDArray[np.float64],
                    exponent: float, ids: list[str]) -> None:
    """``log_miss`` against the batches: the sum of each batch's ``log P(not included)``,
    recomputed from its ranks, stratum and draws (ScreeningError beyond a relative 1e-9)."""
    want = np.zeros(len(log_miss))
    for b in batches:
        m = len(b["ranks"])
        certain = np.zeros(m, dtype=bool)
        certain[b["certain"]] = True
        want[:m] += batch_miss_log(power_law(b["ranks"], exponent), certain, b["b"])
    same = np.isclose(log_miss, want, rtol=1e-9, atol=1e-12)  # -inf equals -inf
    if not np.all(same):
        bad = int(np.argmax(~same))
        raise _bad("log_miss", f"{ids[bad]}: {float(log_miss[bad])!r}",
                   f"does not match the batches (which give {float(want[bad])!r})")


_DESIGN = re.compile(
    r"\b(?:an?\s+)?(?:(?:systematic|scoping|umbrella|narrative)\s+(?:literature\s+)?reviews?"
    r"|literature\s+reviews?|meta[-\s]?analys[ie]s|tertiary\s+stud(?:y|ies)"
    r"|(?:systematic\s+)?mapping\s+stud(?:y|ies))\b(?:\s+(?:and|&)\b)?",
    re.IGNORECASE,
)


def strip_design(title: str) -> str:
    """Drop the review's own study design from the subtitle of a review title.

    A systematic review's title often ends with its design ("...: A systematic review
    and meta-analysis"); those words match other reviews among the candidates, not the
    studies the review includes. Only the part after the last ``:``, ``?``, ``–`` or
    `` - `` is touched, so a topic that *is* about reviews keeps its words.

    >>> strip_design("Therapies for Wilson disease: A systematic review and meta-analysis")
    'Therapies for Wilson disease'
    >>> strip_design("Systematic literature reviews in software engineering – A tertiary study")
    'Systematic literature reviews in software engineering'
    >>> strip_design("Stem cells in knee osteoarthritis? Meta-Analysis of Randomized Trials")
    'Stem cells in knee osteoarthritis? of Randomized Trials'
    >>> strip_design("The methodological rigour of systematic reviews in health")
    'The methodological rigour of systematic reviews in health'
    """
    cut = max(title.rfind(":"), title.rfind("?"), title.rfind("\u2013"), title.rfind(" - "))
    if cut < 0:
        return title
    head, tail = title[: cut + 1], title[cut + 1 :]
    tail = " ".join(_DESIGN.sub(" ", tail).split())
    head = head.rstrip(":\u2013- ").rstrip() if not tail else head
    return f"{head} {tail}".strip() if tail else head


def class_weights(y: NDArray[np.int64], ratio: float) -> NDArray[np.float64]:
    """Sample weights giving the positives ``ratio`` times the negatives' total weight.

    Normalised to sum to ``len(y)``; ``ratio=1`` equals ``class_weight="balanced"``.

    >>> class_weights(np.array([1, 0, 0, 0]), 1.0).round(4).tolist()
    [2.0, 0.6667, 0.6667, 0.6667]
    """
    pos = y == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    w = np.where(pos, ratio / max(n_pos, 1), 1.0 / max(n_neg, 1))
    return np.asarray(w * (len(y) / w.sum()), dtype=np.float64)


class Review:
    """An incremental technology-assisted review of one topic.

    Parameters
    ----------
    topic
        The review's topic text (e.g. its title), used as a pseudo relevant document.
    draws
        ``b``: draws with replacement per batch from the power-law distribution.
    n_top
        Best-ranked unjudged documents taken with certainty per batch; 0 disables the
        take-all stratum (``growth`` too): every batch then draws from a power law over
        the whole ranking, the paper's design.
    growth
        The take-all stratum grows to ``ceil(growth * judged)`` when that is larger
        than ``n_top`` (batches grow as the review proceeds; BMI's grow by a tenth a
        round, about 10% of the judged records).
    n_negatives
        ``k``: unjudged documents sampled uniformly per batch as temporary negatives.
    exponent
        Power-law exponent of the sampling distribution (the paper used 0.8).
    target_recall
        Recall the stopping rule aims at.
    estimator
        ``"ht"`` (Horvitz-Thompson, stop when found >= target * R-hat; the HT estimate
        is biased low on this adaptive design, see :meth:`estimate_ht`), ``"hh"``
        (Hansen-Hurwitz, same rule) or ``"bound"`` (stop when ``found / (R-hat + z sd)``,
        from the Hansen-Hurwitz estimate and its variance, reaches the target: a
        heuristic lower bound on recall, not a confidence bound; see
        :meth:`estimate_hh`).
    confidence
        Nominal one-sided level of the bound rule (``z`` is its normal quantile); the
        rule does not hold recall at the target with this probability (docs/screening.md).
    hh_window
        Number of latest batches whose Hansen-Hurwitz estimates are averaged (>= 1).
    hh_variance
        Variance of the averaged Hansen-Hurwitz estimate: ``"within"`` sums the batches'
        own variance estimates (``sum var_t / w^2``); ``"max"`` takes the larger of that
        and the spread of the batch estimates around their mean
        (``sum (R_t - mean)^2 / (w (w - 1))``), a second estimate of the same variance
        (every ``R_t`` estimates the same R) that is not zero when a batch whose draws
        missed the remaining relevant documents sits beside one whose draws hit one.
    warmup_precision
        Greedy warm-up: no draws until a take-all batch's precision falls below this
        (and something relevant was found); 0 samples from the first batch. Batches
        without draws are deterministic given the past, so the estimators stay valid:
        their finds are simply known.
    warmup_window
        The precision of the warm-up rule is that of the last ``warmup_window`` judged
        documents, once that many were judged after the first relevant one; 0: that of
        the last batch's take-all stratum. A window is less noisy than one batch.
    min_batches
        Sampling batches required (since the collection last grew) before the rule may
        stop. ``None`` (the default): 5 for the bound rule, 10 for the point rules
        ``"ht"`` and ``"hh"``, which have no variance term to hold them back early
        (:meth:`min_batches_for`).
    C
        Inverse regularisation strength of the logistic regression, in
        ``[MIN_C, MAX_C]`` (1e-12 to 1e6: liblinear does not return far outside it).
    class_ratio
        Total training weight of the relevant examples (the pseudo document included)
        over that of the non-relevant ones (judged and temporary); 1 is scikit-learn's
        ``class_weight="balanced"``. Larger values favour recall of the rare class.
        A finite number in ``(0, MAX_WEIGHT]`` (at most 1e6).
    max_df
        Terms in more than this fraction of the documents are dropped from the TF-IDF
        vocabulary (1.0 keeps all).
    stop_words
        Drop English stop words from the TF-IDF vocabulary.
    grow_when_sampling
        Let the take-all stratum grow (``growth``) in batches that draw a sample too; when
        false it grows only during the greedy warm-up and sampling batches take ``n_top``.
    strip_design
        Drop the review's own study design ("a systematic review and meta-analysis",
        "a tertiary study", ...) from the subtitle of the topic text before it becomes
        the pseudo document (see :func:`strip_design`).
    topic_weight
        Training weight of the pseudo document relative to a relevant judgment (1: the
        same; the class balance of ``class_ratio`` is applied first). 10 by default: the
        topic keeps steering the model while few relevant records are known (chosen on
        tuning seeds 100-105: review-order WSS@95 0.643 -> 0.666 and cost at the bound
        rule's stop 0.499 -> 0.484 against 1; docs/screening.md). A finite number in
        ``(0, MAX_WEIGHT]`` (at most 1e6).
    learner
        ``"lr"`` (logistic regression, ``C``), ``"svm"`` (linear SVM, squared hinge,
        ``svm_C``: ASReview's learner) or ``"lr+svm"`` (the mean of the two models'
        standardised scores).
    svm_C
        Inverse regularisation strength of the linear SVM (ASReview's 0.11), in
        ``[MIN_C, MAX_C]`` (1e-12 to 1e6).
    random_state
        Seed of the review's random generator.

    Examples
    --------
    >>> docs = {f"d{i}": ("wilson disease copper therapy" if i % 10 == 0 else
    ...                   f"unrelated text number {i} about weather") for i in range(60)}
    >>> review = Review("wilson disease therapy", draws=10, n_top=5, random_state=0)
    >>> review.add_documents(list(docs), list(docs.values()))
    >>> batch = review.next_batch()
    >>> docs[batch[0]]  # the best-ranked document comes first
    'wilson disease copper therapy'
    >>> for doc_id in batch:
    ...     review.record_judgment(doc_id, docs[doc_id].startswith("wilson"))
    >>> est = review.estimate()
    >>> est.found >= 1 and est.r_hat >= est.found
    True
    >>> Review.from_state(review.to_state()).to_state() == review.to_state()
    True
    """

    def __init__(
        self,
        topic: str | None = None,
        *,
        draws: int = 40,
        n_top: int = 10,
        growth: float = 0.05,
        n_negatives: int = 100,
        exponent: float = 0.8,
        target_recall: float = 0.95,
        estimator: EstimatorName = "bound",
        confidence: float = 0.95,
        min_batches: int | None = None,
        hh_window: int = 10,
        hh_variance: Literal["within", "max"] = "max",
        warmup_precision: float = 0.2,
        warmup_window: int = 0,
        C: float = 1.0,
        class_ratio: float = 1.0,
        max_df: float = 1.0,
        stop_words: bool = False,
        grow_when_sampling: bool = True,
        strip_design: bool = True,
        topic_weight: float = 10.0,
        learner: Literal["lr", "svm", "lr+svm"] = "lr",
        svm_C: float = 0.11,
        random_state: int | None = None,
    ) -> None:
        self.topic = topic
        self.draws = draws
        self.n_top = n_top
        self.growth = growth
        self.n_negatives = n_negatives
        self.exponent = exponent
        self.target_recall = target_recall
        self.estimator = estimator
        self.confidence = confidence
        self.min_batches = min_batches
        self.hh_window = hh_window
        self.hh_variance = hh_variance
        self.warmup_precision = warmup_precision
        self.warmup_window = warmup_window
        self.C = C
        self.class_ratio = class_ratio
        self.max_df = max_df
        self.stop_words = stop_words
        self.grow_when_sampling = grow_when_sampling
        self.strip_design = strip_design
        self.topic_weight = topic_weight
        self.learner = learner
        self.svm_C = svm_C
        self.random_state = random_state
        self._validate()
        self.ids_: list[str] = []
        self.texts_: list[str] = []
        self.index_: dict[str, int] = {}
        self.labels_: NDArray[np.int64] = np.zeros(0, dtype=np.int64)  # -1 unjudged
        self.log_miss_: NDArray[np.float64] = np.zeros(0)
        self.ever_certain_: NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self.sampled_: NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self.batches_: list[dict[str, Any]] = []
        self.pending_: list[str] = []
        self.order_: list[str] = []
        self.epoch_start_ = 0
        self.rng_ = np.random.default_rng(random_state)
        self._X: sp.csr_matrix | None = None
        self._topic_vec: sp.csr_matrix | None = None
        self._scores: NDArray[np.float64] | None = None

    # ----------------------------------------------------------------- checks
    def _validate(self) -> None:
        def bad(name: str, value: object, why: str) -> ScreeningError:
            return ScreeningError(f"{name} {why}, got {value!r}")

        for name in ("draws", "n_top", "n_negatives", "min_batches", "hh_window", "warmup_window"):
            v = getattr(self, name)
            if name == "min_batches" and v is None:
                continue
            least = 1 if name == "hh_window" else 0  # a window of no batch averages nothing
            if not isinstance(v, int) or isinstance(v, bool) or v < least:
                raise bad(name, v, f"must be an integer >= {least}")
        if self.draws > MAX_DRAWS:  # each draw is stored: a huge b is a corrupt value
            raise bad("draws", self.draws, f"must be <= {MAX_DRAWS}")
        if isinstance(self.C, int | float) and 0 < self.C < MIN_C:  # liblinear never returns
            raise bad("C", self.C, f"must be >= {MIN_C}")
        if self.draws == 0 and self.n_top == 0:
            raise bad("draws", self.draws, "and n_top cannot both be 0")
        if self.estimator != "ht" and self.draws < 2:
            raise bad("draws", self.draws, f"must be >= 2 for estimator {self.estimator!r}")
        positive = ("C", "class_ratio", "max_df", "svm_C", "topic_weight")
        if isinstance(self.svm_C, int | float) and 0 < self.svm_C < MIN_C:
            raise bad("svm_C", self.svm_C, f"must be >= {MIN_C}")
        # upper bounds: a C of 1e160 never returns from liblinear, and an infinite C,
        # class_ratio or topic_weight (or 1e308, times a class weight) fails the first model
        for name, lo, hi in (("exponent", 0.0, 10.0), ("growth", 0.0, 1.0), ("C", 0.0, MAX_C),
                              ("svm_C", 0.0, MAX_C),
                              ("warmup_precision", 0.0, 1.0), ("class_ratio", 0.0, MAX_WEIGHT),
                              ("topic_weight", 0.0, MAX_WEIGHT), ("max_df", 0.0, 1.0)):
            v = getattr(self, name)
            if (not isinstance(v, int | float) or isinstance(v, bool) or not lo <= v <= hi
                    or (name in positive and v == 0)):
                extra = " and > 0" if name in positive else ""
                raise bad(name, v, f"must be a number in [{lo}, {hi}]{extra}")
        for name in ("stop_words", "grow_when_sampling", "strip_design"):
            if not isinstance(getattr(self, name), bool):
                raise bad(name, getattr(self, name), "must be true or false")
        rs = self.random_state
        if rs is not None and (isinstance(rs, bool) or not isinstance(rs, int) or rs < 0):
            raise bad("random_state", rs, "must be an integer >= 0 or null")
        for name in ("target_recall", "confidence"):
            v = getattr(self, name)
            numeric = isinstance(v, int | float) and not isinstance(v, bool)
            upper_ok = numeric and (v <= 1.0 if name == "target_recall" else v < 1.0)
            if not numeric or not (v > 0.0 and upper_ok):
                raise bad(name, v, "must be in (0, 1]" if name == "target_recall" else
                          "must be in (0, 1)")
        if self.learner not in _LEARNERS:
            raise bad("learner", self.learner, f"must be one of {', '.join(_LEARNERS)}")
        if self.hh_variance not in ("within", "max"):
            raise bad("hh_variance", self.hh_variance, "must be 'within' or 'max'")
        if self.estimator not in _ESTIMATORS:
            raise bad("estimator", self.estimator, f"must be one of {', '.join(_ESTIMATORS)}")
        if self.topic is not None and not isinstance(self.topic, str):
            raise bad("topic", self.topic, "must be a string or None")

    # -------------------------------------------------------------- documents
    def add_documents(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        """Add documents to the collection (at any time; see the docs on mid-review arrivals)."""
        if len(ids) != len(texts):
            raise ScreeningError(f"ids and texts differ in length: {len(ids)} != {len(texts)}")
        new = []
        for doc_id, text in zip(ids, texts, strict=True):
            if not isinstance(doc_id, str) or not doc_id:
                raise ScreeningError(f"document id must be a non-empty string, got {doc_id!r}")
            if not isinstance(text, str):
                raise ScreeningError(f"text of document {doc_id!r} must be a string, got {text!r}")
            if doc_id in self.index_ or doc_id in new:
                raise ScreeningError(f"duplicate document id {doc_id!r}")
            new.append(doc_id)
        if not new:
            return
        start = len(self.ids_)
        for j, doc_id in enumerate(new):
            self.index_[doc_id] = start + j
        self.ids_.extend(new)
        self.texts_.extend(texts)
        k = len(new)
        self.labels_ = np.concatenate([self.labels_, np.full(k, -1, dtype=np.int64)])
        self.log_miss_ = np.concatenate([self.log_miss_, np.zeros(k)])
        self.ever_certain_ = np.concatenate([self.ever_certain_, np.zeros(k, dtype=bool)])
        self.sampled_ = np.concatenate([self.sampled_, np.zeros(k, dtype=bool)])
        # the estimators' population changed: averaging and stopping restart here
        self.epoch_start_ = len(self.batches_)
        self._X = None

    @property
    def n_documents(self) -> int:
        return len(self.ids_)

    def _features(self) -> sp.csr_matrix:
        if self._X is None:
            vec = TfidfVectorizer(
                ngram_range=(1, 2), sublinear_tf=True, min_df=1,
                max_df=self.max_df if len(self.texts_) > 1 else 1.0,
                stop_words="english" if self.stop_words else None, dtype=np.float64,
            )
            topic = strip_design(self.topic or "") if self.strip_design else (self.topic or "")
            corpus = [*self.texts_, topic]
            try:
                m = vec.fit_transform(corpus)
            except ValueError:  # empty vocabulary
                m = sp.csr_matrix((len(corpus), 1))
            m = sp.csr_matrix(m)
            self._X = m[: len(self.texts_)]
            self._topic_vec = m[len(self.texts_) :]
        return self._X

    # ----------------------------------------------------------------- ranking
    def _train_and_score(self) -> NDArray[np.float64]:
        X = self._features()
        judged = np.flatnonzero(self.labels_ >= 0)
        unjudged = np.flatnonzero(self.labels_ < 0)
        k = min(self.n_negatives, len(unjudged))
        negs = self.rng_.choice(unjudged, size=k, replace=False) if k else np.zeros(0, np.int64)
        rows = [X[judged], X[negs]]
        y = [self.labels_[judged], np.zeros(len(negs), dtype=np.int64)]
        if self.topic:
            assert self._topic_vec is not None
            rows.insert(0, self._topic_vec)
            y.insert(0, np.ones(1, dtype=np.int64))
        Xt = sp.vstack(rows).tocsr()
        yt = np.concatenate(y)
        if not np.any(self.labels_ == 1) and self.topic and self._topic_vec is not None:
            # no relevant judgment yet: cosine similarity to the topic ranks better than a
            # model of one short pseudo document against long random negatives
            sim = np.asarray((X @ self._topic_vec.T).toarray()).ravel()
            return sim + 1e-9 * self.rng_.random(self.n_documents)
        if len(np.unique(yt)) < 2:
            # nothing to contrast yet: rank by random scores (a uniform start)
            return self.rng_.random(self.n_documents)
        weights = class_weights(yt, self.class_ratio)
        if self.topic and self.topic_weight != 1.0:
            weights[0] *= self.topic_weight  # the pseudo document is the first row
        return self._fit_score(Xt, yt, weights, X)

    def _fit_score(self, Xt: sp.csr_matrix, yt: NDArray[np.int64], weights: NDArray[np.float64],
                   X: sp.csr_matrix) -> NDArray[np.float64]:
        """Scores of every document by the ``learner`` trained on ``(Xt, yt)``."""
        scores = []
        if self.learner in ("lr", "lr+svm"):
            # random_state: not the global RNG (liblinear's primal solver draws nothing
            # from it: the results are the same, checked on the bundled sets)
            model = LogisticRegression(C=self.C, solver="liblinear", random_state=0)
            model.fit(Xt, yt, sample_weight=weights)
            scores.append(np.asarray(model.decision_function(X), dtype=np.float64))
        if self.learner in ("svm", "lr+svm"):
            svm = LinearSVC(C=self.svm_C, random_state=0)  # its shuffling: not the global RNG
            svm.fit(Xt, yt, sample_weight=weights)
            scores.append(np.asarray(svm.decision_function(X), dtype=np.float64))
        if len(scores) == 1:
            return scores[0]
        # an ensemble: the mean of the standardised scores (the two scales differ)
        return np.asarray(np.mean([(s - s.mean()) / (s.std() or 1.0) for s in scores], axis=0),
                          dtype=np.float64)

    # ----------------------------------------------------------------- batches
    def next_batch(self) -> list[str]:
        """Ids to judge next, best-ranked first (the pending ones again if any remain).

        When the model cannot be fitted the error is raised and the review is left as it
        was (no batch, the random generator's state restored).
        """
        if self.pending_:
            return list(self.pending_)
        n = self.n_documents
        if n == 0:
            raise ScreeningError("the review has no documents: call add_documents first")
        unjudged = np.flatnonzero(self.labels_ < 0)
        if len(unjudged) == 0:
            return []
        rng_state = self.rng_.bit_generator.state
        try:
            scores = self._train_and_score()
        except Exception:
            # a model that cannot be fitted leaves the review as it was (the generator too),
            # so that a caller may log it and ask again later
            self.rng_.bit_generator.state = rng_state
            raise
        self._scores = scores
        sampling = self._sampling_on()
        grow = self.growth if (self.grow_when_sampling or not sampling) else 0.0
        # n_top 0 disables the stratum, growth included: the paper's design, every document
        # ranked by the power law (before the forty-sixth session growth brought it back)
        n_top = (0 if self.n_top == 0
                 else max(self.n_top, math.ceil(grow * int(np.sum(self.labels_ >= 0)))))
        top = unjudged[np.argsort(-scores[unjudged], kind="stable")][:n_top]
        new = self._add_batch(scores, top, sampling)
        if len(new) == 0:
            # no stratum and every draw on a judged document: the paper assesses nothing
            # and samples again; an empty list would read as "nothing left", so the best
            # ranked unjudged document is taken with certainty in a batch of no draws
            # (fixed given the past, so both estimators stay valid; it was [] before)
            new = self._add_batch(scores, unjudged[np.argsort(-scores[unjudged],
                                                              kind="stable")][:1], False)
        new = new[np.argsort(-scores[new], kind="stable")]
        self.pending_ = [self.ids_[i] for i in new]
        return list(self.pending_)

    def _add_batch(self, scores: NDArray[np.float64], top: NDArray[np.int64],
                   sampling: bool) -> NDArray[np.int64]:
        """Record a batch taking ``top`` with certainty and, when ``sampling``, drawing
        ``b`` documents from the power law over the rest; the new documents it asks for."""
        n = self.n_documents
        certain = np.zeros(n, dtype=bool)
        certain[top] = True
        rest = np.flatnonzero(~certain)
        ranks = np.zeros(n, dtype=np.int64)
        ranks[rest[np.argsort(-scores[rest], kind="stable")]] = np.arange(1, len(rest) + 1)
        p = power_law(ranks, self.exponent)
        b = self.draws if len(rest) and sampling else 0
        drawn = (
            self.rng_.choice(n, size=b, replace=True, p=p) if b else np.zeros(0, dtype=np.int64)
        )
        unjudged_mask = self.labels_ < 0
        found_before = int(np.sum(self.labels_ == 1))
        judged_before = len(self.order_)  # the judgments so far: order_[:judged_before]
        self.log_miss_ += batch_miss_log(p, certain, b)
        self.ever_certain_ |= certain
        self.sampled_[top] = True
        self.sampled_[drawn] = True
        self.batches_.append({
            "ranks": ranks,
            "certain": np.flatnonzero(certain).astype(np.int64),
            "draws": drawn.astype(np.int64),
            "draw_p": p[drawn],
            "draw_new": unjudged_mask[drawn],
            "found_before": found_before,
            "judged_before": judged_before,
            "b": b,
        })
        return np.asarray(unique(np.concatenate([top, drawn[unjudged_mask[drawn]]])),
                          dtype=np.int64)

    def _sampling_on(self) -> bool:
        """Whether this batch draws a sample (after the warm-up, see ``warmup_precision``)."""
        if self.warmup_precision <= 0 or self.n_top == 0 or any(b["b"] > 0 for b in self.batches_):
            # (no take-all stratum: the warm-up could judge nothing, so it never ended)
            return True
        if not self.batches_ or not np.any(self.labels_ == 1):
            return False
        if self.warmup_window > 0:
            # the window starts after the first relevant find: the records screened before
            # it (ranked by the topic text alone) say nothing about the model's precision
            first = next(i for i, d in enumerate(self.order_) if self.labels_[self.index_[d]] == 1)
            if len(self.order_) - first - 1 < self.warmup_window:
                return False
            recent = [self.index_[d] for d in self.order_[-self.warmup_window :]]
            return float(np.mean(self.labels_[recent] == 1)) < self.warmup_precision
        last = self.batches_[-1]["certain"]
        judged = last[self.labels_[last] >= 0]
        if len(judged) == 0:
            return False
        return float(np.mean(self.labels_[judged] == 1)) < self.warmup_precision

    def min_batches_for(self, rule: str) -> int:
        """Sampling batches the rule ``"ht"``, ``"hh"`` or ``"bound"`` needs before it may stop.

        >>> Review().min_batches_for("bound"), Review().min_batches_for("hh")
        (5, 10)
        >>> Review(min_batches=3).min_batches_for("ht")
        3
        """
        if self.min_batches is not None:
            return max(self.min_batches, 1)
        return 5 if rule == "bound" else 10

    def n_sampling_batches(self) -> int:
        """Completed batches of the current epoch that drew a sample."""
        return sum(1 for b in self._complete_batches()[self.epoch_start_ :] if b["b"] > 0)

    def record_judgment(self, doc_id: str, relevant: bool) -> None:
        """Record a reviewer's judgment (a later judgment of the same id overrides).

        ``relevant``: a boolean (numpy's too) or an integer 0 or 1 (any
        :class:`numbers.Integral`, numpy's integers included).
        """
        i = self.index_.get(doc_id)
        if i is None:
            raise ScreeningError(f"unknown document id {doc_id!r}")
        if (not isinstance(relevant, bool | np.bool_ | numbers.Integral)
                or relevant not in (0, 1)):
            raise ScreeningError(f"relevant must be a boolean, got {relevant!r}")
        if self.labels_[i] < 0:
            self.order_.append(doc_id)
        self.labels_[i] = int(bool(relevant))
        if doc_id in self.pending_:
            self.pending_.remove(doc_id)

    # -------------------------------------------------------------- estimation
    def _complete_batches(self) -> list[dict[str, Any]]:
        return self.batches_[: len(self.batches_) - (1 if self.pending_ else 0)]

    def _complete_sample(self) -> NDArray[np.bool_]:
        """Documents taken or drawn by a completed batch: the sample of the HT estimate.

        ``sampled_`` also holds the batch still pending, whose draws have no inclusion
        probability in the completed batches' design yet; they join when it completes.
        """
        sample = np.zeros(self.n_documents, dtype=bool)
        for batch in self._complete_batches():
            sample[batch["certain"]] = True
            sample[batch["draws"]] = True
        return sample

    def estimate_ht(self) -> Estimate:
        """Horvitz-Thompson estimate of R over the completed batches.

        The sample units are the documents taken or drawn by a completed batch, weighted
        by their inclusion probabilities over those batches (the variance likewise).
        Relevant documents judged outside that sample (judged unrequested, or in the
        batch still pending) are known: they add one each, with no variance.

        The inclusion probabilities are the paper's, accumulated along the realised
        (adaptive) path: a relevant document ranks near the top once it is found, so its
        ``pi_i`` climbs towards 1. The estimate is therefore biased low and tends to
        ``found``, and its variance (that of a fixed design) is too small; the
        ``"ht"`` rule tends to stop at its first check (docs/screening.md, forty-third
        session). The known documents outside the sample are also counted twice in
        expectation (the sample's sum already estimates them), which errs high; neither
        is changed, so the reported figures stay those of this estimator.

        While the current epoch has no completed sampling batch (documents joined since,
        or none drew a sample yet) the estimate is not ``sampled``
        (:class:`~sift.filters.screening.estimators.Estimate`): no recall is claimed.
        """
        found = int(np.sum(self.labels_ == 1))
        batches = self._complete_batches()
        # the documents that joined since the last sampling batch have no inclusion
        # probability yet: no estimate of the whole collection until one completes
        sampled = self.n_sampling_batches() > 0
        rel = np.flatnonzero(self._complete_sample() & (self.labels_ == 1))
        if not batches or len(rel) == 0:
            return Estimate(float(found), 0.0, found, sampled)
        p_hist = np.zeros((len(batches), len(rel)))
        c_hist = np.zeros((len(batches), len(rel)), dtype=bool)
        b = np.zeros(len(batches), dtype=np.int64)
        for t, batch in enumerate(batches):
            ranks = batch["ranks"]
            present = rel < len(ranks)
            r = np.zeros(len(rel), dtype=np.int64)
            r[present] = ranks[rel[present]]
            n_list = int(np.count_nonzero(ranks))
            norm_c = float(np.sum(np.arange(1, n_list + 1, dtype=np.float64) ** -self.exponent))
            with np.errstate(divide="ignore"):
                p_hist[t] = np.where(r > 0, r.astype(np.float64) ** -self.exponent / norm_c, 0.0)
            certain = np.zeros(len(ranks), dtype=bool)
            certain[batch["certain"]] = True
            c_hist[t, present] = certain[rel[present]]
            b[t] = batch["b"]
        pij = pairwise_inclusion(p_hist, c_hist, b)
        r_hat, var = horvitz_thompson(np.ones(len(rel)), pij)
        # relevant documents judged outside the sample are known exactly
        outside = found - len(rel)
        return Estimate(r_hat + outside, var, found, sampled)

    def _found_before(self, batches: Sequence[dict[str, Any]]) -> list[int]:
        """Relevant documents known before each of ``batches``, by the *current* labels.

        The documents judged before a batch are ``order_[:judged_before]``; counting
        their relevant ones now (not when the batch was made) lets a corrected judgment
        (a later judgment of the same id) reach every batch estimate. A batch of a state
        written before ``judged_before`` was stored keeps its stored count.
        """
        at = np.fromiter((self.index_[d] for d in self.order_), dtype=np.int64,
                         count=len(self.order_))
        known = np.concatenate([[0], np.cumsum(self.labels_[at] == 1)])
        return [int(b["found_before"]) if b.get("judged_before") is None
                else int(known[b["judged_before"]]) for b in batches]

    def hh_batch_estimates(self, last: int | None = None) -> list[tuple[float, float]]:
        """Hansen-Hurwitz estimate ``R_t`` and its within-batch variance of every completed
        sampling batch of the current epoch (only the ``last`` ones when given), oldest
        first.

        ``R_t = known_t + take-all relevant_t + mean_j(y_j u_j / p_j)``: the relevant
        documents judged before the batch (by the current labels), those of its take-all
        stratum, and the mean over its ``b`` draws of ``y / p`` for draws of documents
        unjudged at the start of the batch (``u_j``). Given the past,
        ``E[R_t] = R`` exactly: every document is judged before the batch, in its
        stratum, or ranked with ``p_i > 0``.

        Returns
        -------
        list of (float, float)
            ``(R_t, var_t)`` per batch; empty before the epoch's first sampling batch.
        """
        batches = [b for b in self._complete_batches()[self.epoch_start_ :] if b["b"] > 0]
        if last is not None:
            batches = batches[len(batches) - last :] if last < len(batches) else batches
        out = []
        for batch, known in zip(batches, self._found_before(batches), strict=True):
            certain = batch["certain"]
            top_rel = float(np.sum(self.labels_[certain] == 1)) if len(certain) else 0.0
            # documents of the take-all stratum that were judged before the batch are
            # already in found_before; the stratum only holds unjudged ones.
            draws = batch["draws"]
            y = (self.labels_[draws] == 1) & batch["draw_new"]
            z = np.where(y, 1.0 / batch["draw_p"], 0.0)
            mean, v = hansen_hurwitz(z)
            out.append((known + top_rel + mean, v))
        return out

    def estimate_hh(self) -> Estimate:
        """Hansen-Hurwitz estimate: the mean of the batch estimates of the current epoch.

        Only the last ``hh_window`` batches are averaged (early rankings are poor and
        their estimates noisy); each batch estimate is conditionally unbiased given the
        past (:meth:`hh_batch_estimates`). Its known part (the relevant documents judged
        before the batch) is read from the current labels, so a corrected judgment
        changes it. The reported ``r_hat`` is ``max(mean, found)``: R is at least
        ``found``, so the truncation is never farther from R than the mean, but it is
        biased upward where the mean is unbiased.

        The variance is a plug-in estimate: when every draw of the window missed the
        remaining relevant documents (typical when they sit deep in the ranking) the draws
        contribute 0 and so does the within-batch variance, and ``r_hat`` falls to
        ``found``; the spread of ``hh_variance="max"`` then measures how ``found`` grew
        over the window, not the documents the draws never reached. A bound built from
        it (:meth:`Estimate.upper`) is a heuristic, not a confidence bound
        (docs/screening.md, forty-third session).

        Before the epoch's first completed sampling batch the estimate is ``found`` with
        variance 0 and not ``sampled``: its recall is NaN and its lower bound 0.0.
        """
        found = int(np.sum(self.labels_ == 1))
        use = self.hh_batch_estimates(last=self.hh_window)
        if not use:
            # no sampling batch in this epoch (the start, the warm-up, documents just
            # joined): found, with no evidence about the rest (Estimate.sampled)
            return Estimate(float(found), 0.0, found, sampled=False)
        ests = [e for e, _ in use]
        vars_ = [v for _, v in use]
        r_hat = max(float(np.mean(ests)), float(found))
        var = float(np.sum(vars_)) / len(use) ** 2
        if self.hh_variance == "max" and len(use) > 1:
            var = max(var, float(np.var(ests, ddof=1)) / len(use))
        return Estimate(r_hat, var, found)

    def estimate(self) -> Estimate:
        """The estimate used by the stopping rule (HT for ``"ht"``, else HH)."""
        return self.estimate_ht() if self.estimator == "ht" else self.estimate_hh()

    def should_stop(self) -> bool:
        """Whether the stopping rule fires (never with judgments pending)."""
        if self.pending_:
            return False
        if self.n_documents and np.all(self.labels_ >= 0):
            return True  # everything screened: the recall is exactly 1, whatever the batches
        if self.n_sampling_batches() < self.min_batches_for(self.estimator):
            return False
        est = self.estimate()
        if self.estimator == "bound":
            return bound_rule(est.found, est.upper(self.confidence), self.target_recall)
        return target_rule(est.found, est.r_hat, self.target_recall)

    def inclusion_probabilities(self) -> NDArray[np.float64]:
        """First-order inclusion probability of every document, in insertion order."""
        return inclusion_from_log_miss(np.where(self.ever_certain_, -np.inf, self.log_miss_))

    @property
    def screened(self) -> int:
        return int(np.sum(self.labels_ >= 0))

    def ordering(self) -> tuple[list[str], int]:
        """The output ordering and its threshold.

        Sampled relevant, sampled non-relevant, then un-sampled documents (by the last
        model score; documents added since that model come after them, in the order they
        were added); the threshold is the position of the first un-sampled document.
        """
        judged = self.labels_ >= 0
        rel = [self.ids_[i] for i in range(self.n_documents) if self.labels_[i] == 1]
        non = [self.ids_[i] for i in range(self.n_documents) if self.labels_[i] == 0]
        rest = np.flatnonzero(~judged)
        if self._scores is not None:
            # the last model scored the documents present then: the first len(scores)
            scored = rest[rest < len(self._scores)]
            rest = np.concatenate([scored[np.argsort(-self._scores[scored], kind="stable")],
                                   rest[rest >= len(self._scores)]])
        return rel + non + [self.ids_[i] for i in rest], len(rel) + len(non)

    # ------------------------------------------------------------------- state
    def get_params(self) -> dict[str, Any]:
        return {
            "topic": self.topic, "draws": self.draws, "n_top": self.n_top,
            "growth": self.growth, "n_negatives": self.n_negatives,
            "exponent": self.exponent, "target_recall": self.target_recall,
            "estimator": self.estimator, "confidence": self.confidence,
            "min_batches": self.min_batches, "hh_window": self.hh_window,
            "hh_variance": self.hh_variance,
            "warmup_precision": self.warmup_precision, "warmup_window": self.warmup_window,
            "C": self.C,
            "class_ratio": self.class_ratio, "max_df": self.max_df,
            "stop_words": self.stop_words, "grow_when_sampling": self.grow_when_sampling,
            "strip_design": self.strip_design, "topic_weight": self.topic_weight,
            "learner": self.learner, "svm_C": self.svm_C,
            "random_state": self.random_state,
        }

    def to_state(self, *, without: Sequence[str] = ()) -> dict[str, Any]:
        """A JSON-safe dict (orjson-serialisable) holding the whole review exactly.

        ``without``: parts left out, for a caller that stores them apart and puts them back
        before :meth:`from_state`: ``"texts"`` (the documents' texts, key ``texts``) and
        ``"ranks"`` (each batch's ranks of every document, key ``ranks`` of each batch).
        """
        unknown = set(without) - {"texts", "ranks"}
        if unknown or isinstance(without, str):
            raise ScreeningError(f"without must name 'texts' and/or 'ranks', got {without!r}")
        ranks = "ranks" not in without
        rng = self.rng_.bit_generator.state
        state = {
            "version": STATE_VERSION,
            "params": self.get_params(),
            "ids": list(self.ids_),
            "texts": list(self.texts_),
            "labels": _enc(self.labels_),
            "log_miss": _enc(self.log_miss_),
            "ever_certain": _enc(self.ever_certain_),
            "sampled": _enc(self.sampled_),
            "pending": list(self.pending_),
            "order": list(self.order_),
            "epoch_start": self.epoch_start_,
            "rng": {
                "bit_generator": rng["bit_generator"],
                "state": str(rng["state"]["state"]),
                "inc": str(rng["state"]["inc"]),
                "has_uint32": int(rng["has_uint32"]),
                "uinteger": int(rng["uinteger"]),
            },
            "batches": [
                {
                    **({"ranks": _enc(b["ranks"])} if ranks else {}),
                    "certain": _enc(b["certain"]),
                    "draws": _enc(b["draws"]), "draw_p": _enc(b["draw_p"]),
                    "draw_new": _enc(b["draw_new"]), "found_before": b["found_before"],
                    **({} if b.get("judged_before") is None
                       else {"judged_before": b["judged_before"]}),
                    "b": b["b"],
                }
                for b in self.batches_
            ],
            "scores": None if self._scores is None else _enc(self._scores),
        }
        if "texts" in without:
            del state["texts"]
        return state

    @staticmethod
    def encode_ranks(batch: dict[str, Any]) -> dict[str, Any]:
        """One batch's ranks as :meth:`to_state` writes them (for a caller storing them
        apart, see ``without``)."""
        return _enc(batch["ranks"])

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Review:
        """Rebuild a review from :meth:`to_state` output.

        Every field is checked, with the consistency the review's methods rely on
        (ids and the arrays of the documents, judged documents and ``order``, pending
        ones, batches' indices, ranks and probabilities, the sampled documents and the
        batches, ``epoch_start``, the generator): a corrupt state raises ScreeningError
        (one line, naming the field and the value received) instead of failing later.
        """
        if not isinstance(state, dict):
            raise ScreeningError(f"state must be a dict, got {type(state).__name__}")
        version = state.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version != STATE_VERSION:
            raise ScreeningError(f"state version must be {STATE_VERSION}, got {_show(version)}")
        missing = [k for k in _STATE_KEYS if k not in state]
        if missing:
            raise ScreeningError(f"state is malformed: no field {missing[0]!r}")
        params = state["params"]
        if not isinstance(params, dict):
            raise _bad("params", params, "must be an object")
        hw = params.get("hh_window")
        if type(hw) is int and hw == 0:
            # written before hh_window had to be >= 1: a window of 0 always averaged 1 batch
            params = {**params, "hh_window": 1}
        try:
            review = cls(**params)
        except ScreeningError as exc:
            raise ScreeningError(f"state field 'params': {exc}") from None
        except (TypeError, ValueError, OverflowError) as exc:  # unknown name, a bad seed
            raise ScreeningError(f"state field 'params' is not valid: {exc}") from None
        # documents
        ids = _ids(state["ids"], "ids")
        n = len(ids)
        texts = state["texts"]
        if not isinstance(texts, list) or len(texts) != n:
            raise _bad("texts", texts, f"must be a list of {n} texts, one per id")
        if not all(isinstance(t, str) for t in texts):
            raise _bad("texts", next(t for t in texts if not isinstance(t, str)),
                       "has an entry that is not a string")
        review.ids_ = ids
        review.texts_ = list(texts)
        review.index_ = {d: i for i, d in enumerate(ids)}
        arrays = {}
        for name, dtype in (("labels", "<i8"), ("log_miss", "<f8"), ("ever_certain", "|b1"),
                            ("sampled", "|b1")):
            arrays[name] = a = _dec(state[name], name, dtype)
            if len(a) != n:
                raise ScreeningError(f"state field {name!r} does not match {n} ids, got {len(a)}")
        labels, log_miss = arrays["labels"], arrays["log_miss"]
        if n and (labels.min() < -1 or labels.max() > 1):
            raise _bad("labels", int(labels.min() if labels.min() < -1 else labels.max()),
                       "must hold -1 (unjudged), 0 or 1")
        if not np.all(log_miss <= 0):  # False for NaN
            raise _bad("log_miss", float(log_miss[~(log_miss <= 0)][0]),
                       "must hold log-probabilities (<= 0)")
        review.labels_ = labels
        review.log_miss_ = log_miss
        # judgments: order is the judged documents in judgment order, pending unjudged ones
        order = _ids(state["order"], "order", review.index_)
        at = np.fromiter((review.index_[d] for d in order), dtype=np.int64, count=len(order))
        judged = int(np.sum(labels >= 0))
        if len(order) != judged or np.any(labels[at] < 0):
            raise _bad("order", len(order), f"must list the {judged} judged documents")
        pending = _ids(state["pending"], "pending", review.index_)
        at = np.fromiter((review.index_[d] for d in pending), dtype=np.int64, count=len(pending))
        if np.any(labels[at] >= 0):
            raise _bad("pending", pending[int(np.argmax(labels[at] >= 0))],
                       "has a document that is judged already")
        review.order_ = order
        review.pending_ = pending
        # batches
        batches = state["batches"]
        if not isinstance(batches, list):
            raise _bad("batches", batches, "must be a list")
        if pending and not batches:
            raise _bad("pending", pending, "must be empty when there is no batch")
        review.batches_ = [_batch(b, t, n, float(review.exponent)) for t, b in enumerate(batches)]
        _check_pending(review.batches_, pending, labels, ids)
        _check_log_miss(review.batches_, log_miss, float(review.exponent), ids)
        certain = np.zeros(n, dtype=bool)
        sampled = np.zeros(n, dtype=bool)
        for b in review.batches_:
            certain[b["certain"]] = True
            sampled[b["certain"]] = True
            sampled[b["draws"]] = True
        for name, want in (("ever_certain", certain), ("sampled", sampled)):
            if not np.array_equal(arrays[name], want):
                bad = int(np.argmax(arrays[name] != want))
                raise _bad(name, f"{ids[bad]}: {bool(arrays[name][bad])}",
                           "does not match the batches")
        _check_judged_before(review.batches_, order, review.index_, n)
        review.ever_certain_ = arrays["ever_certain"]
        review.sampled_ = arrays["sampled"]
        # documents joined at epoch_start (add_documents sets it to the batches made so
        # far): the batches before it ranked fewer documents than the review holds, those
        # from it on all of them; another value mixes batches of the old collection into
        # the estimate and the stopping rule's count (forty-ninth session, R3)
        epoch = _int(state["epoch_start"], "epoch_start", 0, len(batches))
        joined = [t for t, b in enumerate(review.batches_) if len(b["ranks"]) < n]
        if joined != list(range(len(joined))):
            raise _bad("batches", joined[-1], f"has a batch ranking fewer than the {n} "
                       "documents after one that ranked them all")
        if epoch != len(joined):
            raise _bad("epoch_start", epoch, f"must be {len(joined)}, the batches made before "
                       f"the last documents joined (ranking fewer than {n})")
        review.epoch_start_ = epoch
        # the generator
        rng = state["rng"]
        want = review.rng_.bit_generator.state["bit_generator"]
        if not isinstance(rng, dict) or rng.get("bit_generator") != want:
            raise _bad("rng", rng, f"must be the state of a {want} generator")
        values = {}
        for key, hi in (("state", 2**128 - 1), ("inc", 2**128 - 1), ("has_uint32", 1),
                        ("uinteger", 2**32 - 1)):
            v = rng.get(key)
            if isinstance(v, str) and v.isascii() and v.isdigit() and len(v) <= 40:
                v = int(v)
            values[key] = _int(v, f"rng.{key}", 0, hi)
        try:
            review.rng_.bit_generator.state = {
                "bit_generator": want,
                "state": {"state": values["state"], "inc": values["inc"]},
                "has_uint32": values["has_uint32"], "uinteger": values["uinteger"],
            }
        except (TypeError, ValueError, OverflowError) as exc:
            raise ScreeningError(f"state field 'rng' is not valid: {exc}") from None
        scores = state["scores"]
        if scores is not None:
            scores = _dec(scores, "scores", "<f8")
            if len(scores) > n or not np.all(np.isfinite(scores)):
                raise _bad("scores", len(scores), f"must hold at most {n} finite scores")
        review._scores = scores
        return review


DEFAULTS: dict[str, Any] = {
    name: p.default
    for name, p in inspect.signature(Review.__init__).parameters.items()
    if p.default is not inspect.Parameter.empty
}
"""Default hyperparameters of :class:`Review` (read by the command line)."""
