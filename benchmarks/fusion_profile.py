"""``model: fusion`` against the single models in the TREC adaptive filtering replay.

Runs :func:`sift.replay.replay` on Reuters-21578 (ModApte) with the same
:class:`~sift.replay.ReplayConfig` for every model (3 initial positives, update
every judgment, T11SU TROT thresholds, default pseudolabelling). The single
models use the engine's standard :class:`~sift.filters.vectorize.Vectorizer`;
``fusion`` needs a :class:`~sift.filters.representations.FusionVectorizer` (word
+ character blocks, LSA), which ``replay`` cannot be told to build yet, so this
script swaps it in for the duration of the fusion run (``fusion_vectorizer``
below; the proposed one-line change to ``sift/replay.py`` is in docs/fusion.md).
``fusion_vec`` rows run a single model on the FusionVectorizer's vectors, to
separate the effect of the representation from that of the fusion.

``--split val`` uses the first 70 % of the training file as training and the
last 30 % as the stream (for any tuning); ``--split test`` is the official split.

Usage: .venv/bin/python benchmarks/fusion_profile.py [--split test]
       [--models fusion,rocchio,kantor,knn]

Writes benchmarks/results/fusion_profile.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sift.replay as replay_mod  # noqa: E402
from sift.filters.representations import FusionVectorizer  # noqa: E402
from sift.replay import Corpus, ReplayConfig, load_corpus, replay  # noqa: E402

KEYS = ("t11su", "t11f", "R+", "N+", "R-", "relevant_in_test")


@contextmanager
def fusion_vectorizer() -> Iterator[None]:
    """Make ``sift.replay.replay`` build a FusionVectorizer (``cfg.vectorizer`` are its kwargs)."""
    old = replay_mod.Vectorizer
    replay_mod.Vectorizer = FusionVectorizer  # type: ignore[misc]
    try:
        yield
    finally:
        replay_mod.Vectorizer = old  # type: ignore[misc]


def run(corpus: Corpus, name: str, cfg: ReplayConfig, fusion_vec: bool) -> dict[str, Any]:
    t0 = time.perf_counter()
    if fusion_vec:
        with fusion_vectorizer():
            res = replay(corpus, cfg)
    else:
        res = replay(corpus, cfg)
    m = res.metrics
    row = {
        "run": name, "model": cfg.model, "model_params": cfg.model_params,
        "vectorizer": ("FusionVectorizer" if fusion_vec else "Vectorizer"),
        "vectorizer_params": cfg.vectorizer,
        "macro_t11su": m["macro_t11su"], "macro_t11f": m["macro_t11f"],
        "micro_precision": m["micro_precision"], "micro_recall": m["micro_recall"],
        "groups": m["groups"], "seconds": time.perf_counter() - t0,
        "per_profile": {p: {k: v[k] for k in KEYS} for p, v in m["per_profile"].items()},
    }
    print(f"{name:24s} T11SU {row['macro_t11su']:.4f} T11F {row['macro_t11f']:.4f} "
          f"P {row['micro_precision']:.3f} R {row['micro_recall']:.3f} {row['seconds']:.0f}s",
          flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=("val", "test"), default="test")
    ap.add_argument("--models", default="rocchio,kantor,knn,fusion")
    ap.add_argument("--fusion-params", default="{}", help="JSON model_params of the fusion model")
    ap.add_argument("--vectorizer", default="{}", help="JSON FusionVectorizer parameters")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/fusion_profile.json"))
    args = ap.parse_args()
    data = ROOT / "data/reuters21578"
    corpus = load_corpus(data / "train.jsonl.gz", data / "test.jsonl.gz")
    if args.split == "val":
        cut = int(len(corpus.train) * 0.7)
        corpus = Corpus(corpus.train[:cut], corpus.train[cut:])
    fparams = json.loads(args.fusion_params)
    vparams = json.loads(args.vectorizer)
    rows = []
    for spec in args.models.split(","):
        model, _, suffix = spec.partition(":")
        fusion_vec = model == "fusion" or suffix == "fusion_vec"
        cfg = ReplayConfig(model=model, model_params=fparams if model == "fusion" else {},
                           vectorizer=vparams if fusion_vec else {})
        rows.append(run(corpus, spec, cfg, fusion_vec))
        write(args, corpus, rows)


def write(args: argparse.Namespace, corpus: Corpus, rows: list[dict[str, Any]]) -> None:
    """Write the results so far (after every run, so a partial benchmark survives)."""
    out = {
        "split": args.split, "train_docs": len(corpus.train), "stream_docs": len(corpus.test),
        "protocol": "TREC adaptive filtering replay: 3 initial positives, update every, "
                    "T11SU TROT, default pseudolabels, max_examples 2000",
        "runs": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
