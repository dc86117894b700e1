"""Stacked scoring with two versions of ``sift/filters/bank.py``, in one process.

The machine's speed moves by a factor of two between runs minutes apart, so a change
to the bank is measured here against a copy of the file before it: both banks hold the
same fitted profiles (``--profiles`` Reuters-21578 profiles of each ``--models``), score
the 3,299 test documents in batches of 256 by turns (``--reps`` times each), and must
give the same deliveries.

    git show <sha>:sift/filters/bank.py > /tmp/bank_old.py
    python benchmarks/bank_ab.py --old /tmp/bank_old.py --out benchmarks/results/bank_ab.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.engine_speed import build_bank, reuters  # noqa: E402


def load_old(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("bank_old", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bank_old"] = module  # (its dataclasses look themselves up there)
    spec.loader.exec_module(module)
    return module


def hits(bank: Any, X: Any) -> list[tuple[Any, ...]]:
    return [(h.row + s, h.profile, h.score, h.threshold, h.model_version)
            for s in range(0, X.shape[0], 256) for h in bank.decide(X[s : s + 256])]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, required=True, help="the bank.py to compare with")
    ap.add_argument("--models", default="rocchio,knn")
    ap.add_argument("--profiles", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    old_module = load_old(args.old)
    train, test, cats, vec, X_train = reuters()
    X = vec.transform([d.text for d in test])
    out: dict[str, Any] = {"benchmark": "bank_ab", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                           "command": "python benchmarks/bank_ab.py " + " ".join(sys.argv[1:]),
                           "profiles": args.profiles, "models": {}}
    for model in args.models.split(","):
        new = build_bank(args.profiles, model, vec, X_train, train, cats)
        old = old_module.ProfileBank()
        for p in new:
            old.add(p)
        same = hits(old, X) == hits(new, X)  # (also builds both banks' stacks)
        rates: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(args.reps):
            for name, bank in (("old", old), ("new", new)):
                t0 = time.process_time()
                for s in range(0, X.shape[0], 256):
                    bank.decide(X[s : s + 256])
                rates[name].append(X.shape[0] / (time.process_time() - t0))
        row = {"same_deliveries": same,
               "docs_per_s": {k: [round(v) for v in vs] for k, vs in rates.items()},
               "median_ratio": round(statistics.median(rates["new"]) / statistics.median(rates["old"]), 3)}
        print(model, row, flush=True)
        out["models"][model] = row
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
