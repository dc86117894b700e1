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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from sift.filters.bank import Hit, ProfileBank
from sift.filters.measures import f1, precision, recall, t11f, t11su
from sift.filters.profile import Profile
from sift.filters.vectorize import Vectorizer
from sift.topics.codecs import read_jsonl
from sift.topics.errors import RecordError
from sift.topics.records import Document, ProfileSpec


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


@dataclass
class Corpus:
    train: list[Document]
    test: list[Document]
    skipped: dict[str, int] = field(default_factory=dict)


def load_corpus(train: str | Path, test: str | Path, *, skip_bad: bool = False) -> Corpus:
    """Read a training and a test file (JSONL, gzip allowed)."""
    skipped: dict[str, int] = {}

    def reader(path: str | Path, key: str) -> list[Document]:
        def on_skip(lineno: int, err: RecordError) -> None:
            skipped[key] = skipped.get(key, 0) + 1

        return list(read_jsonl(path, Document.from_obj, skip_bad=skip_bad, on_skip=on_skip))

    corpus = Corpus(reader(train, "train"), reader(test, "test"), skipped)
    if not corpus.train:
        raise RecordError("empty", f"{train}: no training documents")
    if not corpus.test:
        raise RecordError("empty", f"{test}: no test documents")
    return corpus


def query_from_name(name: str) -> str:
    """A category name as query text: ``"money-fx"`` -> ``"money fx"``."""
    return " ".join(part for part in name.replace("-", " ").replace(".", " ").split())


def default_specs(corpus: Corpus) -> list[ProfileSpec]:
    """One profile per category present in both training and test documents."""
    train_cats = {t for d in corpus.train for t in d.topics}
    test_cats = {t for d in corpus.test for t in d.topics}
    return [ProfileSpec(c, query=query_from_name(c)) for c in sorted(train_cats & test_cats)]


def read_specs(path: str | Path) -> list[ProfileSpec]:
    return list(read_jsonl(path, ProfileSpec.from_obj))


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


@dataclass
class ReplayResult:
    metrics: dict[str, Any]
    decisions: list[dict[str, Any]]
    seconds: float


def build_bank(
    corpus: Corpus, specs: Sequence[ProfileSpec], cfg: ReplayConfig, vec: Vectorizer,
    X_train: sp.csr_matrix,
) -> tuple[ProfileBank, dict[str, int]]:
    """Train one profile per spec; return the bank and each profile's initial positive count."""
    bank = ProfileBank()
    n_initial: dict[str, int] = {}
    ids = {d.id: i for i, d in enumerate(corpus.train)}
    weights = vec.feature_weights()
    for spec in specs:
        name = spec.profile
        if spec.positives:
            pos = [ids[p] for p in spec.positives if p in ids]
        elif cfg.full_training:
            pos = [i for i, d in enumerate(corpus.train) if name in d.topics]
        else:
            pos = [i for i, d in enumerate(corpus.train) if name in d.topics][: cfg.initial_positives]
        labels = None
        if cfg.full_training:
            labels = np.array([1 if name in d.topics else -1 for d in corpus.train], dtype=np.int8)
        profile = Profile(
            name,
            query=spec.query or query_from_name(name),
            model=cfg.model,
            model_params={**cfg.model_params, **spec.params},
            measure=cfg.measure,
            update="never" if cfg.full_training else cfg.update,
            pseudolabel={} if cfg.full_training else cfg.pseudolabel,
            max_examples=None if cfg.full_training else cfg.max_examples,
            seed=cfg.seed,
            **cfg.profile_params,
        )
        qtext = profile.query
        query = vec.transform([qtext]) if qtext.strip() else None
        profile.fit(query, X_train, positives=pos, labels=labels, feature_weights=weights)
        bank.add(profile)
        n_initial[name] = len(pos)
    return bank, n_initial


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
        d = float(n) - a - b - c
        A, B, C = A + a, B + b, C + c
        per[p] = {
            "R+": int(a), "N+": int(b), "R-": int(c),
            "t11su": float(t11su(a, b, c, d)), "t11f": float(t11f(a, b, c, d)),
            "precision": float(precision(a, b, c, d)), "recall": float(recall(a, b, c, d)),
            "f1": float(f1(a, b, c, d)),
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
    t0 = time.perf_counter()
    specs = list(specs) if specs is not None else default_specs(corpus)
    use_fusion = cfg.vectorizer_class == "fusion" or (cfg.vectorizer_class == "auto" and cfg.model == "fusion")
    if use_fusion:
        from sift.filters.representations import FusionVectorizer

        vec: Vectorizer = FusionVectorizer(**cfg.vectorizer)
    else:
        vec = Vectorizer(**cfg.vectorizer)
    vec.fit(d.text for d in corpus.train)
    X_train = vec.transform([d.text for d in corpus.train])
    X_test = vec.transform([d.text for d in corpus.test])
    bank, n_initial = build_bank(corpus, specs, cfg, vec, X_train)
    filterer: Filterer = (filterer_factory(bank, vec, X_train) if filterer_factory
                          else BankFilterer(bank))
    hits = run_protocol(filterer, X_test, corpus.test, feedback=not cfg.full_training,
                        batch_size=cfg.batch_size, progress=progress)
    names = [s.profile for s in specs]
    metrics = evaluate(hits, corpus.test, names, n_initial=n_initial,
                       full_training=cfg.full_training)
    metrics["skipped_lines"] = dict(corpus.skipped)
    metrics["config"] = {
        "model": cfg.model, "model_params": cfg.model_params, "update": cfg.update,
        "measure": cfg.measure, "initial_positives": cfg.initial_positives,
        "full_training": cfg.full_training, "seed": cfg.seed,
    }
    decisions = [
        {"doc_id": corpus.test[h.row].id, "profile": h.profile, "score": h.score,
         "threshold": h.threshold, "model_version": h.model_version}
        for h in hits
    ]
    seconds = time.perf_counter() - t0
    metrics["seconds"] = seconds
    return ReplayResult(metrics, decisions, seconds)
