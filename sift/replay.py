"""In-process replay of a document stream with simulated judgments (no broker).

The TREC 2002 adaptive filtering protocol: every test document, in order, is
scored against every profile; a document scoring at or above a profile's
threshold is delivered, and only delivered documents are judged (from the gold
labels) and fed back to that profile. ``full_training`` is the batch
categorization setting instead: every training label is known, no feedback.

The protocol loop is written against a small :class:`Filterer` interface so a
peer (a different learner) runs through exactly the same loop and feedback.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from sift.errors import ConfigError, SiftError
from sift.filters.bagging import RULES, BaggedProfile
from sift.filters.bank import Hit, ProfileBank
from sift.filters.measures import f1, precision, recall, t11f, t11su
from sift.filters.profile import Profile
from sift.filters.sparse import restrict, unique
from sift.filters.threshold import scut
from sift.filters.vectorize import Vectorizer, normalize_rows
from sift.topics.codecs import read_jsonl, read_jsonl_numbered
from sift.topics.errors import RecordError
from sift.topics.records import Document, ProfileSpec, is_positive_text, show, unknown_positive


class Filterer(Protocol):
    """What the protocol loop needs from a set of profiles."""

    def decide(self, X: sp.csr_matrix) -> list[Hit]: ...

    def learn(self, profile: str, x: sp.csr_matrix, relevant: bool) -> bool:
        """Apply a judgment; return True if any profile's model or threshold changed."""
        ...


class BankFilterer:
    """Adapts a :class:`ProfileBank` to the protocol loop."""

    def __init__(self, bank: ProfileBank) -> None:
        self.bank = bank

    def decide(self, X: sp.csr_matrix) -> list[Hit]:
        return self.bank.decide(X)

    def learn(self, profile: str, x: sp.csr_matrix, relevant: bool) -> bool:
        p = self.bank[profile]
        before = p.version_
        p.learn_one(x, relevant)
        return p.version_ != before

    def score_all(self, X: sp.csr_matrix) -> tuple[NDArray[np.float64], NDArray[np.float64], list[int]]:
        """Scores of ``X`` against every profile (one stacked product per model family),
        with each profile's threshold and model version, in bank order."""
        profiles = list(self.bank)
        return (self.bank.score(X), self.bank.thresholds(), [p.version_ for p in profiles])

    def rescore(self, j: int, X: sp.csr_matrix) -> tuple[NDArray[np.float64], float, int]:
        """Scores of ``X`` against profile ``j`` alone (after its feedback changed it)."""
        p = self.bank[self.bank.names[j]]
        return p.score(X), p.threshold_, p.version_


@dataclass
class Corpus:
    train: list[Document]
    test: list[Document]
    skipped: dict[str, int] = field(default_factory=dict)


def load_corpus(train: str | Path, test: str | Path, *, skip_bad: bool = False) -> Corpus:
    """Read a training and a test file (JSONL, gzip allowed).

    Raises
    ------
    RecordError
        At the first bad line (unless ``skip_bad``), or when a file holds no document;
        when ``skip_bad`` left it none, the message says how many lines were skipped and
        why the first was.
    """
    skipped: dict[str, int] = {}
    first: dict[str, tuple[int, str]] = {}

    def reader(path: str | Path, key: str, what: str) -> list[Document]:
        def on_skip(lineno: int, err: RecordError) -> None:
            skipped[key] = skipped.get(key, 0) + 1
            first.setdefault(key, (lineno, err.reason))

        ids: set[str] = set()

        def parse(obj: Any) -> Document:
            doc = Document.from_obj(obj)
            if doc.id in ids:  # decisions and judgments name documents by id
                raise RecordError("duplicate_id", f"document id {show(doc.id)} came before")
            ids.add(doc.id)
            return doc

        docs = list(read_jsonl(path, parse, skip_bad=skip_bad, on_skip=on_skip))
        if not docs:
            why = ""
            if key in skipped:
                n, reason = first[key]
                why = (f": --skip-bad skipped {skipped[key]} bad line"
                       f"{'s' if skipped[key] > 1 else ''} (the first, line {n}: {reason})")
            raise RecordError("empty", f"{path}: no {what} documents{why}")
        return docs

    return Corpus(reader(train, "train", "training"), reader(test, "test", "test"), skipped)


