"""How long one batch of judgments for one ``model: fusion`` profile takes to apply.

A worker applies a profile's judgments of one step together (``Profile.learn_many``),
and a fusion profile re-solves its weights every ``resolve_every`` positives within the
batch, as judgments one by one would (``ScoringModel.settles_per_group``), each solve up
to its ``time_limit``. The worker's event loop waits meanwhile, so this is how long a
backlog of judgments for one fusion profile holds it (against ``SIFT_SESSION_TIMEOUT``).

The service's setup: the plain ``Vectorizer`` fitted on the Reuters-21578 training file
(so the components are word, Rocchio, Kantor, kNN), a profile made from its name
alone, then the first ``--judgments`` test documents judged by their gold labels in one
``learn_many``; the same for a Rocchio profile for scale.

Usage: .venv/bin/python benchmarks/fusion_judgment_batch.py [--judgments 1000]
       [--profile earn] [--out benchmarks/results/fusion_judgment_batch.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sift.agents.service import TrainingSet, default_corpus  # noqa: E402
from sift.filters.profile import Profile  # noqa: E402
from sift.topics.codecs import read_jsonl  # noqa: E402
from sift.topics.records import Document  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--judgments", type=int, default=1000)
    ap.add_argument("--profile", default="earn")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/fusion_judgment_batch.json"))
    args = ap.parse_args()
    tr = TrainingSet.load(default_corpus())
    vec = tr.vectorizer
    docs = [d for _, d in zip(range(args.judgments),
                              read_jsonl(ROOT / "data/reuters21578/test.jsonl.gz", Document.from_obj),
                              strict=False)]
    X = vec.transform([d.text for d in docs])
    relevant = np.array([args.profile in d.topics for d in docs])
    out: dict = {"command": "benchmarks/fusion_judgment_batch.py " + " ".join(sys.argv[1:]),
                 "profile": args.profile, "judgments": len(docs),
                 "relevant": int(relevant.sum()), "load_average_at_start": os.getloadavg()[0]}
    for model in ("fusion", "rocchio"):
        p = Profile(args.profile, query=args.profile, model=model)
        p.fit(vec.transform([args.profile]), tr.X, feature_weights=vec.feature_weights(),
              n_features=vec.n_features)
        t0 = time.perf_counter()
        p.learn_many(X, relevant, np.ones(len(docs)))
        row = {"seconds": time.perf_counter() - t0}
        if model == "fusion":
            row["solves"] = p.model_.n_solves_  # type: ignore[attr-defined]
            row["time_limit_per_solve"] = p.model_.time_limit  # type: ignore[attr-defined]
        out[model] = row
        print(model, row, flush=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
