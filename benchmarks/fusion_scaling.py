"""Time of the fusion ILP against N (candidates), |S| and J, on synthetic instances.

Usage: .venv/bin/python benchmarks/fusion_scaling.py [--seed 0] [--out FILE]

Instances: a latent relevance z ~ N(0, 1) per item; dissimilarity j is
z + sigma_j * noise with sigma_j ~ U(0.3, 1.5) (so every representation is
informative but noisy differently); S is drawn from the 1% most relevant items.
The grid (``GRID``) is fixed: 16 instances, the MILPs with time limits of 60 s.
Writes benchmarks/results/fusion_scaling.json (or ``--out``) after every instance.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sift.commands._common import write_json  # noqa: E402
from sift.commands.nominate import run_in_thread  # noqa: E402
from sift.filters.fusion import solve_weights  # noqa: E402


def synthetic(n: int, p: int, j: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(n)
    sig = rng.uniform(0.3, 1.5, j)
    d = z[:, None] + sig[None, :] * rng.standard_normal((n, j))
    top = np.argsort(z)[: max(p + 1, n // 100)]
    pos = rng.choice(top, p, replace=False)
    return d - d.min(axis=0), pos


GRID = [
    # (N, |S|, J, method, time_limit)
    (10_000, 10, 2, "sweep", None), (20_000, 10, 2, "sweep", None), (40_000, 10, 2, "sweep", None),
    (40_000, 50, 2, "sweep", None),
    (10_000, 10, 2, "milp", 60.0), (20_000, 10, 2, "milp", 60.0), (40_000, 50, 2, "milp", 60.0),
    (10_000, 10, 3, "auto", 60.0), (10_000, 10, 5, "auto", 60.0), (10_000, 50, 5, "auto", 60.0),
    (20_000, 10, 10, "auto", 60.0),
    (40_000, 10, 10, "auto", 60.0), (40_000, 10, 10, "milp", 60.0), (40_000, 10, 10, "auto", 10.0),
    (40_000, 50, 10, "auto", 60.0), (40_000, 50, 100, "auto", 60.0),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/fusion_scaling.json"))
    args = ap.parse_args()
    rows = []
    print(f"{'N':>6} {'|S|':>4} {'J':>4} {'method':>6} {'limit':>5} {'sec':>6} {'obj':>6} "
          f"{'bound':>7} {'gap':>6} {'opt':>5} {'removed':>7} {'fixed':>6} {'active':>6}")
    for n, p, j, method, limit in GRID:
        d, pos = synthetic(n, p, j, args.seed)
        t = time.monotonic()
        r = solve_weights(d, pos, method=method, time_limit=limit, seed=args.seed,
                          runner=run_in_thread)
        sec = time.monotonic() - t  # the whole call: set-up, pruning, heuristic, MILP
        row = {"N": n, "S": p, "J": j, "method": method, "time_limit": limit,
               "seconds": round(sec, 3), "within_limit": limit is None or sec <= limit,
               "load_average": [round(x, 2) for x in os.getloadavg()],
               "objective": r.objective, "bound": r.bound,
               "gap": r.gap, "optimal": r.optimal, "solved_by": r.method,
               "removed": r.n_removed, "fixed": r.n_fixed, "active": r.n_active}
        rows.append(row)
        print(f"{n:>6} {p:>4} {j:>4} {method:>6} {limit or '-':>5} {sec:>6.2f} {r.objective:>6.0f} "
              f"{r.bound:>7.1f} {r.gap:>6.3f} {r.optimal!s:>5} {r.n_removed:>7} {r.n_fixed:>6} "
              f"{r.n_active:>6}", flush=True)
        write_json(Path(args.out), {
            "command": "benchmarks/fusion_scaling.py " + " ".join(sys.argv[1:]),
            "seed": args.seed, "cpus": os.cpu_count(),
            "note": "2-core machine shared with other jobs; load_average (1, 5, 15 min) "
                    "taken after each solve",
            "rows": rows})


if __name__ == "__main__":
    main()