def query_from_name(name: str) -> str:
    """A category name as query text: ``"money-fx"`` -> ``"money fx"``."""
    return " ".join(part for part in name.replace("-", " ").replace(".", " ").split())


def default_specs(corpus: Corpus) -> list[ProfileSpec]:
    """One profile per category present in both training and test documents."""
    train_cats = {t for d in corpus.train for t in d.topics}
    test_cats = {t for d in corpus.test for t in d.topics}
    return [ProfileSpec(c, query=query_from_name(c)) for c in sorted(train_cats & test_cats)]


#: spec fields the replay takes from its options, not per profile
_REPLAY_WIDE = ("model", "measure", "update", "delete")


class SpecError(ConfigError):
    """A profile spec the replay cannot build a profile from (a parameter out of range, a
    positive that is no training document): ``profile`` names it, so that the command
    can add the ``--profiles`` file and line it came from."""

    def __init__(self, profile: str, message: str) -> None:
        super().__init__(message)
        self.profile = profile


def read_specs(path: str | Path) -> list[ProfileSpec]:
    """The profile specs of a ``--profiles`` file (see :func:`read_specs_numbered`)."""
    return [spec for _, spec in read_specs_numbered(path)]


def read_specs_numbered(path: str | Path) -> list[tuple[int, ProfileSpec]]:
    """The profile specs of a ``--profiles`` file, each with its line number. A spec with
    neither a query nor positives gets its name as query (as the replay's own profiles
    do; their positives are then the first ``initial_positives`` training documents of
    the category named like it). A profile named twice, and a field the replay sets for
    every profile from its options (``model``, ``measure``, ``update``) or cannot honour
    (``delete``), are errors naming the file and line."""
    seen: set[str] = set()

    def parse(obj: Any) -> ProfileSpec:
        if (isinstance(obj, dict) and isinstance(obj.get("profile"), str)
                and not obj.get("query") and not obj.get("positives")):
            query = query_from_name(obj["profile"])
            if query.strip():
                obj = {**obj, "query": query}
        spec = ProfileSpec.from_obj(obj)
        wide = [k for k in _REPLAY_WIDE if k in obj]
        if wide:
            raise RecordError("replay_wide_field", f"field {wide[0]!r} of profile {spec.profile!r}: "
                              f"the replay sets {', '.join(_REPLAY_WIDE[:3])} for every profile "
                              f"from its options and deletes none")
        if spec.profile in seen:
            raise RecordError("duplicate_profile", f"profile {spec.profile!r} is named twice")
        seen.add(spec.profile)
        return spec

    return list(read_jsonl_numbered(path, parse))


def split_positives(spec: ProfileSpec, ids: Mapping[str, int], *, full_training: bool = False
                    ) -> tuple[list[int], list[str]]:
    """A spec's ``positives``: the rows of those that are training document ids, and the
    texts (:func:`~sift.topics.records.is_positive_text`), in the spec's order. Raises
    :class:`~sift.errors.ConfigError` for any other entry and for text positives under
    full training (whose labels are the training file's): no listed positive is dropped
    silently."""
    rows: list[int] = []
    texts: list[str] = []
    for pos in spec.positives:
        if pos in ids:
            rows.append(ids[pos])
        elif not is_positive_text(pos):
            raise ConfigError(str(unknown_positive(spec.profile, pos, "a training document id")))
        elif full_training:
            raise ConfigError(f"profile {spec.profile!r}: text positives are not supported with "
                              "full training (list training document ids)")
        else:
            texts.append(pos)
    return rows, texts


