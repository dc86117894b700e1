"""kNN scoring speed at several k, paired in one process.

The machine's speed moves by a factor of two within minutes, so the k values are
compared by turns in one process: for each profile count, one bank of Reuters-21578
kNN profiles per k (built as ``engine_speed.py`` builds them), each scoring the 3,299
test documents in batches of 256 with ``ProfileBank.decide``, ``--reps`` times by turns.
Records every pass's documents per CPU-second and the deliveries per document (each a
decision the bank returns).

    .venv/bin/python benchmarks/knn_k_speed.py --out benchmarks/results/knn_k_speed_s17.json
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", default="15,30")
    ap.add_argument("--profiles", default="100,1000")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    train, test, cats, vec, X_train = reuters()
    X = vec.transform([d.text for d in test])
    out: dict[str, Any] = {"benchmark": "knn_k_speed", "command": " ".join(sys.argv),
                           "load_at_start": os.getloadavg()[0], "runs": {}}
    for n in (int(c) for c in args.profiles.split(",")):
        banks = {k: build_bank(n, "knn", vec, X_train, train, cats, model_params={"k": k}) for k in ks}
        for bank in banks.values():
            bank.score(X[:256])  # build the stacks
        rates: dict[int, list[float]] = {k: [] for k in ks}
        hits: dict[int, float] = {}
        for _ in range(args.reps):
            for k, bank in banks.items():
                t0 = time.process_time()
                h = sum(len(bank.decide(X[s : s + 256])) for s in range(0, X.shape[0], 256))
                rates[k].append(X.shape[0] / (time.process_time() - t0))
                hits[k] = h / X.shape[0]
        out["runs"][f"{n}_profiles"] = {
            f"k={k}": {"docs_per_cpu_s": [round(r) for r in rates[k]],
                       "median": round(statistics.median(rates[k])),
                       "deliveries_per_document": round(hits[k], 2)} for k in ks}
        print(n, json.dumps(out["runs"][f"{n}_profiles"]), flush=True)
    out["load_at_end"] = os.getloadavg()[0]
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
