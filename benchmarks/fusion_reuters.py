"""Reuters-21578: ILP fusion against Singleton on the 10 largest categories.

Usage: .venv/bin/python benchmarks/fusion_reuters.py [--trials 30] [--time-limit 2] [--seed 0]

Writes benchmarks/results/fusion_reuters.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
from scipy.stats import wilcoxon

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sift.commands._common import write_json  # noqa: E402
from sift.commands.nominate import load_texts, text_trials  # noqa: E402
from sift.filters.representations import TextRepresentations  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(ROOT / "data/reuters21578/train.jsonl.gz"))
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--positives", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=2.0)
    ap.add_argument("--categories", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/fusion_reuters.json"))
    args = ap.parse_args()
    t0 = time.monotonic()
    texts, labels = load_texts(args.data)
    counts = Counter(t for lab in labels for t in lab)
    cats = [c for c, _ in counts.most_common(args.categories)]
    reps = TextRepresentations(seed=args.seed).fit(texts)
    fit_seconds = time.monotonic() - t0
    print(f"{len(texts)} documents, representations {reps.names_} fitted in {fit_seconds:.1f} s",
          flush=True)
    per_cat = {}
    ilp: list[float] = []
    single: list[float] = []
    by_rep: dict[str, list[float]] = {n: [] for n in reps.names_}
    for i, cat in enumerate(cats):
        res = text_trials(texts, labels, cat, positives=args.positives, trials=args.trials,
                          seed=args.seed + 1000 * i, reps=reps, time_limit=args.time_limit)
        per_cat[cat] = res
        ilp += res["per_trial"]["ilp"]
        single += res["per_trial"]["singleton"]
        for n in reps.names_:
            by_rep[n] += res["per_trial"][n]
        opt = sum(d["optimal"] for d in res["trials_detail"])
        print(f"{cat:>10} n={res['category_size']:>4}  ILP {res['mrr_ilp']:.4f}  "
              f"Singleton {res['mrr_singleton']:.4f}  "
              + "  ".join(f"{n} {v:.4f}" for n, v in res["mrr_by_representation"].items())
              + f"  p={res['wilcoxon_p']:.3g}  optimal {opt}/{args.trials}"
              f"  {res['seconds']:.0f} s", flush=True)
    a, b = np.array(ilp), np.array(single)
    p = float(wilcoxon(a, b, alternative="greater").pvalue)
    details = [d for r in per_cat.values() for d in r["trials_detail"]]
    gaps = [d["gap"] for d in details if not d["optimal"]]
    out = {
        "command": "benchmarks/fusion_reuters.py " + " ".join(sys.argv[1:]),
        "data": Path(args.data).name,
        "documents": len(texts),
        "categories": cats,
        "positives": args.positives,
        "trials_per_category": args.trials,
        "time_limit": args.time_limit,
        "representations": reps.names_,
        "mrr_ilp": float(a.mean()),
        "mrr_singleton": float(b.mean()),
        "mrr_by_representation": {n: float(np.mean(v)) for n, v in by_rep.items()},
        "wilcoxon_p": p,
        "ilp_better": int((a > b).sum()),
        "ilp_worse": int((a < b).sum()),
        "ties": int((a == b).sum()),
        "solves_optimal": int(sum(d["optimal"] for d in details)),
        "solves": len(details),
        "median_gap_when_not_optimal": float(np.median(gaps)) if gaps else 0.0,
        "fit_seconds": fit_seconds,
        "seconds": time.monotonic() - t0,
        "per_category": {c: {k: v for k, v in r.items() if k not in ("trials_detail",)}
                         for c, r in per_cat.items()},
    }
    write_json(Path(args.out), out)
    print(f"all {len(a)} trials: ILP {a.mean():.4f}  Singleton {b.mean():.4f}  "
          f"Wilcoxon p = {p:.3g}  (better {out['ilp_better']}, worse {out['ilp_worse']})")


if __name__ == "__main__":
    main()