@dataclass
class FullTrainingConfig:
    """Options of the batch categorization setting (``ReplayConfig.full_training``).

    The defaults were chosen on a validation split of the Reuters-21578 training set
    (``benchmarks/engine_fulltrain.py --validation``); see the module docstring.

    Parameters
    ----------
    threshold
        ``"scut"`` (F1-optimal score cut on leave-one-out scores, with the guards below)
        or ``"trot"`` (the profile's TROT on ``ReplayConfig.measure``).
    measure
        The measure SCut maximises.
    fbr
        SCut's fallback: when the best ``measure`` value on the training scores is below
        ``fbr``, the threshold falls back to ``fbr_fallback``; 0 turns it off.
    fbr_fallback
        ``"top"`` (the highest training score) or ``"none"`` (deliver nothing).
    min_score
        No threshold at or below this score (``None``: no bound). With 0, a document
        with no evidence for the category (kNN: no relevant neighbour) is never delivered.
    placement
        Where SCut puts the threshold between the lowest accepted training score and
        the next lower one (0: at the accepted score, 0.5: the midpoint).
    select_features
        Keep this many columns, those with the largest chi-square against any
        profile's training labels (``None`` or 0: all).
    knn_normalize
        kNN only: divide the vote by the summed similarity of the ``k`` neighbours.
    model_params
        Default hyperparameters per model for full training (``ReplayConfig.model_params``
        and a spec's ``params`` override them).
    """

    threshold: str = "scut"
    measure: str = "f1"
    fbr: float = 0.3
    fbr_fallback: str = "top"
    min_score: float | None = 0.0
    placement: float = 0.0
    select_features: int | None = 5000
    knn_normalize: bool = True
    model_params: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {
            # the pool is the shared training matrix, every row labelled: no query row
            "knn": {"k": 100, "query_weight": 0.0},
            "rocchio": {"alpha": 1.0, "beta": 16.0, "gamma": 24.0, "corpus_weight": "idf",
                        "nonnegative": False},
        })

    def __post_init__(self) -> None:
        if self.threshold not in ("scut", "trot"):
            raise ConfigError(f"threshold must be 'scut' or 'trot', got {self.threshold!r}")
        if self.fbr_fallback not in ("top", "none"):
            raise ConfigError(f"fbr_fallback must be 'top' or 'none', got {self.fbr_fallback!r}")
        if not (isinstance(self.fbr, int | float) and 0.0 <= self.fbr <= 1.0):
            raise ConfigError(f"fbr must be in [0, 1], got {self.fbr!r}")
        if not (isinstance(self.placement, int | float) and 0.0 <= self.placement < 1.0):
            raise ConfigError(f"placement must be in [0, 1), got {self.placement!r}")
        if self.min_score is not None and not (isinstance(self.min_score, int | float)
                                               and np.isfinite(self.min_score)):
            raise ConfigError(f"min_score must be a finite number or None, got {self.min_score!r}")
        if self.select_features is not None and (
                not isinstance(self.select_features, int) or isinstance(self.select_features, bool)
                or self.select_features < 0):
            raise ConfigError(f"select_features must be a non-negative integer or None, "
                              f"got {self.select_features!r}")

    def as_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "measure": self.measure, "fbr": self.fbr,
                "fbr_fallback": self.fbr_fallback, "min_score": self.min_score,
                "placement": self.placement, "select_features": self.select_features,
                "knn_normalize": self.knn_normalize, "model_params": self.model_params}


