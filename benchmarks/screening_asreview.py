"""The peer, side by side: ASReview LAB's simulation on the same shuffled files and seeds.

Runs ``asreview simulate`` (asreview 3.0.8, default model ``elas_u4``: TF-IDF 1-2 grams,
linear SVM, max query) with 1 prior relevant and 1 prior irrelevant record, on each
dataset shuffled exactly as ``sift screen`` shuffles it
(:func:`sift.filters.screening.metrics.shuffle_permutation`), and scores the screening
order with the same WSS / recall definitions (:mod:`sift.filters.screening.metrics`).

asreview lives in its own virtualenv (``.cache/asreview-venv``, created here when
missing) so it never touches the project's environment. Finished runs are kept in
``.cache/asreview-runs`` and reused, so an interrupted benchmark resumes.

Usage::

    .venv/bin/python benchmarks/screening_asreview.py --seeds 5

Writes ``benchmarks/results/screening_asreview.json``.
"""

from __future__ import annotations

import argparse
import csv
import sqlite3
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sift.commands._common import Progress, write_json  # noqa: E402
from sift.commands.screen import load_records  # noqa: E402
from sift.filters.screening.metrics import (  # noqa: E402
    recall_at,
    shuffle_permutation,
    wss,
)

ASREVIEW_VERSION = "3.0.8"
VENV = ROOT / ".cache" / "asreview-venv"


def ensure_venv() -> Path:
    exe = VENV / "bin" / "asreview"
    if exe.exists():
        return exe
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run(
        [str(VENV / "bin" / "pip"), "install", "-q", f"asreview=={ASREVIEW_VERSION}"], check=True
    )
    return exe


def run_one(exe: Path, data: Path, seed: int, work: Path) -> tuple[list[int], float]:
    records = load_records(data)
    perm = shuffle_permutation(len(records), seed)
    csv_path = work / f"{data.name.split('.')[0]}_{seed}.csv"
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["record_id", "title", "abstract", "label_included"])
        for row, i in enumerate(perm):
            r = records[i]
            w.writerow([row, r.title, r.abstract, r.label])
    out = work / f"{csv_path.stem}.asreview"
    t0 = time.perf_counter()
    if out.exists():  # finished earlier (runs are cached in .cache/asreview-runs)
        seconds = float((work / f"{csv_path.stem}.seconds").read_text()) if (
            work / f"{csv_path.stem}.seconds").exists() else float("nan")
        return _labels(out, work / csv_path.stem), seconds
    tmp = out.with_suffix(".partial.asreview")
    tmp.unlink(missing_ok=True)
    subprocess.run(
        [
            str(exe), "simulate", str(csv_path),
            "--n-prior-included", "1", "--n-prior-excluded", "1",
            "--prior-seed", str(seed), "--seed", str(seed),
            "-o", str(tmp),
        ],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    seconds = time.perf_counter() - t0
    tmp.rename(out)
    (work / f"{csv_path.stem}.seconds").write_text(f"{seconds:.3f}")
    return _labels(out, work / csv_path.stem), seconds


def _labels(project: Path, folder: Path) -> list[int]:
    """Gold labels in ASReview's screening order (priors first), from its results table."""
    with zipfile.ZipFile(project) as z:
        z.extract("results.db", folder)
    con = sqlite3.connect(folder / "results.db")
    labels = [int(r[0]) for r in con.execute("SELECT label FROM results ORDER BY rowid")]
    con.close()
    return labels


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT / "data" / "screening"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="run seeds first-seed .. first-seed+seeds-1")
    ap.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "screening_asreview.json")
    )
    args = ap.parse_args()
    exe = ensure_venv()
    files = sorted(Path(args.data).glob("*.jsonl.gz"))
    work = ROOT / ".cache" / "asreview-runs"
    work.mkdir(parents=True, exist_ok=True)
    runs = []
    bar = Progress(len(files) * args.seeds, "asreview")
    try:
        for f in files:
            records = load_records(f)
            n, r = len(records), sum(x.label for x in records)
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                labels, seconds = run_one(exe, f, seed, work)
                runs.append({
                    "dataset": f.name.split(".")[0], "seed": seed, "n": n, "relevant": r,
                    "wss95": wss(labels, 0.95, n, r),
                    "recall_at_10pct": recall_at(labels, 0.10, n, r),
                    "recall_at_25pct": recall_at(labels, 0.25, n, r),
                    "recall_at_50pct": recall_at(labels, 0.50, n, r),
                    "screened_at_95": next(
                        (i + 1 for i, c in enumerate(np.cumsum(labels)) if c >= np.ceil(0.95 * r)),
                        n,
                    ) / n,
                    # None for runs reused from an older cache without a timing file
                    "seconds": None if np.isnan(seconds) else round(seconds, 2),
                    "order": "".join(str(x) for x in labels),
                })
                bar.update()
    finally:
        bar.close()
    summary = {}
    for ds in sorted({x["dataset"] for x in runs}):
        rs = [x for x in runs if x["dataset"] == ds]
        summary[ds] = {
            k: float(np.mean([x[k] for x in rs]))
            for k in ("wss95", "recall_at_10pct", "recall_at_25pct", "recall_at_50pct",
                      "screened_at_95")
        }
        timed = [x["seconds"] for x in rs if x["seconds"] is not None]
        summary[ds]["seconds"] = float(np.mean(timed)) if timed else None
        t = f"{summary[ds]['seconds']:.1f}s" if timed else "n/a (cached runs)"
        print(f"{ds:26s} wss95={summary[ds]['wss95']:.3f} r@10={summary[ds]['recall_at_10pct']:.3f}"
              f" t={t}")
    mean_wss = float(np.mean([s["wss95"] for s in summary.values()]))
    print(f"mean WSS@95 over datasets: {mean_wss:.3f}")
    write_json(Path(args.out), {
        "tool": f"asreview {ASREVIEW_VERSION} simulate (elas_u4), 1+1 priors",
        "command": "python benchmarks/screening_asreview.py --seeds " + str(args.seeds)
        + (f" --first-seed {args.first_seed}" if args.first_seed else ""),
        "seeds": args.seeds, "first_seed": args.first_seed, "mean_wss95": mean_wss,
        "per_dataset": summary, "runs": runs,
    })


if __name__ == "__main__":
    main()
