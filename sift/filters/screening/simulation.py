"""Simulate a review with gold labels: drive a :class:`Review` as a reviewer would.

The run does not end when the stopping rule fires: it keeps screening (the same
process) until every relevant document is found, so the ranking measures (WSS,
recall at a budget) and the other stopping rules can be read off the *same* run.
Every rule is checked at every batch boundary.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sift.filters.screening.cal import Review
from sift.filters.screening.errors import ScreeningError
from sift.filters.screening.estimators import Estimate
from sift.filters.screening.metrics import recall_at, shuffle_permutation, wss
from sift.filters.screening.stopping import bound_rule, knee_rule, target_rule

TARGETS = (0.8, 0.9, 0.95)
RULES = ("ht", "hh", "bound")


@dataclass
class StopPoint:
    """Where a rule fired: records screened, relevant found, estimate at that point."""

    screened: int
    found: int
    r_hat: float
    r_hat_var: float
    seconds: float


@dataclass
class SimulationResult:
    ids: list[str]
    labels: list[int]  # gold labels in screening order
    n_total: int
    n_relevant: int
    checkpoints: list[int]
    stops: dict[str, StopPoint] = field(default_factory=dict)
    ordering: list[str] = field(default_factory=list)
    threshold: int = 0
    trace: list[dict[str, float]] = field(default_factory=list)

    def point(self, rule: str) -> dict[str, Any]:
        s = self.stops.get(rule)
        if s is None:  # never fired: the reviewer screened everything
            return {"recall": 1.0, "cost": 1.0, "r_hat": float("nan"), "fired": False}
        return {
            "recall": s.found / self.n_relevant,
            "cost": s.screened / self.n_total,
            "r_hat": s.r_hat,
            "r_hat_var": s.r_hat_var,
            "seconds": s.seconds,
            "fired": True,
        }

    def ranking_metrics(self) -> dict[str, float]:
        n, r = self.n_total, self.n_relevant
        return {
            "wss95": wss(self.labels, 0.95, n, r),
            "wss100": wss(self.labels, 1.0, n, r),
            "recall_at_10pct": recall_at(self.labels, 0.10, n, r),
            "recall_at_25pct": recall_at(self.labels, 0.25, n, r),
            "recall_at_50pct": recall_at(self.labels, 0.50, n, r),
        }


def simulate(
    ids: Sequence[str],
    texts: Sequence[str],
    labels: Sequence[int],
    *,
    topic: str | None,
    seed: int,
    params: dict[str, Any] | None = None,
    main_rule: str = "hh@0.95",
    run_to_end: bool = True,
    until_recall: float | None = None,
    targets: Sequence[float] = TARGETS,
) -> SimulationResult:
    """Shuffle with ``seed``, then review with gold labels; see the module docstring.

    ``main_rule`` (``"<ht|hh|bound>@<target>"``) decides :attr:`SimulationResult.ordering`;
    all rules in :data:`RULES` x :data:`TARGETS` and the knee rule are recorded as
    ``stops["hh@0.95"]``, ``stops["knee"]`` and so on. With ``run_to_end`` false the run
    ends as soon as ``main_rule`` fires; with ``until_recall`` it ends once that recall
    is reached (enough for WSS at that recall; used for tuning).

    Examples
    --------
    Eight records on aspirin among 52 weather reports: the review screens the eight first.

    >>> texts = [f"aspirin trial dose {i}" for i in range(8)] + [f"weather rain {i}" for i in range(52)]
    >>> result = simulate([f"d{i}" for i in range(60)], texts, [1] * 8 + [0] * 52,
    ...                   topic="aspirin dose", seed=0)
    >>> result.labels[:9], len(result.labels)
    ([1, 1, 1, 1, 1, 1, 1, 1, 0], 60)
    """
    n = len(ids)
    if not (n == len(texts) == len(labels)):
        raise ScreeningError("ids, texts and labels must have the same length")
    given = np.asarray(labels)
    ok = (given == 0) | (given == 1)
    if given.dtype.kind not in "biuf" or not ok.all():
        bad = given.ravel()[~ok.ravel()][0].item() if given.dtype.kind in "biuf" else given.dtype
        raise ScreeningError(f"labels must be 0 or 1, got {bad!r:.40}")
    gold = given.astype(np.int64)
    n_rel = int(gold.sum())
    if n == 0 or n_rel == 0 or n_rel == n:
        raise ScreeningError(f"labels hold a single class ({n_rel} relevant of {n})")
    perm = shuffle_permutation(n, seed)
    sid = [ids[i] for i in perm]
    gold_by_id = {ids[i]: int(gold[i]) for i in range(n)}
    review = Review(topic, random_state=seed, **(params or {}))
    review.add_documents(sid, [texts[i] for i in perm])
    result = SimulationResult([], [], n, n_rel, [])
    t0 = time.perf_counter()
    found = 0
    while True:
        batch = review.next_batch()
        if not batch:
            break
        for doc_id in batch:
            rel = gold_by_id[doc_id]
            review.record_judgment(doc_id, bool(rel))
            result.ids.append(doc_id)
            result.labels.append(rel)
            found += rel
        result.checkpoints.append(len(result.labels))
        n_sampling = review.n_sampling_batches()
        ok = {rule: n_sampling >= review.min_batches_for(rule) for rule in RULES}
        ht = review.estimate_ht() if ok["ht"] else None
        hh = review.estimate_hh() if ok["hh"] or ok["bound"] else None
        elapsed = time.perf_counter() - t0
        if hh is not None:
            result.trace.append({
                "screened": len(result.labels), "found": found,
                "ht": ht.r_hat if ht is not None else float("nan"),
                "ht_var": ht.var if ht is not None else float("nan"),
                "hh": hh.r_hat, "hh_var": hh.var,
            })
            for target in targets:
                fires: dict[str, tuple[bool, Estimate]] = {}
                if ok["bound"]:
                    fires["bound"] = (bound_rule(found, hh.upper(review.confidence), target), hh)
                if ok["hh"]:
                    fires["hh"] = (target_rule(found, hh.r_hat, target), hh)
                if ht is not None:
                    fires["ht"] = (target_rule(found, ht.r_hat, target), ht)
                for rule, (fired, est) in fires.items():
                    key = f"{rule}@{target}"
                    if fired and key not in result.stops:
                        result.stops[key] = StopPoint(
                            len(result.labels), found, est.r_hat, est.var, elapsed
                        )
        if "knee" not in result.stops and knee_rule(result.labels):
            result.stops["knee"] = StopPoint(len(result.labels), found, float("nan"), 0.0, elapsed)
        if main_rule in result.stops and not result.ordering:
            result.ordering, result.threshold = review.ordering()
            if not run_to_end:
                break
        if until_recall is not None and found >= until_recall * n_rel:
            break
        if found == n_rel and all(
            f"{r}@{t}" in result.stops for r in RULES for t in targets
        ):
            break
        if found == n_rel and len(result.labels) >= n:
            break
    if not result.ordering:
        result.ordering, result.threshold = review.ordering()
    if "knee" not in result.stops and found == n_rel:
        # every relevant record is found, so the rest of the order is all zeros whatever
        # it is: the knee rule's stop is exact without screening it (checked every record)
        labels_all = result.labels + [0] * (n - len(result.labels))
        for s in range(len(result.labels) + 1, n + 1):
            if knee_rule(labels_all[:s]):
                result.stops["knee"] = StopPoint(s, n_rel, float("nan"), 0.0, float("nan"))
                break
    return result