@dataclass
class ReplayConfig:
    model: str = "rocchio"
    model_params: dict[str, Any] = field(default_factory=dict)
    update: str | int = "every"
    measure: str = "t11su"
    initial_positives: int = 3
    full_training: bool = False
    seed: int = 0
    pseudolabel: dict[str, Any] | None = None
    max_examples: int | None = 2000
    vectorizer: dict[str, Any] = field(default_factory=dict)
    #: "auto": the fusion vectorizer (word + character n-gram blocks, LSA) when model == "fusion"
    vectorizer_class: str = "auto"
    batch_size: int = 256
    profile_params: dict[str, Any] = field(default_factory=dict)
    #: options of the full-training setting only (ignored otherwise)
    full: FullTrainingConfig = field(default_factory=FullTrainingConfig)
    #: profiles per category from the pseudolabel seeds ``seed .. seed + bags - 1``,
    #: deciding together by ``bag_rule`` (:mod:`sift.filters.bagging`); 1: one profile
    bags: int = 1
    bag_rule: str = "margin"

    def __post_init__(self) -> None:
        if not isinstance(self.bags, int) or isinstance(self.bags, bool) or self.bags < 1:
            raise ConfigError(f"bags must be a positive integer, got {self.bags!r}")
        if self.bag_rule not in RULES:
            raise ConfigError(f"bag_rule must be one of {', '.join(RULES)}, got {self.bag_rule!r}")
        if self.bags > 1 and self.full_training:
            raise ConfigError("bags applies to adaptive filtering: full training has no pseudolabels")


@dataclass
class ReplayResult:
    metrics: dict[str, Any]
    decisions: list[dict[str, Any]]
    seconds: float


def build_bank(
    corpus: Corpus, specs: Sequence[ProfileSpec], cfg: ReplayConfig, vec: Vectorizer,
    X_train: sp.csr_matrix, *, feature_mask: NDArray[np.bool_] | None = None,
) -> tuple[ProfileBank, dict[str, int]]:
    """Train one profile per spec (with ``bags`` > 1, the spec's or else ``cfg.bags``, a
    :class:`BaggedProfile` of that many members, seeds ``cfg.seed ..``); return the bank
    and each profile's initial positive count.

    ``feature_mask`` (full training with feature selection) is applied to the query vectors;
    ``X_train`` must already be masked.
    """
    bank = ProfileBank()
    n_initial: dict[str, int] = {}
    ids = {d.id: i for i, d in enumerate(corpus.train)}
    weights = vec.feature_weights()
    for spec in specs:
        try:
            n_initial[spec.profile] = _build_one(bank, corpus, spec, cfg, vec, X_train, ids,
                                                 weights, feature_mask)
        except SiftError as exc:
            if isinstance(exc, SpecError) or not (spec.params or spec.positives or spec.bags > 1):
                raise  # (the run's own options: not this spec's)
            # a parameter, a positive, bags the spec brings: name the profile
            text = str(exc)
            prefix = f"profile {spec.profile!r}"
            raise SpecError(spec.profile, text if text.startswith(prefix)
                            else f"{prefix}: {text}") from None
    return bank, n_initial


