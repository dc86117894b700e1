"""kNN scoring speed at several k (and without the no-evidence floor), paired in one process.

The machine's speed moves by a factor of two within minutes, so the k values are
compared by turns in one process: for each profile count, one bank of Reuters-21578
kNN profiles per k (built as ``engine_speed.py`` builds them), each scoring the 3,299
test documents in batches of 256 with ``ProfileBank.decide``, ``--reps`` times by turns.
Records every pass's documents per CPU-second and the deliveries per document (each a
decision the bank returns). With ``--without-floor`` each k also gets a bank fitted as
before the seventeenth session, with thresholds allowed down to kNN's no-evidence
score of 0 (``KNN.no_evidence_score`` set to ``None`` while it is fitted): profiles that
deliver every document their neighbours give no vote.

    .venv/bin/python benchmarks/knn_k_speed.py --out benchmarks/results/knn_k_speed_s17.json
    .venv/bin/python benchmarks/knn_k_speed.py --ks 30 --without-floor \
        --out benchmarks/results/knn_floor_speed_s17.json
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.engine_speed import build_bank, reuters  # noqa: E402
from sift.filters.knn import KNN  # noqa: E402


def fitted(n: int, k: int, floor: bool, data: Any) -> Any:
    """A bank of ``n`` kNN profiles with ``k`` neighbours, its thresholds floored or not."""
    train, cats, vec, X_train = data
    saved = KNN.no_evidence_score
    KNN.no_evidence_score = saved if floor else None
    try:
        return build_bank(n, "knn", vec, X_train, train, cats, model_params={"k": k})
    finally:
        KNN.no_evidence_score = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", default="15,30")
    ap.add_argument("--profiles", default="100,1000")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--without-floor", action="store_true",
                    help="also fit each k without the no-evidence floor of the thresholds")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    train, test, cats, vec, X_train = reuters()
    X = vec.transform([d.text for d in test])
    out: dict[str, Any] = {"benchmark": "knn_k_speed", "command": " ".join(sys.argv),
                           "load_at_start": os.getloadavg()[0], "runs": {}}
    for n in (int(c) for c in args.profiles.split(",")):
        data = (train, cats, vec, X_train)
        names = [(f"k={k}", k, True) for k in ks]
        if args.without_floor:
            names += [(f"k={k}, no floor", k, False) for k in ks]
        banks = {name: fitted(n, k, floor, data) for name, k, floor in names}
        for bank in banks.values():
            bank.score(X[:256])  # build the stacks
        rates: dict[str, list[float]] = {name: [] for name in banks}
        hits: dict[str, float] = {}
        for _ in range(args.reps):
            for name, bank in banks.items():
                t0 = time.process_time()
                h = sum(len(bank.decide(X[s : s + 256])) for s in range(0, X.shape[0], 256))
                rates[name].append(X.shape[0] / (time.process_time() - t0))
                hits[name] = h / X.shape[0]
        out["runs"][f"{n}_profiles"] = {
            name: {"docs_per_cpu_s": [round(r) for r in rates[name]],
                   "median": round(statistics.median(rates[name])),
                   "deliveries_per_document": round(hits[name], 2)} for name in banks}
        print(n, json.dumps(out["runs"][f"{n}_profiles"]), flush=True)
    out["load_at_end"] = os.getloadavg()[0]
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
