"""Speed of the learning core, in process, one core.

1. Scoring: documents/s against 100 and 1,000 profiles (pre-vectorized batches of
   256; and vectorization alone), for each model family.
2. Judgments: judgments/s applied with the threshold kept current (update
   "every": model update, leave-one-out re-scoring of the capped example set,
   TROT, stack update) once the example sets are full (2,000 examples).
3. Flat cost: a long stream (Reuters test documents repeated; --total, default
   1,000,000) through 100 adaptive Rocchio profiles with feedback for deliveries,
   re-thresholding every 10 judgments (update=10); time per document in each window.

    .venv/bin/python benchmarks/engine_speed.py [--total N]

Writes benchmarks/results/engine_speed.json and docs/img/engine_flat_cost.png.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import orjson

from sift.filters.bank import ProfileBank
from sift.filters.profile import Profile
from sift.filters.vectorize import Vectorizer
from sift.replay import load_corpus, query_from_name

ROOT = Path(__file__).resolve().parent.parent


def build_bank(n_profiles: int, model: str, vec: Vectorizer, X_train, train, cats, **kw) -> ProfileBank:  # type: ignore[no-untyped-def]
    bank = ProfileBank()
    fw = vec.feature_weights()
    for i in range(n_profiles):
        cat = cats[i % len(cats)]
        offset = (i // len(cats)) * 3
        pos = [j for j, d in enumerate(train) if cat in d.topics][offset : offset + 3]
        p = Profile(f"{cat}#{i}", query=query_from_name(cat), model=model, **kw)
        p.fit(vec.transform([p.query]), X_train, positives=pos, feature_weights=fw)
        bank.add(p)
    return bank


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--total", type=int, default=1_000_000, help="documents in the flat-cost stream")
    ap.add_argument("--window", type=int, default=50_000)
    args = ap.parse_args()
    corpus = load_corpus(ROOT / "data/reuters21578/train.jsonl.gz", ROOT / "data/reuters21578/test.jsonl.gz")
    train, test = corpus.train, corpus.test
    cats = sorted({t for d in train for t in d.topics} & {t for d in test for t in d.topics})
    cats = [c for c in cats if sum(c in d.topics for d in train) >= 3]
    vec = Vectorizer().fit(d.text for d in train)
    X_train = vec.transform([d.text for d in train])
    texts = [d.text for d in test]
    out: dict = {"machine_note": "2 cores shared; one process"}

    t0 = time.perf_counter()
    X_test = vec.transform(texts)
    out["vectorize_docs_per_s"] = len(texts) / (time.perf_counter() - t0)
    print(f"vectorize: {out['vectorize_docs_per_s']:,.0f} docs/s", flush=True)

    scoring = {}
    for model in ("rocchio", "kantor", "knn"):
        for n in (100, 1000):
            if model == "knn" and n == 1000:
                continue
            bank = build_bank(n, model, vec, X_train, train, cats)
            bank.score(X_test[:256])  # build the stack
            reps = 3 if n == 100 and model == "rocchio" else 1
            t0 = time.perf_counter()
            for _ in range(reps):
                for s in range(0, X_test.shape[0], 256):
                    bank.decide(X_test[s : s + 256])
            rate = reps * X_test.shape[0] / (time.perf_counter() - t0)
            scoring[f"{model}/{n}"] = rate
            print(f"score {model:8s} x {n:5d} profiles: {rate:,.0f} docs/s", flush=True)
    out["scoring_docs_per_s"] = scoring

    # judgments with the threshold kept current, example sets full
    judg = {}
    rng = np.random.default_rng(0)
    for model in ("rocchio", "kantor", "knn"):
        bank = build_bank(100, model, vec, X_train, train, cats,
                          pseudolabel={"min_neg_rank": 1, "neg_fraction": 0.25, "neg_weight": 0.3})
        names = bank.names
        # fill every example set to its cap with real judgments first
        for p in bank:
            need = p.max_examples - int(p.examples_.real.sum())
            rows = rng.integers(0, X_train.shape[0], need)
            X = X_train[rows]
            lab = np.where([p.name.split("#")[0] in train[r].topics for r in rows], 1, -1).astype(np.int8)
            p.model_.learn(X, lab, np.ones(need), np.ones(need, bool))
            p.examples_.add(X, lab, np.ones(need), np.ones(need, bool))
        sizes = [len(p.examples_) for p in bank]
        n_j = {"rocchio": 400, "kantor": 200, "knn": 20}[model]
        rows = rng.integers(0, X_test.shape[0], n_j)
        which = rng.integers(0, len(names), n_j)
        t0 = time.perf_counter()
        for r, w in zip(rows, which, strict=True):
            p = bank[names[w]]
            p.learn_one(X_test[r], relevant=p.name.split("#")[0] in test[r].topics)
        bank.score(X_test[:1])  # stacks current too
        rate = n_j / (time.perf_counter() - t0)
        judg[model] = {"judgments_per_s": rate, "examples_per_profile": int(np.median(sizes))}
        print(f"judgments {model:8s}: {rate:,.0f}/s with {int(np.median(sizes))} examples per profile", flush=True)
    out["judgments"] = judg

    # flat cost over a long adaptive stream
    total = args.total
    window = args.window
    bank = build_bank(100, "rocchio", vec, X_train, train, cats, update=10)
    gold = [set(d.topics) for d in test]
    n = X_test.shape[0]
    done = 0
    curve = []
    delivered = judged = 0
    t_window = time.perf_counter()
    last_mark, next_mark = 0, window
    while done < total:
        start = done % n
        stop = min(start + 256, n, start + (total - done))
        hits = bank.decide(X_test[start:stop])
        for h in hits:
            delivered += 1
            cat = h.profile.split("#")[0]
            bank[h.profile].learn_one(X_test[start + h.row], relevant=cat in gold[start + h.row])
            judged += 1
        done += stop - start
        if done >= next_mark or done == total:
            el = time.perf_counter() - t_window
            per = 1e6 * el / (done - last_mark)
            curve.append({"documents": done, "us_per_doc": per, "judged_so_far": judged})
            print(f"  {done:>9,d} docs: {per:.1f} us/doc, {judged} judgments so far", flush=True)
            t_window = time.perf_counter()
            last_mark, next_mark = done, done + window
    out["flat_cost"] = {"profiles": 100, "model": "rocchio", "update": 10, "window": window, "curve": curve}
    (ROOT / "benchmarks/results").mkdir(parents=True, exist_ok=True)
    (ROOT / "benchmarks/results/engine_speed.json").write_bytes(
        orjson.dumps(out, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.2))
        ax.plot([c["documents"] for c in curve], [c["us_per_doc"] for c in curve], marker="o")
        ax.set_xscale("log")
        ax.set_ylim(0, max(c["us_per_doc"] for c in curve) * 1.3)
        ax.set_xlabel("documents streamed")
        ax.set_ylabel("microseconds per document")
        ax.set_title("100 adaptive Rocchio profiles (update=10), feedback on deliveries")
        fig.tight_layout()
        (ROOT / "docs/img").mkdir(parents=True, exist_ok=True)
        fig.savefig(ROOT / "docs/img/engine_flat_cost.png", dpi=110)
    except ImportError:
        print("matplotlib missing: no plot")
    print("wrote benchmarks/results/engine_speed.json")


if __name__ == "__main__":
    main()