def _build_one(bank: ProfileBank, corpus: Corpus, spec: ProfileSpec, cfg: ReplayConfig,
               vec: Vectorizer, X_train: sp.csr_matrix, ids: Mapping[str, int],
               weights: NDArray[np.float64] | None,
               feature_mask: NDArray[np.bool_] | None) -> int:
    """Train the profile of one spec into ``bank``; return its initial positive count."""
    name = spec.profile
    X_fit = X_train
    if spec.positives:
        pos, texts = split_positives(spec, ids, full_training=cfg.full_training)
        if texts:  # text positives: rows of their own after the training documents
            Xt = vec.transform(texts)
            if feature_mask is not None:
                Xt = mask_columns(Xt, feature_mask)
            X_fit = sp.vstack([X_train, Xt], format="csr")
            pos += range(X_train.shape[0], X_fit.shape[0])
    elif cfg.full_training:
        pos = [i for i, d in enumerate(corpus.train) if name in d.topics]
    else:
        pos = [i for i, d in enumerate(corpus.train) if name in d.topics][: cfg.initial_positives]
    labels = None
    params = {**cfg.model_params, **spec.params}
    if cfg.full_training:
        labels = np.array([1 if name in d.topics else -1 for d in corpus.train], dtype=np.int8)
        params = {**cfg.full.model_params.get(cfg.model, {}), **params}
        if cfg.model == "knn" and cfg.full.knn_normalize:
            params.setdefault("normalize", True)
    kwargs: dict[str, Any] = dict(
        query=spec.query or query_from_name(name),
        model=cfg.model,
        model_params=params,
        measure=cfg.measure,
        update="never" if cfg.full_training else cfg.update,
        pseudolabel={} if cfg.full_training else cfg.pseudolabel,
        max_examples=None if cfg.full_training else cfg.max_examples,
        seed=cfg.seed,
        **cfg.profile_params,
    )
    # a spec's own bags (a --profiles file, the demo's specs) before the config's
    bags, rule = (spec.bags, spec.bag_rule) if spec.bags > 1 else (cfg.bags, cfg.bag_rule)
    if bags > 1 and cfg.full_training:
        raise ConfigError(f"profile {name!r}: bags apply to adaptive filtering, not full training")
    profile: Profile | BaggedProfile = (
        BaggedProfile.of(name, bags, rule=rule, **kwargs) if bags > 1 else Profile(name, **kwargs))
    qtext = kwargs["query"]
    query = vec.transform([qtext]) if qtext.strip() else None
    if query is not None and feature_mask is not None:
        query = mask_columns(query, feature_mask)
    profile.fit(query, X_fit, positives=pos, labels=labels, feature_weights=weights)
    bank.add(profile)
    return len(pos)


# -- full training -------------------------------------------------------------------------
def full_training_labels(corpus: Corpus, specs: Sequence[ProfileSpec]) -> NDArray[np.bool_]:
    """Relevance of every training document to every profile (m x P), as :func:`build_bank`
    sets it under full training: the document carries the category, or is one of the spec's
    listed positives."""
    ids = {d.id: i for i, d in enumerate(corpus.train)}
    Y = np.zeros((len(corpus.train), len(specs)), dtype=bool)
    for j, spec in enumerate(specs):
        Y[:, j] = [spec.profile in d.topics for d in corpus.train]
        Y[[ids[p] for p in spec.positives if p in ids], j] = True
    return Y


