"""Profile and model variants on the validation split (first 70% of the Reuters-21578
training file as training, the rest as the stream), one line each.

    .venv/bin/python benchmarks/engine_variants.py rocchio every neg_weight=0.5 pos_fraction=0.0
    .venv/bin/python benchmarks/engine_variants.py knn every mp_vote=signed mp_k=10

Each argument after the model and update policy is one variant: comma-separated
``key=value`` pairs, where a key of ``sift.filters.profile.DEFAULT_PSEUDOLABEL`` sets a
pseudolabel parameter, ``mp_<name>`` a model hyperparameter and any other key a Profile
parameter (e.g. ``threshold_placement``). Prints macro T11SU/T11F and the groups; used to
choose (or reject) defaults without looking at the test stream.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys
import time
from pathlib import Path
from typing import Any

from sift.filters.profile import DEFAULT_PSEUDOLABEL
from sift.replay import Corpus, ReplayConfig, load_corpus, replay

ROOT = Path(__file__).resolve().parent.parent


def _value(v: str) -> Any:
    if v in ("True", "False"):
        return v == "True"
    if v == "None":
        return None
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def validation_corpus() -> Corpus:
    """The validation split: the first 70 % of the training file as training, the rest
    as the stream."""
    corpus = load_corpus(ROOT / "data/reuters21578/train.jsonl.gz", ROOT / "data/reuters21578/test.jsonl.gz")
    cut = int(len(corpus.train) * 0.7)
    return Corpus(corpus.train[:cut], corpus.train[cut:])


def variant_params(spec: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(pseudolabel, model_params, profile_params)`` of a variant: comma-separated
    ``key=value`` pairs (see the module docstring); ``base`` or nothing: the defaults."""
    pseudo, model_params, profile = dict(DEFAULT_PSEUDOLABEL), {}, {}
    for kv in spec.split(","):
        if kv in ("", "base"):
            continue
        key, _, raw = kv.partition("=")
        if key.startswith("mp_"):
            model_params[key[3:]] = _value(raw)
        elif key in pseudo:
            pseudo[key] = _value(raw)
        else:
            profile[key] = _value(raw)
    return pseudo, model_params, profile


USAGE = "usage: engine_variants.py MODEL UPDATE VARIANT [VARIANT ...]"


def main(argv: list[str]) -> None:
    if argv[:1] in (["-h"], ["--help"]):
        print(f"{USAGE}\n\n{__doc__}")
        return
    if len(argv) < 3:
        sys.exit(f"{USAGE}\n\n{__doc__}")
    model, update, *variants = argv
    val = validation_corpus()
    for spec in variants:
        pseudo, model_params, profile = variant_params(spec)
        t0 = time.process_time()
        m = replay(val, ReplayConfig(model=model, update=_value(update), pseudolabel=pseudo,
                                     model_params=model_params, profile_params=profile)).metrics
        groups = " ".join(f"{k}:{g['macro_t11su']:.3f}/{g['macro_t11f']:.3f}({g['profiles']})"
                          for k, g in m["groups"].items())
        print(f"{model} {update} {spec:40s} T11SU {m['macro_t11su']:.3f} T11F {m['macro_t11f']:.3f} "
              f"{groups} {time.process_time() - t0:.0f} CPU-s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
