"""kNN stacked scoring once the pools hold the profiles' own judged documents.

At fit a kNN profile's pool is mostly the pseudo-negatives all profiles share, and
:class:`~sift.filters.knn.KNNStack` scores the de-duplicated union of the pools with one
default neighbour list per document. Judgments push the pseudo-negatives out (they are
evicted first), so a long-running profile's pool becomes its own judged documents, which
few other pools hold. This script gives ``--profiles`` kNN profiles (fitted on Reuters
training, as ``engine_speed.py`` builds them) ``N`` judged documents each, distinct
blocks of the training set (wrapping when they run out), for each ``N`` of ``--own``,
and times scoring batches of 256 test documents (best of ``--reps`` passes over 1,024
documents, CPU seconds of this process) three ways: the stack as built now (models whose
pool is mostly their own are scored pool by pool), every model in the union (the rule
before the fiftieth session) and every model pool by pool. It checks that the three
give every profile's own scores bit for bit.

    .venv/bin/python benchmarks/knn_own_pools.py --out benchmarks/results/knn_own_pools.json
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_speed import build_bank, reuters

from sift.filters.knn import KNNStack

ROOT = Path(__file__).resolve().parent.parent
clock = time.process_time


def judge_own(bank: Any, X_train: Any, train: list, own: int, rng: np.random.Generator) -> None:
    """``own`` judged documents per profile, distinct blocks of a permutation of the
    training set, labelled from the categories."""
    n = X_train.shape[0]
    perm = rng.permutation(n)
    for i, p in enumerate(bank):
        rows = perm[(i * own + np.arange(own)) % n]
        p.learn_many(X_train[rows], [p.name.split("#")[0] in train[r].topics for r in rows])


def rate(bank: Any, X: Any, reps: int) -> float:
    best = 0.0
    for _ in range(reps):
        t0 = clock()
        for s in range(0, 1024, 256):
            bank.score(X[s : s + 256])
        best = max(best, 1024 / (clock() - t0))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profiles", type=int, default=50)
    ap.add_argument("--own", default="0,500,1000,1500,2000",
                    help="comma-separated judged documents per profile")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/knn_own_pools.json"))
    args = ap.parse_args()
    train, test, cats, vec, X_train = reuters()
    X_test = vec.transform([d.text for d in test[:1024]])
    rows: list[dict[str, Any]] = []
    now_rule = KNNStack._mostly_own
    for own in (int(x) for x in args.own.split(",")):
        bank = build_bank(args.profiles, "knn", vec, X_train, train, cats)
        if own:
            judge_own(bank, X_train, train, own, np.random.default_rng(0))
        ref = np.column_stack([p.model_.score(X_test[:256]) for p in bank])
        row: dict[str, Any] = {"own": own, "examples_per_profile": int(np.median([len(p.examples_) for p in bank]))}
        for name, rule in (("now", now_rule), ("union", lambda self, cols: []),
                           ("pool_by_pool", lambda self, cols: list(cols))):
            KNNStack._mostly_own = rule  # type: ignore[method-assign]
            bank._stacks.clear()  # the stacks rebuilt with this rule
            bank._groups = None
            same = bool(np.array_equal(bank.score(X_test[:256]), ref))
            row[f"{name}_docs_per_s"] = round(rate(bank, X_test, args.reps), 1)
            row[f"{name}_equal_to_own_scores"] = same
            if name == "now":
                for stack, _ in bank._stack_groups():
                    if isinstance(stack, KNNStack):
                        row["now_in_union"] = int(stack.cols.size)
                        row["now_alone"] = len(stack.alone)
                        row["union_rows"] = int(stack.union.n)
        KNNStack._mostly_own = now_rule  # type: ignore[method-assign]
        rows.append(row)
        print(orjson.dumps(row).decode(), flush=True)
    out = {"command": "benchmarks/knn_own_pools.py " + " ".join(sys.argv[1:]),
           "profiles": args.profiles, "batch": 256, "load_average_at_start": os.getloadavg()[0],
           "machine_note": "2 cores shared; one process, OPENBLAS_NUM_THREADS=1; CPU seconds",
           "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_bytes(orjson.dumps(out, option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
