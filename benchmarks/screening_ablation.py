"""Quick ranking ablation: greedy CAL (no draws) until 95% recall, WSS@95 per dataset.

Each configuration is a dict of :class:`~sift.filters.screening.Review` parameters laid
over the greedy setting (``draws=0``, ``estimator="ht"``, ``warmup_precision=0``); the
review stops as soon as 95% of the relevant records are found, which is all WSS@95
needs, so a configuration costs a fraction of ``screening_sift.py``.

Usage::

    .venv/bin/python benchmarks/screening_ablation.py \\
        '{"base": {}, "strip": {"strip_design": true}}' --seeds 0,1

Writes ``benchmarks/results/screening_ablation.json`` (or ``--out``).
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

from sift.commands._common import write_json  # noqa: E402
from sift.commands.screen import default_topic, load_records  # noqa: E402
from sift.filters.screening.cal import DEFAULTS  # noqa: E402
from sift.filters.screening.metrics import wss  # noqa: E402
from sift.filters.screening.simulation import simulate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", help='JSON: {"name": {Review params}, ...}')
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--data", default=str(ROOT / "data" / "screening"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" /
                                         "screening_ablation.json"))
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    files = sorted(Path(args.data).glob("*.jsonl.gz"))
    data = {f.name.split(".")[0]: (load_records(f), default_topic(f)) for f in files}
    results: dict[str, Any] = {}
    for name, extra in orjson.loads(args.configs).items():
        params = {"draws": 0, "estimator": "ht", "warmup_precision": 0.0, **extra}
        per: dict[str, float] = {}
        c0 = time.process_time()
        for ds, (recs, topic) in data.items():
            w = []
            for seed in seeds:
                r = simulate([x.id for x in recs], [x.text for x in recs],
                             [x.label for x in recs], topic=topic, seed=seed, params=params,
                             until_recall=0.95, targets=())
                w.append(wss(r.labels, 0.95, r.n_total, r.n_relevant))
            per[ds] = float(np.mean(w))
        results[name] = {"params": params, "all_params": {**DEFAULTS, **params}, "wss95": per,
                         "wss95_mean": float(np.mean(list(per.values()))),
                         "cpu_seconds": round(time.process_time() - c0, 1)}
        print(f"{name}: mean {results[name]['wss95_mean']:.3f} "
              + " ".join(f"{k}={v:.3f}" for k, v in per.items()), flush=True)
        write_json(Path(args.out), {"command": "python benchmarks/screening_ablation.py "
                                    f"'{args.configs}' --seeds {args.seeds}",
                                    "seeds": seeds, "results": results})


if __name__ == "__main__":
    main()
