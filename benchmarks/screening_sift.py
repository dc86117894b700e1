"""sift's review mode on the 8 screening datasets: ranking quality and stopping.

For each dataset and seed (the same shuffles as ``benchmarks/screening_asreview.py``)
one simulated review runs until every relevant record is found and every stopping
rule has fired, so all rules are read off the same ranking: HT, HH and the bound
rule at targets 0.8 / 0.9 / 0.95, the knee rule, and recall at fixed budgets.
Also times a Radjenovic_2013 review (6,000 records) to its stop (bound rule, 0.95),
and draws one recall-versus-screened plot per dataset (seed 0).

Usage::

    .venv/bin/python benchmarks/screening_sift.py --seeds 10

Writes ``benchmarks/results/screening_sift.json`` and ``docs/img/screening/*.png``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sift.commands._common import Progress, write_json  # noqa: E402
from sift.commands.screen import plot_run, run_file  # noqa: E402
from sift.filters.screening.cal import DEFAULTS  # noqa: E402
from sift.filters.screening.simulation import RULES, TARGETS  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT / "data" / "screening"))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "screening_sift.json"))
    ap.add_argument("--img", default=str(ROOT / "docs" / "img" / "screening"))
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--params", default="{}", help="JSON of Review parameters to override")
    ap.add_argument("--only", default="", help="comma-separated dataset names (default: all)")
    ap.add_argument("--first-seed", type=int, default=0,
                    help="run seeds first-seed .. first-seed+seeds-1 (to split a run in parts)")
    ap.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                    help="merge the runs of part files (same params) into --out and exit")
    args = ap.parse_args()
    if args.merge:
        parts = [orjson.loads(Path(f).read_bytes()) for f in args.merge]
        if len({orjson.dumps(p["params"], option=orjson.OPT_SORT_KEYS) for p in parts}) != 1:
            raise SystemExit("screening_sift.py: --merge: the parts differ in params")
        runs = sorted((r for p in parts for r in p["runs"]), key=lambda r: (r["seed"],
                                                                          r["dataset"]))
        timing = next((p["timing"] for p in parts if p.get("timing")), None)
        args.params = parts[0]["command"].split("--params '")[1].split("'")[0] \
            if "--params '" in parts[0]["command"] else "{}"
        write_results(Path(args.out), runs, len({r["seed"] for r in runs}),
                      parts[0]["params"], timing, args)
        return
    params: dict[str, Any] = {
        "estimator": "bound", "target_recall": 0.95, **orjson.loads(args.params)
    }
    files = sorted(Path(args.data).glob("*.jsonl.gz"))
    if args.only:
        files = [f for f in files if f.name.split(".")[0] in args.only.split(",")]
    timing = None
    if not args.no_timing:
        radj = Path(args.data) / "Radjenovic_2013.jsonl.gz"
        t0, c0 = time.perf_counter(), time.process_time()
        result, _ = run_file(radj, seed=0, params=params, run_to_end=False)
        timing = {
            "dataset": "Radjenovic_2013", "rule": "bound@0.95", "records": result.n_total,
            "wall_seconds": round(time.perf_counter() - t0, 2),
            "cpu_seconds": round(time.process_time() - c0, 2),
            "screened_at_stop": result.stops["bound@0.95"].screened
            if "bound@0.95" in result.stops else None,
        }
        print(f"Radjenovic_2013 to its stop: {timing['wall_seconds']} s wall, "
              f"{timing['cpu_seconds']} s CPU", flush=True)
    runs: list[dict[str, Any]] = []
    bar = Progress(len(files) * args.seeds, "sift screen")
    # seeds outermost: the results file is rewritten after each full round of datasets,
    # so an interrupted run still leaves a consistent set of seeds
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for f in files:
            name = f.name.split(".")[0]
            t0, c0 = time.perf_counter(), time.process_time()
            result, _ = run_file(f, seed=seed, params=params)
            runs.append({
                "dataset": name, "seed": seed, "n": result.n_total,
                "relevant": result.n_relevant, **result.ranking_metrics(),
                "seconds_total": round(time.perf_counter() - t0, 2),
                "cpu_seconds_total": round(time.process_time() - c0, 2),
                "stops": {
                    key: result.point(key)
                    for key in [f"{r}@{t}" for r in RULES for t in TARGETS] + ["knee"]
                },
                "order": "".join(str(x) for x in result.labels),
            })
            if seed == 0 and args.img:
                plot_run(result, Path(args.img) / f"{name}.png", f"{name} (seed 0)",
                         "bound@0.95")
            bar.update()
        write_results(Path(args.out), runs, seed + 1 - args.first_seed, params, timing, args)
    bar.close()


def write_results(
    out: Path, runs: list[dict[str, Any]], seeds: int, params: dict[str, Any],
    timing: dict[str, Any] | None, args: argparse.Namespace,
) -> None:
    per_dataset: dict[str, Any] = {}
    for name in sorted({r["dataset"] for r in runs}):
        rs = [r for r in runs if r["dataset"] == name]
        d: dict[str, Any] = {
            k: float(np.mean([r[k] for r in rs]))
            for k in ("wss95", "recall_at_10pct", "recall_at_25pct", "recall_at_50pct")
        }
        d["wss95_min"] = float(np.min([r["wss95"] for r in rs]))
        for key in rs[0]["stops"]:
            rec = [r["stops"][key]["recall"] for r in rs]
            cost = [r["stops"][key]["cost"] for r in rs]
            target = float(key.split("@")[1]) if "@" in key else 0.95
            d[key] = {
                "recall_mean": float(np.mean(rec)), "recall_worst": float(np.min(rec)),
                "cost_mean": float(np.mean(cost)), "cost_worst": float(np.max(cost)),
                "target_met": float(np.mean([x >= target - 1e-12 for x in rec])),
            }
        per_dataset[name] = d
    overall: dict[str, Any] = {
        "wss95_mean": float(np.mean([d["wss95"] for d in per_dataset.values()]))
    }
    for key in runs[0]["stops"]:
        target = float(key.split("@")[1]) if "@" in key else 0.95
        overall[key] = {
            "target_met": float(np.mean(
                [r["stops"][key]["recall"] >= target - 1e-12 for r in runs])),
            "cost_mean": float(np.mean([r["stops"][key]["cost"] for r in runs])),
            "recall_mean": float(np.mean([r["stops"][key]["recall"] for r in runs])),
        }
    print(f"after {seeds} seed(s): mean WSS@95 {overall['wss95_mean']:.3f}", flush=True)
    for key in runs[0]["stops"]:
        o = overall[key]
        print(f"  {key:12s} met {o['target_met']:.0%} recall {o['recall_mean']:.3f} "
              f"cost {o['cost_mean']:.3f}", flush=True)
    seed_list = sorted({r["seed"] for r in runs})
    # a command that runs as written (until the forty-fifth session the seeds went in as
    # prose, "(seeds 0-9)"); a merged file says so and names its parts
    command = (f"python benchmarks/screening_sift.py --seeds {seeds}"
               + (f" --first-seed {seed_list[0]}" if seed_list and seed_list[0] else "")
               + (f" --params '{args.params}'" if args.params != "{}" else "")
               + (f" --only {args.only}" if args.only else "")
               + (" --no-timing" if args.no_timing else ""))
    if args.merge:
        command = (f"python benchmarks/screening_sift.py --merge {' '.join(args.merge)}"
                   f" --out {out}")
    write_json(out, {
        "command": command, "seed_list": seed_list,
        "params": {**DEFAULTS, **params}, "seeds": seeds, "overall": overall,
        "per_dataset": per_dataset, "timing": timing, "runs": runs,
    })

if __name__ == "__main__":
    main()
