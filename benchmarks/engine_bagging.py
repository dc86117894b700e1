"""Profiles bagged over pseudolabel draws: B profiles per category, one decision.

Each profile's pseudo-negatives and pseudo-positives are a random draw (the replay's
``seed``), and which draw a profile gets moves its T11SU a lot (the best of five seeds
per profile would add about 0.07 to the macro average; docs/engine.md). Here every
category gets ``B`` profiles trained the same way from ``B`` consecutive seeds. A
document is delivered when the mean over the ``B`` of ``score - threshold`` is at least
0 (``--rule margin``; a profile answering No to everything, threshold ``+inf``, counts
``-1``; ``--rule abstain``: it is left out, and a document needs one profile that does
not), or when most of them would deliver it (``--rule vote``); every judgment goes to
all ``B``. The protocol is the replay's (TREC 2002 adaptive filtering, feedback only
for delivered documents, one document at a time), with the defaults as shipped
(Rocchio; ``--model`` for another).

Each group of ``B`` seeds (``--groups G``: seeds ``0..B-1``, ``B..2B-1``, ...; ``--first
F`` starts at group ``F``) is one bagged run, compared with the mean of the same seeds
replayed one profile per category (the figure the replay reports). ``B = 1`` is the
plain replay. Writes ``benchmarks/results/engine_bagging.json`` (``--out``; ``--merge``
keeps the other runs of the file): per run, every group's macro T11SU / T11F bagged and
single, their differences, and the per-profile T11SU of both.

    .venv/bin/python benchmarks/engine_bagging.py --bags 5 --groups 4 --validation
    .venv/bin/python benchmarks/engine_bagging.py --bags 5 --groups 1 --truncate 6
    .venv/bin/python benchmarks/engine_bagging.py --model kantor --bags 5 --groups 2 --validation

The bag is a bank of :class:`sift.filters.bagging.BaggedProfile`, one per category, as
``sift replay --bags B`` runs it; this script adds the comparison with the single seeds. ``B`` profiles cost ``B``
times the scoring, the judgments and the state.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_variants import validation_corpus

from sift.filters.bagging import RULES, BaggedProfile
from sift.filters.bank import ProfileBank
from sift.filters.vectorize import Vectorizer
from sift.replay import (
    BankFilterer,
    Corpus,
    ReplayConfig,
    build_bank,
    default_specs,
    evaluate,
    load_corpus,
    run_protocol,
)

ROOT = Path(__file__).resolve().parent.parent


def run(corpus: Corpus, bags: int, rule: str, groups: range, truncate: int | None,
        model: str = "rocchio") -> dict[str, Any]:
    vec_params = {"truncate": truncate} if truncate else {}
    vec = Vectorizer(**vec_params).fit(d.text for d in corpus.train)
    X_train = vec.transform([d.text for d in corpus.train])
    X_test = vec.transform([d.text for d in corpus.test])
    specs = default_specs(corpus)
    names = [s.profile for s in specs]
    out: dict[str, Any] = {"model": model, "bags": bags, "rule": rule, "truncate": truncate, "groups": []}
    for g in groups:
        seeds = list(range(g * bags, (g + 1) * bags))
        t0 = time.process_time()
        banks, singles = [], []
        n_initial: dict[str, int] = {}
        for seed in seeds:
            cfg = ReplayConfig(model=model, seed=seed, vectorizer=vec_params)
            bank, n_initial = build_bank(corpus, specs, cfg, vec, X_train)
            banks.append(bank)
            # the plain replay of the seed, on a bank of its own (replaying changes a bank)
            one, _ = build_bank(corpus, specs, cfg, vec, X_train)
            hits = run_protocol(BankFilterer(one), X_test, corpus.test, feedback=True)
            singles.append(evaluate(hits, corpus.test, names, n_initial=n_initial))
        bag = ProfileBank()
        for name in names:
            bag.add(BaggedProfile([b[name] for b in banks], rule))  # type: ignore[misc]
        hits = run_protocol(BankFilterer(bag), X_test, corpus.test, feedback=True)
        m = evaluate(hits, corpus.test, names, n_initial=n_initial)
        single = {k: float(np.mean([s[k] for s in singles])) for k in ("macro_t11su", "macro_t11f")}
        row = {"seeds": seeds, "bagged": {k: m[k] for k in ("macro_t11su", "macro_t11f")},
               "single_mean": single,
               "difference": [m["macro_t11su"] - single["macro_t11su"],
                              m["macro_t11f"] - single["macro_t11f"]],
               "groups_bagged": {k: v["macro_t11su"] for k, v in m["groups"].items()},
               "groups_single": {k: float(np.mean([s["groups"][k]["macro_t11su"] for s in singles]))
                                 for k in m["groups"]},
               "per_profile_t11su": {n: {"bagged": m["per_profile"][n]["t11su"],
                                         "single_mean": float(np.mean([s["per_profile"][n]["t11su"]
                                                                       for s in singles])),
                                         "relevant": m["per_profile"][n]["relevant_in_test"]}
                                     for n in names},
               "per_profile_t11f": {n: {"bagged": m["per_profile"][n]["t11f"],
                                        "single_mean": float(np.mean([s["per_profile"][n]["t11f"]
                                                                      for s in singles]))}
                                    for n in names},
               "cpu_seconds": time.process_time() - t0}
        out["groups"].append(row)
        print(f"B={bags} {rule} seeds {seeds[0]}-{seeds[-1]}: bagged {m['macro_t11su']:.4f} / "
              f"{m['macro_t11f']:.4f}, single mean {single['macro_t11su']:.4f} / "
              f"{single['macro_t11f']:.4f} ({row['difference'][0]:+.4f} / {row['difference'][1]:+.4f})",
              flush=True)
    diffs = np.array([r["difference"] for r in out["groups"]])
    out["mean_difference"] = diffs.mean(axis=0).tolist()
    out["t11su_up_in_groups"] = int(np.count_nonzero(diffs[:, 0] > 0))
    out["bagged_mean"] = [float(np.mean([r["bagged"][k] for r in out["groups"]]))
                          for k in ("macro_t11su", "macro_t11f")]
    out["single_mean"] = [float(np.mean([r["single_mean"][k] for r in out["groups"]]))
                          for k in ("macro_t11su", "macro_t11f")]
    print(f"B={bags} {rule}: bagged {out['bagged_mean'][0]:.4f} / {out['bagged_mean'][1]:.4f}, single "
          f"{out['single_mean'][0]:.4f} / {out['single_mean'][1]:.4f}, difference "
          f"{out['mean_difference'][0]:+.4f} / {out['mean_difference'][1]:+.4f}, T11SU up in "
          f"{out['t11su_up_in_groups']} of {len(out['groups'])} groups", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=("rocchio", "kantor", "knn"), default="rocchio")
    ap.add_argument("--bags", type=int, default=5)
    ap.add_argument("--rule", choices=RULES, default="margin")
    ap.add_argument("--groups", type=int, default=1)
    ap.add_argument("--first", type=int, default=0, help="the first group (seeds first*B ...)")
    ap.add_argument("--truncate", type=int, default=None)
    ap.add_argument("--validation", action="store_true", help="first 70%% of train as train, rest as stream")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/engine_bagging.json"))
    ap.add_argument("--merge", action="store_true")
    args = ap.parse_args()
    if args.bags < 1 or args.groups < 1 or args.first < 0:
        raise SystemExit("--bags and --groups must be at least 1, --first at least 0")
    if args.validation:
        corpus, split = validation_corpus(), "validation"
    else:
        corpus = load_corpus(ROOT / "data/reuters21578/train.jsonl.gz", ROOT / "data/reuters21578/test.jsonl.gz")
        split = "test"
    res = run(corpus, args.bags, args.rule, range(args.first, args.first + args.groups), args.truncate,
              args.model)
    path = Path(args.out)
    doc: dict[str, Any] = orjson.loads(path.read_bytes()) if args.merge and path.exists() else {}
    model = "" if args.model == "rocchio" else f"{args.model}/"
    doc.setdefault("runs", {})[f"{split}/{model}B={args.bags}/{args.rule}/truncate={args.truncate}"
                               f"/groups={args.first}-{args.first + args.groups - 1}"] = res
    doc.setdefault("commands", []).append(" ".join(sys.argv))
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