def chi2_columns(X: sp.csr_matrix, Y: NDArray[np.bool_], n: int) -> NDArray[np.int64]:
    """The ``n`` columns of ``X`` with the largest chi-square against any column of ``Y``.

    Term presence (``X != 0``) against each label column, the 2x2 chi-square statistic
    ``m (AD - CB)^2 / ((A+C)(B+D)(A+B)(C+D))``, maximised over the labels (Yang and
    Pedersen 1997, chi-square max). Ties are broken by column number; columns never
    seen in ``X`` are never selected.

    Parameters
    ----------
    X
        Training documents (m x F).
    Y
        Relevance, one column per category (m x P).
    n
        Number of columns to keep (``>= 1``).

    Returns
    -------
    ndarray of int64
        The selected columns, sorted.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ConfigError(f"select_features must be a positive integer, got {n!r}")
    X = sp.csr_matrix(X)
    if Y.shape[0] != X.shape[0]:
        raise ConfigError(f"labels must have one row per document ({X.shape[0]}), got {Y.shape[0]}")
    cols = unique(X.indices).astype(np.int64)
    if cols.size <= n:
        return cols
    B = restrict(X, cols)
    B.data[:] = 1.0
    m = float(X.shape[0])
    df = np.asarray(B.sum(axis=0), dtype=np.float64).ravel()[:, None]
    y = Y.astype(np.float64)
    P = y.sum(axis=0)[None, :]
    A = np.asarray(B.T @ y, dtype=np.float64)  # term present and relevant
    Bn = df - A  # present, non-relevant
    C = P - A  # absent, relevant
    D = m - P - Bn  # absent, non-relevant
    num = m * (A * D - C * Bn) ** 2
    den = (A + C) * (Bn + D) * (A + Bn) * (C + D)
    chi = np.divide(num, den, out=np.zeros_like(num), where=den > 0).max(axis=1)
    keep = np.argsort(-chi, kind="stable")[:n]
    return np.sort(cols[keep])


def mask_columns(X: sp.csr_matrix, mask: NDArray[np.bool_]) -> sp.csr_matrix:
    """Zero the columns where ``mask`` is False and scale the rows back to unit length."""
    X = sp.csr_matrix(X, copy=True)
    X.data *= mask[X.indices]
    X.eliminate_zeros()
    return normalize_rows(X)


def scut_thresholds(loo: NDArray[np.float64], labels: NDArray[np.bool_],
                    full: FullTrainingConfig) -> NDArray[np.float64]:
    """One SCut threshold per column of leave-one-out scores (see :class:`FullTrainingConfig`)."""
    return np.array([
        scut(loo[:, j], labels[:, j], measure=full.measure, fbr=full.fbr, fallback=full.fbr_fallback,
             placement=full.placement, min_score=full.min_score)
        for j in range(loo.shape[1])
    ], dtype=np.float64)


def full_training_filterer(bank: ProfileBank, X_train: sp.csr_matrix, Y: NDArray[np.bool_],
                           full: FullTrainingConfig, model: str) -> Filterer:
    """The filterer of the full-training setting, thresholds set as ``full`` says.

    The profiles score through the bank (kNN profiles sharing the training matrix share
    one neighbour search per batch and one set of leave-one-out neighbour lists); with
    ``threshold="scut"`` each profile's TROT threshold is replaced by SCut on its
    leave-one-out scores.
    """
    if full.threshold == "scut":
        for j, p in enumerate(bank):
            if not isinstance(p, Profile):  # build_bank refuses bags with full training
                raise ConfigError(f"profile {p.name!r}: bags apply to adaptive filtering, not full training")
            loo = p.model_.loo_scores()
            if loo.shape != (Y.shape[0],):
                raise ConfigError(f"profile {p.name!r}: leave-one-out scores do not cover the training set")
            p.threshold_ = scut_thresholds(loo[:, None], Y[:, j : j + 1], full)[0]
    return BankFilterer(bank)


def run_protocol(
    filterer: Filterer,
    X_test: sp.csr_matrix,
    test: Sequence[Document],
    *,
    feedback: bool,
    batch_size: int = 256,
    progress: Callable[[int], None] | None = None,
) -> list[Hit]:
    """Stream the test documents in order; judge and feed back each delivery.

    Documents are scored in batches, but the result is exactly that of one
    document at a time: after a delivery whose feedback changed a profile, the
    rest of the batch is scored again.
    """
    hits_out: list[Hit] = []
    n = X_test.shape[0]
    if feedback and isinstance(filterer, BankFilterer):
        return _run_with_rescoring(filterer, X_test, test, batch_size, progress)
    start = 0
    while start < n:
        stop = min(start + batch_size, n)
        hits = filterer.decide(X_test[start:stop])
        consumed = stop
        if feedback and hits:
            by_row: dict[int, list[Hit]] = {}
            for h in hits:
                by_row.setdefault(h.row, []).append(h)
            for row in sorted(by_row):
                changed = False
                for h in by_row[row]:
                    doc = test[start + row]
                    hits_out.append(Hit(start + row, h.profile, h.score, h.threshold, h.model_version))
                    changed |= filterer.learn(h.profile, X_test[start + row], h.profile in doc.topics)
                if changed:
                    consumed = start + row + 1
                    break
        else:
            hits_out.extend(Hit(start + h.row, h.profile, h.score, h.threshold, h.model_version)
                            for h in hits)
        if progress is not None:
            progress(consumed - start)
        start = consumed
    return hits_out


def _run_with_rescoring(
    filterer: BankFilterer, X_test: sp.csr_matrix, test: Sequence[Document], batch_size: int,
    progress: Callable[[int], None] | None,
) -> list[Hit]:
    """The feedback loop of :func:`run_protocol` for a bank: a batch is scored against
    every profile once; when a delivery's feedback changes a profile, only that
    profile's column is re-scored for the rest of the batch (the others did not
    change), which is still exactly one document at a time."""
    hits_out: list[Hit] = []
    names = filterer.bank.names
    n = X_test.shape[0]
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        Xb = X_test[start:stop]
        S, thr, ver = filterer.score_all(Xb)
        r = 0
        while r < S.shape[0]:
            rows = np.flatnonzero((S[r:] >= thr[None, :]).any(axis=1))
            if rows.size == 0:
                break
            row = r + int(rows[0])
            doc = test[start + row]
            changed = []
            for j in np.flatnonzero(S[row] >= thr).tolist():
                hits_out.append(Hit(start + row, names[j], float(S[row, j]), float(thr[j]), ver[j]))
                if filterer.learn(names[j], X_test[start + row], names[j] in doc.topics):
                    changed.append(j)
            if row + 1 < S.shape[0]:
                for j in changed:
                    S[row + 1 :, j], thr[j], ver[j] = filterer.rescore(j, Xb[row + 1 :])
            r = row + 1
        if progress is not None:
            progress(stop - start)
    return hits_out


def evaluate(
    hits: Iterable[Hit],
    test: Sequence[Document],
    profiles: Sequence[str],
    *,
    n_initial: dict[str, int] | None = None,
    full_training: bool = False,
) -> dict[str, Any]:
    """Per-profile contingencies and measures, with macro and micro averages."""
    delivered: dict[str, set[int]] = {p: set() for p in profiles}
    for h in hits:
        delivered[h.profile].add(h.row)
    rel_rows: dict[str, set[int]] = {p: set() for p in profiles}
    for i, d in enumerate(test):
        for t in d.topics:
            if t in rel_rows:
                rel_rows[t].add(i)
    n = len(test)
    per: dict[str, dict[str, Any]] = {}
    A = B = C = 0.0
    for p in profiles:
        a = float(len(delivered[p] & rel_rows[p]))
        b = float(len(delivered[p] - rel_rows[p]))
        c = float(len(rel_rows[p] - delivered[p]))
        neither = float(n) - a - b - c
        A, B, C = A + a, B + b, C + c
        per[p] = {
            "R+": int(a), "N+": int(b), "R-": int(c),
            "t11su": float(t11su(a, b, c, neither)), "t11f": float(t11f(a, b, c, neither)),
            "precision": float(precision(a, b, c, neither)), "recall": float(recall(a, b, c, neither)),
            "f1": float(f1(a, b, c, neither)),
            "relevant_in_test": len(rel_rows[p]),
            "initial_positives": (n_initial or {}).get(p, 0),
        }
    vals = list(per.values())

    def macro(key: str, rows: list[dict[str, Any]]) -> float:
        return float(np.mean([r[key] for r in rows])) if rows else float("nan")

    metrics: dict[str, Any] = {
        "profiles": len(profiles),
        "macro_t11su": macro("t11su", vals),
        "macro_t11f": macro("t11f", vals),
        "micro_precision": float(precision(A, B, C, 0.0)),
        "micro_recall": float(recall(A, B, C, 0.0)),
    }
    if full_training:
        metrics["micro_f1"] = float(f1(A, B, C, 0.0))
        metrics["macro_f1"] = macro("f1", vals)
    few_train = [r for r in vals if r["initial_positives"] < 3]
    few_test = [r for r in vals if r["relevant_in_test"] <= 5]
    rest = [r for r in vals if r["initial_positives"] >= 3 and r["relevant_in_test"] > 5]
    metrics["groups"] = {
        "fewer_than_3_initial_positives": {"profiles": len(few_train), "macro_t11su": macro("t11su", few_train),
                                           "macro_t11f": macro("t11f", few_train)},
        "at_most_5_relevant_in_test": {"profiles": len(few_test), "macro_t11su": macro("t11su", few_test),
                                       "macro_t11f": macro("t11f", few_test)},
        "others": {"profiles": len(rest), "macro_t11su": macro("t11su", rest), "macro_t11f": macro("t11f", rest)},
    }
    metrics["per_profile"] = per
    return metrics


def replay(
    corpus: Corpus,
    cfg: ReplayConfig,
    specs: Sequence[ProfileSpec] | None = None,
    *,
    progress: Callable[[int], None] | None = None,
    filterer_factory: Callable[[ProfileBank, Vectorizer, sp.csr_matrix], Filterer] | None = None,
) -> ReplayResult:
    """Run the whole job: vectorize, train the profiles, stream, evaluate."""
    if filterer_factory and cfg.bags > 1:
        raise ConfigError("bags and a filterer_factory do not combine: the factory makes the decisions")
    t0 = time.perf_counter()
    specs = list(specs) if specs is not None else default_specs(corpus)
    use_fusion = cfg.vectorizer_class == "fusion" or (cfg.vectorizer_class == "auto" and cfg.model == "fusion")
    if use_fusion:
        from sift.filters.representations import FusionVectorizer

        vec: Vectorizer = FusionVectorizer(**cfg.vectorizer)
    else:
        vec = Vectorizer(**cfg.vectorizer)
    vec.fit(d.scored_text for d in corpus.train)
    X_train = vec.transform([d.scored_text for d in corpus.train])
    X_test = vec.transform([d.scored_text for d in corpus.test])
    mask = None
    Y = full_training_labels(corpus, specs) if cfg.full_training else None
    if Y is not None and cfg.full.select_features:
        mask = np.zeros(X_train.shape[1], dtype=bool)
        mask[chi2_columns(X_train, Y, cfg.full.select_features)] = True
        X_train, X_test = mask_columns(X_train, mask), mask_columns(X_test, mask)
    bank, n_initial = build_bank(corpus, specs, cfg, vec, X_train, feature_mask=mask)
    filterer: Filterer
    if filterer_factory:
        filterer = filterer_factory(bank, vec, X_train)
    elif Y is not None:
        filterer = full_training_filterer(bank, X_train, Y, cfg.full, cfg.model)
    else:
        filterer = BankFilterer(bank)
    hits = run_protocol(filterer, X_test, corpus.test, feedback=not cfg.full_training,
                        batch_size=cfg.batch_size, progress=progress)
    names = [s.profile for s in specs]
    metrics = evaluate(hits, corpus.test, names, n_initial=n_initial,
                       full_training=cfg.full_training)
    metrics["skipped_lines"] = dict(corpus.skipped)
    metrics["config"] = {
        "model": cfg.model, "model_params": cfg.model_params, "update": cfg.update,
        "measure": cfg.measure, "initial_positives": cfg.initial_positives,
        "full_training": cfg.full_training, "seed": cfg.seed, "vectorizer": cfg.vectorizer,
        "profile_params": cfg.profile_params, "bags": cfg.bags,
        **({"bag_rule": cfg.bag_rule} if cfg.bags > 1 else {}),
    }
    if len(bank):  # the hyperparameters that ran, defaults included (a spec's own may differ)
        first = next(iter(bank))
        first = first.members[0] if isinstance(first, BaggedProfile) else first
        metrics["config"]["model_params_effective"] = first.model_.get_params()
        metrics["config"]["negative_mass_effective"] = first.negative_mass_
        metrics["config"]["size_cut_effective"] = first.size_cut_
    if cfg.full_training:
        metrics["config"]["full"] = cfg.full.as_dict()
        metrics["config"]["model_params"] = {**cfg.full.model_params.get(cfg.model, {}),
                                             **cfg.model_params}
    decisions = [
        {"doc_id": corpus.test[h.row].id, "profile": h.profile, "score": h.score,
         "threshold": h.threshold, "model_version": h.model_version}
        for h in hits
    ]
    seconds = time.perf_counter() - t0
    metrics["seconds"] = seconds
    return ReplayResult(metrics, decisions, seconds)
