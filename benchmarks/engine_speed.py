"""Speed of the learning core, in process, one core.

1. Scoring: documents/s against 100 and 1,000 profiles (pre-vectorized batches of
   256; and vectorization alone), for each model family, and for Rocchio profiles
   bagged over five pseudolabel draws (``rocchio-bag5``: five members each).
2. Judgments: judgments/s applied with the threshold kept current (update
   "every": model update, leave-one-out re-scoring of the capped example set,
   TROT, stack update) once the example sets are full (2,000 examples), one at a
   time (``Profile.learn_one``; also with ``update=n``, a re-threshold every n
   judgments, n = 2, 5, 10, 20, 50) and in batches spread over the 100 profiles
   (``ProfileBank.learn_many``: one re-threshold per profile per batch, the same
   final state as one by one; the stream applies judgments a batch at a time). The
   judged documents' rows are taken out of the test matrix before the clock starts
   (the service stacks them straight from its stored blocks; until the fourteenth session
   scipy's row indexing, about 75 µs a judgment, was timed with the judgments).
   ``--only floor``: what one such judgment cannot go below (one product of an example
   set with a dense vector, read cold as the judgments move between profiles, and one
   sort of the set's scores; the rate those two alone would allow).
3. Flat cost: a long stream (Reuters test documents repeated; --total, default
   1,000,000) through 100 adaptive Rocchio profiles with feedback for deliveries,
   re-thresholding every 10 judgments (update=10); time per document in each window.

    .venv/bin/python benchmarks/engine_speed.py [--total N]

Writes benchmarks/results/engine_speed.json (``--out``) and, with the flat cost,
docs/img/engine_flat_cost.png (``--png``; ``--png ""``: no plot).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core: no BLAS threads

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from sift.filters.bagging import BaggedProfile
from sift.filters.bank import ProfileBank
from sift.filters.profile import Profile
from sift.filters.threshold import stable_argsort
from sift.filters.vectorize import Vectorizer
from sift.replay import load_corpus, query_from_name

ROOT = Path(__file__).resolve().parent.parent

#: CPU seconds of this (single-threaded) process: the rates are per second of one core,
#: whatever else the shared machine is doing; the load average is recorded beside them.
clock = time.process_time


def build_bank(n_profiles: int, model: str, vec: Vectorizer, X_train, train, cats, bags: int = 1,  # type: ignore[no-untyped-def]
               **kw) -> ProfileBank:
    """``n_profiles`` profiles (bagged profiles of ``bags`` members when ``bags`` > 1)."""
    bank = ProfileBank()
    fw = vec.feature_weights()
    for i in range(n_profiles):
        cat = cats[i % len(cats)]
        offset = (i // len(cats)) * 3
        pos = [j for j, d in enumerate(train) if cat in d.topics][offset : offset + 3]
        p: Profile | BaggedProfile = (
            BaggedProfile.of(f"{cat}#{i}", bags, query=query_from_name(cat), model=model, **kw) if bags > 1
            else Profile(f"{cat}#{i}", query=query_from_name(cat), model=model, **kw))
        p.fit(vec.transform([p.query]), X_train, positives=pos, feature_weights=fw)
        bank.add(p)
    return bank


def reuters(**vectorizer: Any) -> tuple[list, list, list[str], Vectorizer, Any]:
    """Reuters-21578: training and test documents, the categories with at least 3 training
    positives that the test set holds too, the vectorizer (``vectorizer`` its parameters)
    fitted on training, the training matrix."""
    corpus = load_corpus(ROOT / "data/reuters21578/train.jsonl.gz", ROOT / "data/reuters21578/test.jsonl.gz")
    train, test = corpus.train, corpus.test
    cats = sorted({t for d in train for t in d.topics} & {t for d in test for t in d.topics})
    cats = [c for c in cats if sum(c in d.topics for d in train) >= 3]
    vec = Vectorizer(**vectorizer).fit(d.text for d in train)
    return train, test, cats, vec, vec.transform([d.text for d in train])


def judgment_bank(model: str, vec: Vectorizer, X_train: Any, train: list, cats: list[str],
                  rng: np.random.Generator) -> ProfileBank:
    """100 profiles whose example sets are filled to their cap with real judgments (of
    training documents), leave-one-out state built and thresholds current, as after fit."""
    bank = build_bank(100, model, vec, X_train, train, cats,
                      pseudolabel={"min_neg_rank": 1, "neg_fraction": 0.25, "neg_weight": 0.3})
    for p in bank:
        need = p.max_examples - int(p.examples_.real.sum())
        rows = rng.integers(0, X_train.shape[0], need)
        X = X_train[rows]
        lab = np.where([p.name.split("#")[0] in train[r].topics for r in rows], 1, -1).astype(np.int8)
        p.model_.learn(X, lab, np.ones(need), np.ones(need, bool))
        p.examples_.add(X, lab, np.ones(need), np.ones(need, bool))
        p.flush()
        p._rethreshold()
    return bank


def plot_flat_cost(curve: list[dict[str, Any]], path: Path) -> None:
    """The flat cost's curve (CPU µs a document against documents streamed) as a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.plot([c["documents"] for c in curve], [c["us_per_doc"] for c in curve], marker="o")
    ax.set_xscale("log")
    ax.set_ylim(0, max(c["us_per_doc"] for c in curve) * 1.3)
    ax.set_xlabel("documents streamed")
    ax.set_ylabel("CPU microseconds per document")
    ax.set_title("100 adaptive Rocchio profiles (update=10), feedback on deliveries")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--total", type=int, default=1_000_000, help="documents in the flat-cost stream")
    ap.add_argument("--window", type=int, default=50_000)
    ap.add_argument("--only", default="scoring,judgments,floor,flat",
                    help="comma-separated parts to run (scoring, judgments, floor, flat); the others "
                         "are kept from the existing JSON (vectorizing always runs: --only vectorize "
                         "for that alone)")
    ap.add_argument("--scoring-models", default="rocchio,kantor,kantor-top300,knn,rocchio-bag5",
                    help="comma-separated scoring variants to run; the other rows are kept")
    ap.add_argument("--profile-counts", default="100,1000",
                    help="comma-separated profile counts of the scoring rows to run; the others are kept")
    ap.add_argument("--chars", type=float, default=0.0, metavar="C",
                    help="vectorize with character n-grams of share C (Vectorizer(chars=C)); "
                         "write to --out")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/engine_speed.json"))
    ap.add_argument("--png", default=str(ROOT / "docs/img/engine_flat_cost.png"),
                    help="the flat cost's plot (\"\": none)")
    args = ap.parse_args()
    train, test, cats, vec, X_train = reuters(**({"chars": args.chars} if args.chars else {}))
    texts = [d.text for d in test]
    only = set(args.only.split(","))
    path = Path(args.out)
    every_part = {"scoring", "judgments", "floor", "flat"}
    out: dict = orjson.loads(path.read_bytes()) if path.exists() and only != every_part else {}
    out["vectorizer"] = vec.params()
    out["machine_note"] = ("2 cores shared with other work; one process, OPENBLAS_NUM_THREADS=1; "
                           "rates per CPU-second of the process (time.process_time)")
    out["load_average_at_start"] = os.getloadavg()[0]

    X_test = vec.transform(texts)
    # vectorizing: best of 5 passes over the test documents, all at once and in batches of 256
    for key, batch in (("vectorize_docs_per_s", len(texts)), ("vectorize_batch256_docs_per_s", 256)):
        rates = []
        for _ in range(5):
            t0 = clock()
            for s in range(0, len(texts), batch):
                vec.transform(texts[s : s + batch])
            rates.append(len(texts) / (clock() - t0))
        out[key] = max(rates)
        print(f"{key}: {out[key]:,.0f} docs/s", flush=True)

    if "scoring" in only:
        scoring = dict(out.get("scoring_docs_per_s", {}))
        unions = dict(out.get("knn_union_rows", {}))
        fits = dict(out.get("fit_seconds_per_profile", {}))
        hits_per_doc = dict(out.get("deliveries_per_document", {}))
        # rocchio-bag5: bagged profiles of five members each (sift.filters.bagging)
        variants = {"rocchio": {}, "kantor": {}, "kantor-top300": {"top_k": 300}, "knn": {},
                    "rocchio-bag5": {}}
        chosen = args.scoring_models.split(",")
        for model, params in variants.items():
            if model not in chosen:
                continue
            for n in (int(c) for c in args.profile_counts.split(",")):
                t0 = clock()
                bags = int(model.split("-bag")[1]) if "-bag" in model else 1
                bank = build_bank(n, model.split("-")[0], vec, X_train, train, cats, bags=bags,
                                  model_params=params)
                fits[f"{model}/{n}"] = (clock() - t0) / n
                print(f"  fit: {fits[f'{model}/{n}']:.3f} CPU-s a profile", flush=True)
                bank.score(X_test[:256])  # build the stack
                reps = 3 if n == 100 and model == "rocchio" else 1
                hits = 0
                t0 = clock()
                for _ in range(reps):
                    for s in range(0, X_test.shape[0], 256):
                        hits += len(bank.decide(X_test[s : s + 256]))
                rate = reps * X_test.shape[0] / (clock() - t0)
                # each delivery is a decision the bank returns: part of what a scoring call costs
                hits_per_doc[f"{model}/{n}"] = hits / (reps * X_test.shape[0])
                scoring[f"{model}/{n}"] = rate
                print(f"score {model:13s} x {n:5d} profiles: {rate:,.0f} docs/s, "
                      f"{hits_per_doc[f'{model}/{n}']:.2f} deliveries a document", flush=True)
                for stack, _ in bank._stack_groups():  # kNN: the pools' de-duplicated union
                    if hasattr(stack, "union"):
                        unions[f"{model}/{n}"] = stack.union.n
                        print(f"  union of the pools: {stack.union.n:,} documents", flush=True)
        out["scoring_docs_per_s"] = scoring
        out["knn_union_rows"] = unions
        out["fit_seconds_per_profile"] = fits
        out["deliveries_per_document"] = hits_per_doc

    def judgments(bank: ProfileBank, names: list[str], rows: Any, which: Any) -> list[tuple[Profile, Any, bool]]:
        """``(profile, document row, relevant)`` of each judgment, made before the clock
        starts: the service stacks a batch's rows straight from its stored document blocks
        (``sift.filters.sparse.stack_row_refs``), so taking a row out of a matrix with scipy's
        indexing (about 75 µs) is not part of applying a judgment. Until the fourteenth session it
        was timed with it."""
        return [(bank[names[w]], X_test[r], names[w].split("#")[0] in test[r].topics)
                for r, w in zip(rows, which, strict=True)]

    if "judgments" in only:
        # judgments with the threshold kept current, example sets full
        judg: dict = {"load_average_at_start": os.getloadavg()[0]}
        rng = np.random.default_rng(0)
        for model in ("rocchio", "kantor", "knn"):
            bank = judgment_bank(model, vec, X_train, train, cats, rng)
            names = bank.names
            bank.score(X_test[:1])
            sizes = [len(p.examples_) for p in bank]
            res: dict = {"examples_per_profile": int(np.median(sizes))}
            n_j = {"rocchio": 1000, "kantor": 600, "knn": 300}[model]
            rows = rng.integers(0, X_test.shape[0], n_j)
            which = rng.integers(0, len(names), n_j)
            work = judgments(bank, names, rows, which)
            t0 = clock()
            for p, x, rel in work:
                p.learn_one(x, relevant=rel)
            bank.score(X_test[:1])  # stacks current too
            res["one_at_a_time_per_s"] = n_j / (clock() - t0)
            # one at a time, re-thresholding every n judgments (update=n); every judgment
            # applied and every threshold current at the end (the profiles are flushed).
            # Each profile gets about four groups of n, so that the rate is that of
            # update=n and not of the final flush (until the twenty-seventh session n_u
            # was 5 * n_j whatever n: 15 to 50 judgments a profile, so at n = 20 and 50
            # Kantor's and kNN's runs mostly timed one flush of a batch)
            for every in (2, 5, 10, 20, 50):
                n_u = max(5 * n_j, 4 * every * len(names))
                rows = rng.integers(0, X_test.shape[0], n_u)
                which = rng.integers(0, len(names), n_u)
                for p in bank:
                    p.update = every
                work = judgments(bank, names, rows, which)
                t0 = clock()
                for p, x, rel in work:
                    p.learn_one(x, relevant=rel)
                for p in bank:
                    p.flush()
                bank.score(X_test[:1])
                res[f"update_{every}_per_s"] = n_u / (clock() - t0)
                res[f"update_{every}_judgments"] = n_u
                for p in bank:
                    p.update = "every"
            for batch in (100, 1000, 10000):
                n_b = max(batch, {"rocchio": 10000, "kantor": 6000, "knn": 3000}[model])
                rows = rng.integers(0, X_test.shape[0], n_b)
                which = rng.integers(0, len(names), n_b)
                work = [(p.name, x, rel) for p, x, rel in judgments(bank, names, rows, which)]
                t0 = clock()
                for s0 in range(0, n_b, batch):
                    bank.learn_many(work[s0 : s0 + batch])
                    bank.score(X_test[:1])  # stacks current after every batch
                res[f"batch_{batch}_per_s"] = n_b / (clock() - t0)
            judg[model] = res
            print(f"judgments {model:8s} ({res['examples_per_profile']} examples per profile): "
                  + ", ".join(f"{k} {v:,.0f}" for k, v in res.items() if k.endswith("per_s")), flush=True)
        out["judgments"] = judg

    if "floor" in only:
        # The floor under one judgment applied one at a time at 100 profiles with full
        # example sets: a judgment changes one of Rocchio's sums, so its re-threshold
        # recomputes at least one product of the profile's example set (2,000 rows) with
        # a dense vector, and sorts the 2,000 leave-one-out scores for TROT. Cold: the
        # profiles in the random order judgments reach them, so each product reads a set
        # the others pushed out of the caches (100 sets of about 1.3 MB); warm: one set
        # again and again. Everything else a judgment does comes on top.
        rng = np.random.default_rng(0)
        bank = judgment_bank("rocchio", vec, X_train, train, cats, rng)
        mats = [p.examples_._compact().matrix() for p in bank]
        vecs = [rng.random(m.shape[1]) for m in mats]
        order = rng.integers(0, len(mats), 5000)
        floor: dict = {"profiles": len(mats), "rows_per_set": int(np.median([m.shape[0] for m in mats])),
                       "nnz_per_set": int(np.median([m.nnz for m in mats]))}
        for key, which in (("product_cold_us", order), ("product_warm_us", np.zeros_like(order))):
            t0 = clock()
            for j in which:
                mats[j] @ vecs[j]
            floor[key] = 1e6 * (clock() - t0) / order.size
        loo = [p.model_.loo_scores() for p in bank]  # TROT's sort, on the profiles' own scores
        t0 = clock()
        for j in order:
            stable_argsort(loo[j])
        floor["sort_us"] = 1e6 * (clock() - t0) / order.size
        floor["judgments_per_s_product_alone"] = 1e6 / floor["product_cold_us"]
        floor["judgments_per_s_at_most"] = 1e6 / (floor["product_cold_us"] + floor["sort_us"])
        out["judgment_floor"] = floor
        print("judgment floor: " + ", ".join(f"{k} {v:,.1f}" for k, v in floor.items()), flush=True)

    if "flat" in only:
        # flat cost over a long adaptive stream
        total = args.total
        window = args.window
        bank = build_bank(100, "rocchio", vec, X_train, train, cats, update=10)
        gold = [set(d.topics) for d in test]
        n = X_test.shape[0]
        done = 0
        curve = []
        delivered = judged = 0
        t_window = clock()
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
                el = clock() - t_window
                per = 1e6 * el / (done - last_mark)
                curve.append({"documents": done, "us_per_doc": per, "judged_so_far": judged})
                print(f"  {done:>9,d} docs: {per:.1f} us/doc, {judged} judgments so far", flush=True)
                t_window = clock()
                last_mark, next_mark = done, done + window
        out["flat_cost"] = {"profiles": 100, "model": "rocchio", "update": 10, "window": window, "curve": curve}
        if args.png:
            plot_flat_cost(curve, Path(args.png))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(out, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
