"""kNN judgments: the leave-one-out list update of two versions of ``sift/filters/knn.py``,
timed in one process, alternating, on the same captured inputs.

    git worktree add /tmp/old <commit>
    .venv/bin/python benchmarks/knn_lists_ab.py --old /tmp/old/sift/filters/knn.py

On this shared 2-core machine the rate of one benchmark run moves by a factor of two
within minutes (the same code, batches of 10,000 judgments: 2,099 to 5,041/s in one
process), so comparing two runs says little. Here both versions of
``_Neighbours.updated``, ``_merged`` and ``rows`` (with the module's ``select``) run in
turns, case by case, on the
same lists and example sets (those of 40 kNN profiles right after a batch of 10,000
judgments over 100 profiles, each example set full at 2,000), ``--reps`` times, and
their results must be identical. Writes ``benchmarks/results/knn_lists_ab.json``
(``--out``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import ast
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from engine_speed import judgment_bank, reuters  # noqa: E402

from sift.commands._common import write_json  # noqa: E402
from sift.filters import knn as K  # noqa: E402

OUT = ROOT / "benchmarks/results/knn_lists_ab.json"
METHODS = ("_merged", "updated", "rows")
FUNCTIONS = ("select",)  # module functions the methods call


def old_methods(path: Path) -> dict[str, Any]:
    """``_Neighbours._merged``, ``updated`` and ``rows`` of another version of the module,
    compiled in a copy of this module's namespace that holds the other version's
    ``select`` (so they build and call this version's class, with the other version's
    list code throughout)."""
    tree = ast.parse(path.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "_Neighbours")
    ns = dict(K.__dict__)
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name in FUNCTIONS:
            exec(compile(ast.Module([fn], []), str(path), "exec"), ns)
    out = {}
    for fn in cls.body:
        if isinstance(fn, ast.FunctionDef) and fn.name in METHODS:
            fn.decorator_list = []
            exec(compile(ast.Module([fn], []), str(path), "exec"), ns)
            out[fn.name] = ns[fn.name]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", type=Path, required=True, help="the other version's knn.py")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--profiles", type=int, default=40, help="captured list updates timed per rep")
    ap.add_argument("--one-at-a-time", action="store_true",
                    help="capture the updates of single judgments (one example in, one out) "
                         "instead of those of a batch of 10,000 over the 100 profiles")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    train, test, cats, vec, X_train = reuters()
    X_test = vec.transform([d.text for d in test])
    rng = np.random.default_rng(0)
    # as benchmarks/engine_speed.py --only judgments: 100 kNN profiles, example sets full
    bank = judgment_bank("knn", vec, X_train, train, cats, rng)
    names = bank.names
    new = {m: K._Neighbours.__dict__[m] for m in METHODS}
    old = old_methods(args.old)
    captured: list[tuple[Any, ...]] = []

    def capture(self: Any, ex: Any, kk: int, extra: int) -> Any:
        captured.append((self, ex, kk, extra))
        return new["updated"](self, ex, kk, extra)

    K._Neighbours.updated = capture  # type: ignore[method-assign]
    rows = rng.integers(0, X_test.shape[0], 10_000)
    which = rng.integers(0, len(names), 10_000)
    if args.one_at_a_time:  # each judgment's own update, on a distinct profile
        for r, w in zip(rows[: args.profiles], range(args.profiles), strict=True):
            bank[names[w]].learn_one(X_test[r], relevant=names[w].split("#")[0] in test[r].topics)
    else:
        bank.learn_many([(names[w], X_test[r], names[w].split("#")[0] in test[r].topics)
                         for r, w in zip(rows, which, strict=True)])
    cases = captured[: args.profiles]

    def use(version: str) -> None:
        if version == "new":
            K._Neighbours._merged = new["_merged"]  # type: ignore[method-assign]
            K._Neighbours.rows = new["rows"]  # type: ignore[method-assign]
            K._Neighbours.updated = new["updated"]  # type: ignore[method-assign]
        else:
            K._Neighbours._merged = staticmethod(old["_merged"])  # type: ignore[method-assign,assignment]
            K._Neighbours.rows = staticmethod(old["rows"])  # type: ignore[method-assign,assignment]
            K._Neighbours.updated = old["updated"]  # type: ignore[method-assign]

    results: dict[str, list[Any]] = {}
    for version in ("old", "new"):
        use(version)
        results[version] = [K._Neighbours.updated(*c) for c in cases]
    identical = all(np.array_equal(a.nbr, b.nbr) and np.array_equal(a.sim, b.sim)
                    and np.array_equal(a.length, b.length)
                    for a, b in zip(results["old"], results["new"], strict=True))
    if not identical:
        sys.exit("the two versions' lists differ")
    # paired at the finest grain: each case by one version then the other (the order
    # alternating), so a change of the machine's speed hits both alike
    times: dict[str, list[float]] = {"old": [], "new": []}
    for rep in range(args.reps):
        spent = {"old": 0.0, "new": 0.0}
        for i, c in enumerate(cases):
            for version in (("old", "new") if (rep + i) % 2 == 0 else ("new", "old")):
                use(version)
                t0 = time.process_time()
                K._Neighbours.updated(*c)
                spent[version] += time.process_time() - t0
        for version, t in spent.items():
            times[version].append(1000 * t)
    old_ms, new_ms = statistics.median(times["old"]), statistics.median(times["new"])
    commit = subprocess.run(["git", "-C", str(args.old.parents[2]), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    out = {"benchmark": "knn_lists_ab", "old": str(args.old), "old_commit": commit or None,
           "cases": len(cases), "one_at_a_time": args.one_at_a_time,
           "examples_per_profile": int(np.median([len(c[1]) for c in cases])),
           "new_examples_per_case": int(np.median([np.count_nonzero(~np.isin(c[1].seq, c[0].seq))
                                                    for c in cases])),
           "identical_lists": identical,
           "ms_per_rep": {k: [round(x, 1) for x in v] for k, v in times.items()},
           "median_ms": {"old": round(old_ms, 1), "new": round(new_ms, 1)},
           "new_over_old": round(new_ms / old_ms, 3), "load_average": os.getloadavg()[0]}
    print(f"updated() x{len(cases)}: old {old_ms:.0f} ms, new {new_ms:.0f} ms (median of {args.reps}), "
          f"new/old {new_ms / old_ms:.2f}; lists identical")
    write_json(args.out, out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
