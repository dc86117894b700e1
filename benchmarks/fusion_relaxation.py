"""Why the J = 10 gap stays large: the LP relaxation bounds of the maxrank program.

Usage: .venv/bin/python benchmarks/fusion_relaxation.py [--n 40000] [--s 10] [--j 10]
       [--out benchmarks/results/fusion_relaxation.json]

On the fusion_scaling instance (after the exact pruning of sift.filters.fusion),
solves two LP relaxations and compares them with the incumbent of
``solve_weights(time_limit=60)``:

* ``t-form``: the library's program (one ``t`` for the worst member of S and a
  per-candidate big-M, ``|S| + |C|`` rows), relaxed;
* ``pairwise``: the paper's ``|S| x |C|`` rows, each with its own big-M
  ``max_j (d^j(s) - d^j(v))`` (tighter; rows with a non-positive big-M dropped).

Writes benchmarks/results/fusion_relaxation.json (or ``--out``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fusion_scaling import synthetic  # noqa: E402

from sift.commands._common import write_json  # noqa: E402
from sift.commands.nominate import run_in_thread  # noqa: E402
from sift.filters import fusion as fu  # noqa: E402


def lp(c: np.ndarray, a: sp.csr_matrix, j: int) -> tuple[float, float]:
    t0 = time.monotonic()
    n_var = a.shape[1]
    res = linprog(c, A_ub=a, b_ub=np.zeros(a.shape[0]),
                  A_eq=np.concatenate([np.ones(j), np.zeros(n_var - j)])[None, :], b_eq=[1.0],
                  bounds=(0, 1), method="highs")
    return float(res.fun), time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40_000)
    ap.add_argument("--s", type=int, default=10)
    ap.add_argument("--j", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/fusion_relaxation.json")
    args = ap.parse_args()
    d0, pos = synthetic(args.n, args.s, args.j, args.seed)
    prob = fu._problem(d0, pos, None)
    d = prob.d
    pr = fu._prune_maxrank(d, prob.positives, prob.candidates)
    j, ps, act = d.shape[1], pr.pos_rows, pr.active
    m = act.size
    big = np.max(d[ps].max(axis=0)[None, :] - d[act], axis=1)
    a_t = sp.vstack([
        sp.hstack([sp.csr_matrix(d[ps]), -np.ones((ps.size, 1)), sp.csr_matrix((ps.size, m))]),
        sp.hstack([sp.csr_matrix(-d[act]), np.ones((m, 1)), sp.diags(-big)]),
    ], format="csr")
    c = np.concatenate([np.zeros(j + 1), np.ones(m)])
    t_val, t_sec = lp(c, a_t, j)
    blocks = []
    for s in ps:
        ms = np.max(d[s][None, :] - d[act], axis=1)
        keep = np.flatnonzero(ms > 0)
        blocks.append(sp.hstack([
            sp.csr_matrix(d[s][None, :] - d[act[keep]]), sp.csr_matrix((keep.size, 1)),
            sp.csr_matrix((-ms[keep], (np.arange(keep.size), keep)), shape=(keep.size, m)),
        ]))
    a_p = sp.vstack(blocks, format="csr")
    p_val, p_sec = lp(c, a_p, j)
    r = fu.solve_weights(d0, pos, time_limit=60.0, seed=args.seed, runner=run_in_thread)
    out = {
        "command": "benchmarks/fusion_relaxation.py " + " ".join(sys.argv[1:]),
        "N": args.n, "S": args.s, "J": args.j, "seed": args.seed,
        "fixed": pr.n_fixed, "active": int(m),
        "lp_bound_t_form": pr.n_fixed + t_val, "lp_seconds_t_form": round(t_sec, 2),
        "lp_rows_t_form": int(a_t.shape[0]),
        "lp_bound_pairwise": pr.n_fixed + p_val, "lp_seconds_pairwise": round(p_sec, 2),
        "lp_rows_pairwise": int(a_p.shape[0]),
        "solve_weights_60s": {"objective": r.objective, "bound": r.bound, "gap": r.gap,
                              "method": r.method, "seconds": round(r.seconds, 2)},
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    write_json(args.out, out)
    print(out)


if __name__ == "__main__":
    main()
