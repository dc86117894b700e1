"""Paired comparisons of the Reuters-21578 replay runs: is a difference larger than chance?

Reads the JSON that ``benchmarks/engine_replay.py`` writes (each profile's T11SU and T11F
under every pseudolabel seed) and compares two runs of the same profiles, for each
measure:

- the macro averages and their difference (means over the seeds);
- per seed, the difference of the two runs' macro averages (both runs use the same
  seeds, so the same pseudolabel draws), and in how many seeds the first run is ahead;
- over the profiles (each profile's score averaged over the seeds): how many are ahead,
  behind and tied, the Wilcoxon signed-rank test (two-sided; tied profiles left out, as
  ``scipy.stats.wilcoxon`` does by default) and a 95 % bootstrap interval of the macro
  difference (profiles drawn with replacement, seeded);
- the same over the 57 profiles with at least 3 initial positives and more than 5
  relevant test documents, where a single delivery moves a score less.

The pairs: in each file, every ``<model>/update=every...`` run against its
``update=never`` run and against the peer; ``--pair`` adds any two runs, from the same
or different files (``FILE:RUN``).

    .venv/bin/python benchmarks/engine_significance.py \\
        benchmarks/results/engine_replay_test.json \\
        benchmarks/results/engine_replay_test_truncate6.json \\
        --pair benchmarks/results/engine_replay_test_t11f.json:knn/update=every,measure=t11f \\
               benchmarks/results/engine_replay_test.json:knn/update=never \\
        --out benchmarks/results/engine_significance.json

Tests answer whether a difference is larger than the variation over profiles and
seeds; with 90 profiles, a third of them tied at the score of delivering nothing, a
difference of a few thousandths is not.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from scipy import stats

MEASURES = ("t11su", "t11f")
BOOTSTRAP = 10_000


def load(path: str) -> dict[str, Any]:
    try:
        data = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        sys.exit(f"{path}: cannot read replay results: {exc}")
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, dict):
        sys.exit(f"{path}: not the output of engine_replay.py (no 'runs')")
    return runs


def seed_scores(run: dict[str, Any], measure: str) -> dict[str, np.ndarray]:
    """Each profile's scores under every seed (one seed: the run's own score)."""
    out = {}
    for name, row in run["per_profile"].items():
        seeds = row.get(f"{measure}_seeds")
        out[name] = np.asarray(seeds if seeds else [row[measure]], dtype=np.float64)
    return out


def large(run: dict[str, Any]) -> set[str]:
    """The profiles with at least 3 initial positives and more than 5 relevant test documents."""
    return {name for name, row in run["per_profile"].items()
            if row["initial_positives"] >= 3 and row["relevant_in_test"] > 5}


def compare(a: dict[str, Any], b: dict[str, Any], measure: str, profiles: list[str],
            rng: np.random.Generator) -> dict[str, Any]:
    sa, sb = seed_scores(a, measure), seed_scores(b, measure)
    n_seeds = min(sa[p].size for p in profiles)
    if any(sb[p].size != sa[p].size for p in profiles):
        raise ValueError("the two runs have different seed counts")
    A = np.stack([sa[p][:n_seeds] for p in profiles])  # profiles x seeds
    B = np.stack([sb[p][:n_seeds] for p in profiles])
    per_seed = A.mean(axis=0) - B.mean(axis=0)
    d = A.mean(axis=1) - B.mean(axis=1)  # per profile, averaged over the seeds
    nonzero = np.abs(d) > 1e-12
    out: dict[str, Any] = {
        "profiles": len(profiles), "seeds": n_seeds,
        "macro_first": float(A.mean()), "macro_second": float(B.mean()),
        "difference": float(d.mean()),
        "per_seed_differences": [round(float(x), 4) for x in per_seed],
        "seeds_ahead": int(np.sum(per_seed > 0)),
        "profiles_ahead": int(np.sum(d > 1e-12)), "profiles_behind": int(np.sum(d < -1e-12)),
        "profiles_tied": int(np.sum(~nonzero)),
    }
    if nonzero.sum() >= 6:
        res = stats.wilcoxon(d[nonzero])
        out["wilcoxon_p"] = float(res.pvalue)
    else:
        out["wilcoxon_p"] = None
    idx = rng.integers(0, d.size, size=(BOOTSTRAP, d.size))
    boot = d[idx].mean(axis=1)
    out["bootstrap_95"] = [float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))]
    return out


def pair(label: str, a: dict[str, Any], b: dict[str, Any], seed: int) -> dict[str, Any]:
    common = sorted(set(a["per_profile"]) & set(b["per_profile"]))
    if not common:
        raise ValueError(f"{label}: no profile in common")
    big = sorted(set(common) & large(a))
    out: dict[str, Any] = {}
    for measure in MEASURES:
        rng = np.random.default_rng(seed)
        out[measure] = {"all": compare(a, b, measure, common, rng),
                        "large": compare(a, b, measure, big, rng)}
    return out


def auto_pairs(path: str, runs: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``<model>/update=every<rest>`` against ``<model>/update=never<rest>`` and the peer."""
    out = []
    peers = [k for k in runs if k.startswith("peer:")]
    for name in runs:
        m = re.fullmatch(r"([^/]+)/update=every(.*)", name)
        if not m:
            continue
        batch = f"{m.group(1)}/update=never{m.group(2)}"
        if batch in runs:
            out.append((f"{Path(path).name}: {name} vs {batch}", runs[name], runs[batch]))
        for peer in peers:
            out.append((f"{Path(path).name}: {name} vs {peer}", runs[name], runs[peer]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="*", help="engine_replay.py output files")
    ap.add_argument("--pair", nargs=2, action="append", default=[], metavar=("FILE:RUN", "FILE:RUN"),
                    help="two runs to compare (the first is the one tested for being ahead)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the bootstrap draws")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if not args.results and not args.pair:
        ap.error("name at least one results file or --pair")
    cache: dict[str, dict[str, Any]] = {}

    def runs_of(path: str) -> dict[str, Any]:
        if path not in cache:
            cache[path] = load(path)
        return cache[path]

    todo = [p for path in args.results for p in auto_pairs(path, runs_of(path))]
    for first, second in args.pair:
        picked = []
        for spec in (first, second):
            path, sep, run = spec.partition(":")
            if not sep or run not in runs_of(path):
                ap.error(f"--pair {spec!r}: expected FILE:RUN with RUN one of the file's runs")
            picked.append(runs_of(path)[run])
        todo.append((f"{first} vs {second}", picked[0], picked[1]))

    out = {"benchmark": "engine_significance", "command": "python " + " ".join(sys.argv),
           "bootstrap_draws": BOOTSTRAP, "pairs": {}}
    for label, a, b in todo:
        try:
            res = pair(label, a, b, args.seed)
        except ValueError as exc:
            sys.exit(f"{label}: {exc}")
        out["pairs"][label] = res
        print(label)
        for measure in MEASURES:
            for group in ("all", "large"):
                r = res[measure][group]
                p = "-" if r["wilcoxon_p"] is None else f"{r['wilcoxon_p']:.3g}"
                lo, hi = r["bootstrap_95"]
                print(f"  {measure:5s} {group:5s} ({r['profiles']:2d}): {r['macro_first']:.3f} vs "
                      f"{r['macro_second']:.3f}, diff {r['difference']:+.4f} [{lo:+.4f}, {hi:+.4f}], "
                      f"seeds ahead {r['seeds_ahead']}/{r['seeds']}, profiles +{r['profiles_ahead']} "
                      f"-{r['profiles_behind']} ={r['profiles_tied']}, Wilcoxon p {p}")
    if args.out:
        Path(args.out).write_bytes(orjson.dumps(out, option=orjson.OPT_INDENT_2))
        print(f"results in {args.out}")


if __name__ == "__main__":
    main()
