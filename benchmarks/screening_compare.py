"""Side-by-side tables from ``screening_sift.json`` and ``screening_asreview.json``.

Prints Markdown tables (ranking: WSS@95 and recall at 10/25/50%; stopping: HT, HH,
bound at targets 0.8/0.9/0.95 and the knee rule, mean and worst case per dataset)
and writes ``benchmarks/results/screening_compare.json``. The knee rule is also
applied to ASReview's screening orders, at every record from 150 on. When
``screening_cal_tuned.json`` exists (``screening_ablation.py`` with one tuned greedy CAL
configuration), the ranking table gets a "sift CAL tuned" column from it.

Usage::

    .venv/bin/python benchmarks/screening_compare.py [--plots] [--out FILE] [--img DIR]

``--plots`` also redraws ``docs/img/screening/*.png`` (``--img``) from the stored seed-0
runs of ``screening_sift.json``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sift.commands._common import write_json  # noqa: E402
from sift.commands.screen import plot_run  # noqa: E402
from sift.filters.screening.simulation import SimulationResult, StopPoint  # noqa: E402
from sift.filters.screening.stopping import knee_rule  # noqa: E402

RES = ROOT / "benchmarks" / "results"


def knee_cost(order: str, n: int) -> tuple[float, float]:
    """(cost, recall) of the knee rule checked after every record of ``order``.

    ASReview's order ends at the last relevant record, so the rest of the collection
    is all non-relevant whatever its order: it is padded with zeros up to ``n``.
    """
    labels = [int(c) for c in order] + [0] * (n - len(order))
    r = sum(labels)
    cum = np.cumsum(labels)
    for i in range(149, n):
        if knee_rule(labels[: i + 1]):
            return (i + 1) / n, float(cum[i]) / r
    return 1.0, 1.0  # never fired: screen everything


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plots", action="store_true",
                    help="also redraw the recall curves of the seed-0 runs (in --img)")
    ap.add_argument("--out", type=Path, default=RES / "screening_compare.json",
                    help="the JSON written (default: %(default)s)")
    ap.add_argument("--img", type=Path, default=ROOT / "docs" / "img" / "screening",
                    help="where --plots draws (default: %(default)s)")
    args = ap.parse_args(argv)
    sift = orjson.loads((RES / "screening_sift.json").read_bytes())
    asr = orjson.loads((RES / "screening_asreview.json").read_bytes())
    out: dict[str, Any] = {"ranking": {}, "stopping": {}}
    # greedy CAL with the current defaults: screening_cal.json's "cal" configuration
    # (screening_ablation.py on ASReview's seeds), else screening_ablation.json's "strip"
    cal_path = RES / "screening_cal.json"
    abl_path = cal_path if cal_path.is_file() else RES / "screening_ablation.json"
    abl = orjson.loads(abl_path.read_bytes()) if abl_path.is_file() else None
    cal_res = (abl or {}).get("results", {}).get("cal" if abl_path == cal_path else "strip")
    asr_seeds = sorted({r["seed"] for r in asr["runs"]})
    # a tuned greedy CAL (screening_cal_tuned.json, its only configuration), if present
    tuned_path = RES / "screening_cal_tuned.json"
    tuned = orjson.loads(tuned_path.read_bytes()) if tuned_path.is_file() else None
    tuned_res = next(iter(tuned["results"].values())) if tuned else None

    def wss_on(res: dict[str, Any] | None, ds: str) -> tuple[float, float]:
        """Mean and worst WSS@95 of ``ds`` over the seeds ASReview ran (nan if none)."""
        if res is None:
            return float("nan"), float("nan")
        w = [r["wss95"] for r in res["runs"] if r["dataset"] == ds and r["seed"] in asr_seeds]
        return (float(np.mean(w)), float(np.min(w))) if w else (float("nan"), float("nan"))

    def cal_on(ds: str) -> tuple[float, float]:
        if cal_res is None or ds not in cal_res["wss95"]:
            return float("nan"), float("nan")
        return float(cal_res["wss95"][ds]), float("nan")  # means only: no worst case

    print(f"WSS@95 over seeds {asr_seeds} (ASReview's), mean (worst): sift review = the "
          "review mode's screening order (with its sampling draws); sift CAL = the same "
          f"model screened greedily, no draws ({abl_path.name}, seeds "
          f"{(abl or {}).get('seeds')}, mean only)\n")
    if tuned_res is not None:
        print(f"sift CAL tuned = greedy CAL with {tuned_res['params']} "
              f"({tuned_path.name}, seeds {tuned['seeds']})\n")
    tcol = " sift CAL tuned |" if tuned_res is not None else ""
    print(f"| dataset | sift review | sift CAL |{tcol} ASReview | sift R@10% | ASR R@10% | "
          "sift R@25% | ASR R@25% | sift R@50% | ASR R@50% |")
    print("| --- | ---: | ---: |" + (" ---: |" if tuned_res is not None else "")
          + " ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    wins = wins_cal = wins_tuned = 0
    for ds in sorted(sift["per_dataset"]):
        s, a = sift["per_dataset"][ds], asr["per_dataset"].get(ds)
        if a is None:
            continue
        rv, cal = wss_on(sift, ds), cal_on(ds)
        aw = [r["wss95"] for r in asr["runs"] if r["dataset"] == ds]
        wins += rv[0] >= a["wss95"]
        wins_cal += cal[0] >= a["wss95"]
        tw = float(tuned_res["wss95"][ds]) if tuned_res is not None else float("nan")
        wins_tuned += tw >= a["wss95"]
        tcell = f" {tw:.3f} |" if tuned_res is not None else ""
        out["ranking"][ds] = {"sift": s, "asreview": a, "sift_review_wss95": rv[0],
                              "sift_review_wss95_worst": rv[1], "sift_cal_wss95": cal[0],
                              "sift_cal_wss95_worst": cal[1], "asreview_wss95_worst": min(aw),
                              "sift_cal_tuned_wss95": tw}
        print(f"| {ds} | {rv[0]:.3f} ({rv[1]:.3f}) | {cal[0]:.3f} |{tcell} "
              f"{a['wss95']:.3f} ({min(aw):.3f}) | {s['recall_at_10pct']:.3f} | "
              f"{a['recall_at_10pct']:.3f} | {s['recall_at_25pct']:.3f} | "
              f"{a['recall_at_25pct']:.3f} | {s['recall_at_50pct']:.3f} | "
              f"{a['recall_at_50pct']:.3f} |")
    rk = out["ranking"]
    ms = float(np.mean([v["sift_review_wss95"] for v in rk.values()]))
    mc = float(np.mean([v["sift_cal_wss95"] for v in rk.values()]))
    ma = float(np.mean([asr["per_dataset"][d]["wss95"] for d in rk]))
    ms_all = float(np.mean([sift["per_dataset"][d]["wss95"] for d in rk]))
    mt = float(np.mean([v["sift_cal_tuned_wss95"] for v in rk.values()]))
    tmean = f" **{mt:.3f}** |" if tuned_res is not None else ""
    print(f"| **mean** | **{ms:.3f}** | **{mc:.3f}** |{tmean} **{ma:.3f}** | | | | | | |")
    tnote = (f"; sift CAL tuned >= ASReview on {wins_tuned} of {len(rk)}"
             if tuned_res is not None else "")
    print(f"\nsift review >= ASReview on {wins} of {len(rk)} datasets; sift CAL >= ASReview on "
          f"{wins_cal} of {len(rk)}{tnote}; sift review over all its {sift['seeds']} seeds: "
          f"mean WSS@95 {ms_all:.3f}\n")
    out["wss95_mean"] = {"sift": ms, "sift_all_seeds": ms_all, "sift_cal": mc, "asreview": ma,
                         "datasets_sift_ge": wins, "datasets_sift_cal_ge": wins_cal,
                         "seeds": asr_seeds}
    if tuned_res is not None:
        out["wss95_mean"].update({"sift_cal_tuned": mt, "datasets_sift_cal_tuned_ge": wins_tuned,
                                  "sift_cal_tuned_params": tuned_res["params"]})

    # knee rule on ASReview's orders
    knee_asr = {}
    for ds in out["ranking"]:
        pts = [knee_cost(r["order"], r["n"]) for r in asr["runs"] if r["dataset"] == ds]
        knee_asr[ds] = {"cost_mean": float(np.mean([p[0] for p in pts])),
                        "recall_mean": float(np.mean([p[1] for p in pts]))}
    out["knee_on_asreview"] = knee_asr
    out["asreview_screened_at_95_mean"] = float(np.mean(
        [asr["per_dataset"][d]["screened_at_95"] for d in out["ranking"]]))
    print("knee rule on ASReview's orders: mean cost "
          f"{np.mean([v['cost_mean'] for v in knee_asr.values()]):.3f}, mean recall "
          f"{np.mean([v['recall_mean'] for v in knee_asr.values()]):.3f}; ASReview reaches "
          f"95% recall after {out['asreview_screened_at_95_mean']:.3f} on average\n")

    keys = [k for k in sift["overall"] if k != "wss95_mean"]
    print("| rule | target met | mean recall | mean cost |")
    print("| --- | ---: | ---: | ---: |")
    for k in keys:
        o = sift["overall"][k]
        print(f"| {k} | {o['target_met']:.0%} | {o['recall_mean']:.3f} | {o['cost_mean']:.3f} |")
    print()
    print("| dataset | " + " | ".join(keys) + " |")
    print("| --- |" + " ---: |" * len(keys))
    for ds in sorted(sift["per_dataset"]):
        d = sift["per_dataset"][ds]
        cells = [
            f"{d[k]['recall_mean']:.2f} ({d[k]['recall_worst']:.2f}) / "
            f"{d[k]['cost_mean']:.2f} ({d[k]['cost_worst']:.2f})"
            for k in keys
        ]
        print(f"| {ds} | " + " | ".join(cells) + " |")
    out["stopping"] = sift["overall"]
    write_json(args.out, out)
    if args.plots:  # redraw docs/img/screening/*.png from the stored seed-0 runs
        for run in sift["runs"]:
            if run["seed"] != 0:
                continue
            n, r = run["n"], run["relevant"]
            res = SimulationResult([], [int(c) for c in run["order"]], n, r, [])
            for key in ("bound@0.95", "knee"):
                st = run["stops"][key]
                if st["fired"]:
                    res.stops[key] = StopPoint(round(st["cost"] * n), round(st["recall"] * r),
                                               0.0, 0.0, 0.0)
            plot_run(res, args.img / f"{run['dataset']}.png",
                     f"{run['dataset']} (seed 0)", "bound@0.95")


if __name__ == "__main__":
    main()
