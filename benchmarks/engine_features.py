"""Text representation variants of adaptive filtering on the validation split.

The validation split is the first 70 % of the Reuters-21578 training file as training
and the rest as the stream (never the test stream). Each variant is replayed with every
seed (the pseudolabels' random draw) and compared with the defaults, seed by seed:

    .venv/bin/python benchmarks/engine_features.py --model rocchio --seeds 0,1,2 \\
        base title=1 title=2 v_ngram_max=2 v_idf=idf2 v_tf=binary

A variant is comma-separated ``key=value`` pairs: ``v_<name>`` sets a ``Vectorizer``
parameter (``v_truncate=6``, ``v_ngram_max=2``, ``v_idf=idf2``, ``v_tf=binary``), ``vc=fusion``
the word + character n-gram vectors of ``FusionVectorizer`` (its parameters as ``v_``:
``vc=fusion,v_lsa_components=0,v_char_weight=0.3``; ``vc=plain`` the default class),
``title=N`` puts ``N`` more copies of each document's title in front of its text
(Reuters texts already start with the title once, so ``title=1`` counts title words
twice), and any other key is passed as in ``engine_variants.py`` (``mp_<name>`` a model
parameter, a pseudolabel or a Profile parameter); ``base`` is the defaults. Writes
``benchmarks/results/engine_features.json`` (``--out``): per variant and model, every
seed's macro T11SU / T11F, their means, the mean paired difference from ``base`` (run
in the same invocation, added when not named) and the profile groups' means. With
``--merge`` the variants already in the file and not run now are kept.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_variants import _value, validation_corpus, variant_params

from sift.replay import Corpus, ReplayConfig, replay
from sift.topics.records import Document

ROOT = Path(__file__).resolve().parent.parent


def parse(spec: str) -> tuple[dict[str, Any], int, str, str]:
    """``(vectorizer params, extra title copies, the rest for variant_params, vectorizer
    class)``."""
    vec: dict[str, Any] = {}
    title = 0
    kind = "auto"
    rest = []
    for kv in spec.split(","):
        key, _, raw = kv.partition("=")
        if key == "vc":
            if raw not in ("plain", "fusion"):
                raise SystemExit(f"vc must be plain or fusion, got {raw!r}")
            kind = raw
        elif key.startswith("v_"):
            vec[key[2:]] = _value(raw)
        elif key == "title":
            title = int(raw)
            if title < 0:
                raise SystemExit(f"title must be >= 0, got {raw!r}")
        else:
            rest.append(kv)
    return vec, title, ",".join(rest), kind


def with_titles(corpus: Corpus, copies: int) -> Corpus:
    """The corpus with ``copies`` more copies of every title before the text."""
    if copies == 0:
        return corpus

    def one(d: Document) -> Document:
        if not d.title:
            return d
        return dataclasses.replace(d, text="\n".join([d.title] * copies) + "\n" + d.text)

    return Corpus([one(d) for d in corpus.train], [one(d) for d in corpus.test])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--model", default="rocchio")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/engine_features.json"))
    ap.add_argument("--merge", action="store_true", help="keep the variants of the file not run now")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    variants = list(dict.fromkeys(["base", *args.variants]))
    val = validation_corpus()
    results: dict[str, Any] = {}
    for spec in variants:
        vec, title, rest, kind = parse(spec)
        pseudo, model_params, profile = variant_params(rest)
        corpus = with_titles(val, title)
        t0 = time.process_time()
        runs = [replay(corpus, ReplayConfig(model=args.model, seed=s, pseudolabel=pseudo, model_params=model_params,
                                            profile_params=profile, vectorizer=vec,
                                            vectorizer_class=kind)).metrics
                for s in seeds]
        su = [m["macro_t11su"] for m in runs]
        tf = [m["macro_t11f"] for m in runs]
        row: dict[str, Any] = {
            "model": args.model, "seeds": seeds, "t11su": su, "t11f": tf,
            "macro_t11su": statistics.fmean(su), "macro_t11f": statistics.fmean(tf),
            "groups": {g: {"profiles": runs[0]["groups"][g]["profiles"],
                           "macro_t11su": statistics.fmean(m["groups"][g]["macro_t11su"] for m in runs),
                           "macro_t11f": statistics.fmean(m["groups"][g]["macro_t11f"] for m in runs)}
                       for g in runs[0]["groups"]},
            "cpu_seconds": time.process_time() - t0,
        }
        base = results.get("base")
        diff = ""
        if base is not None and spec != "base":
            dsu = [a - b for a, b in zip(su, base["t11su"], strict=True)]
            dtf = [a - b for a, b in zip(tf, base["t11f"], strict=True)]
            row["minus_base_t11su"] = statistics.fmean(dsu)
            row["minus_base_t11f"] = statistics.fmean(dtf)
            row["seeds_better_t11su"] = sum(d > 0 for d in dsu)
            diff = f"  vs base {row['minus_base_t11su']:+.4f} / {row['minus_base_t11f']:+.4f} " \
                   f"(T11SU up in {row['seeds_better_t11su']} of {len(seeds)} seeds)"
        results[spec] = row
        print(f"{args.model} {spec:32s} T11SU {row['macro_t11su']:.4f} T11F {row['macro_t11f']:.4f}{diff}",
              flush=True)
    out = Path(args.out)
    doc: dict[str, Any] = {"split": "validation", "runs": {}}
    if args.merge and out.exists():
        doc = orjson.loads(out.read_bytes())
    key = f"{args.model}/seeds={args.seeds}"
    doc.setdefault("runs", {}).setdefault(key, {}).update(results)
    doc.setdefault("commands", []).append(" ".join(["benchmarks/engine_features.py", *sys.argv[1:]]))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
