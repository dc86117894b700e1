"""Reuters-21578 adaptive filtering: every model, adaptive vs batch, a peer, full training.

Writes benchmarks/results/engine_replay.json (macro T11SU/T11F, micro P/R, groups,
per-profile rows for each run). The protocol is sift.replay's (TREC 2002
adaptive filtering: feedback only for delivered documents), 90 categories, 3
initial positives, defaults as shipped. The peer (online logistic regression,
see _peer.py) runs through the same loop with the same features, starting
examples and feedback.

    .venv/bin/python benchmarks/engine_replay.py                # test split (report)
    .venv/bin/python benchmarks/engine_replay.py --validation   # 70/30 split of train (tuning)
    .venv/bin/python benchmarks/engine_replay.py --models kantor --no-full --merge  # re-run some
    .venv/bin/python benchmarks/engine_replay.py --seeds 0,1,2,3,4   # several pseudolabel draws
    .venv/bin/python benchmarks/engine_replay.py --measure t11f --no-full --no-peer \\
        --seeds 0,1,2,3,4 --out benchmarks/results/engine_replay_test_t11f.json  # TROT on T11F

``--seeds``: each adaptive run (and the peer, which starts from the same examples) is
replayed with every seed (the seed of the pseudolabels' random draw: which training
documents become pseudo-negatives and pseudo-positives). A run's ``macro_t11su`` and
``macro_t11f`` are then the means over the seeds, ``per_seed`` lists each seed's, and
``macro_t11su_sd`` / ``macro_t11f_sd`` their standard deviations; the per-profile rows,
groups and micro averages are the first seed's, each profile row with its T11SU / T11F
under every seed (``t11su_seeds``, ``t11f_seeds``) beside them. Full training has no
random draw and runs once.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peer import OnlineLogisticPeer

from sift.replay import Corpus, ReplayConfig, load_corpus, replay

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--validation", action="store_true", help="first 70%% of train as train, rest as stream")
    ap.add_argument("--models", default="rocchio,kantor,knn")
    ap.add_argument("--no-full", action="store_true", help="skip the full-training runs")
    ap.add_argument("--out", default=None)
    ap.add_argument("--model-params", default="{}",
                    help='JSON hyperparameters for the adaptive runs, e.g. \'{"top_k": 300}\'; '
                         "the runs are then named with them")
    ap.add_argument("--truncate", type=int, default=None, metavar="N",
                    help="vectorizer option for the adaptive and batch runs and the peer (the "
                         "same features): tokens cut to N characters; the runs are named with it")
    ap.add_argument("--chars", type=float, default=None, metavar="C",
                    help="vectorizer option for the adaptive and batch runs and the peer: a block of "
                         "character n-grams with share C of the dot product; the runs are named with it")
    ap.add_argument("--measure", default="t11su", choices=["t11su", "t11f", "f1"],
                    help="the measure TROT optimises in the adaptive and batch runs (TREC 2002 "
                         "submitted a run per measure); other than t11su the runs are named with it")
    ap.add_argument("--no-peer", action="store_true", help="skip the peer (it has no threshold)")
    ap.add_argument("--seeds", default="0",
                    help="comma-separated pseudolabel seeds; several: means over them (see above)")
    ap.add_argument("--merge", action="store_true",
                    help="keep the other runs of the existing JSON, replace the ones run now")
    args = ap.parse_args()
    corpus = load_corpus(ROOT / "data/reuters21578/train.jsonl.gz", ROOT / "data/reuters21578/test.jsonl.gz")
    split = "test"
    if args.validation:
        cut = int(len(corpus.train) * 0.7)
        corpus = Corpus(corpus.train[:cut], corpus.train[cut:])
        split = "validation"
    runs: dict[str, dict] = {}
    params = orjson.loads(args.model_params)

    seeds = [int(x) for x in args.seeds.split(",")]

    def record(name: str, per_seed: list[dict], seconds: float) -> None:
        metrics = per_seed[0]
        runs[name] = {k: v for k, v in metrics.items()}
        runs[name]["seconds"] = seconds
        sd = ""
        if len(per_seed) > 1:
            su = [m["macro_t11su"] for m in per_seed]
            f = [m["macro_t11f"] for m in per_seed]
            runs[name].update(seeds=seeds, per_seed=list(zip(su, f, strict=True)),
                              macro_t11su=statistics.fmean(su), macro_t11f=statistics.fmean(f),
                              macro_t11su_sd=statistics.stdev(su), macro_t11f_sd=statistics.stdev(f),
                              micro_seed=seeds[0])
            for prof, row in runs[name]["per_profile"].items():
                row["t11su_seeds"] = [m["per_profile"][prof]["t11su"] for m in per_seed]
                row["t11f_seeds"] = [m["per_profile"][prof]["t11f"] for m in per_seed]
            sd = (f" (sd {runs[name]['macro_t11su_sd']:.3f} / {runs[name]['macro_t11f_sd']:.3f}"
                  f" over {len(seeds)} seeds)")
        g = metrics["groups"]["others"]
        extra = ""
        if "micro_f1" in metrics:
            extra = f" micro_f1 {metrics['micro_f1']:.3f} macro_f1 {metrics['macro_f1']:.3f}"
        print(f"{name:28s} T11SU {runs[name]['macro_t11su']:.3f} T11F {runs[name]['macro_t11f']:.3f}{sd} "
              f"P {metrics['micro_precision']:.3f} R {metrics['micro_recall']:.3f}{extra} "
              f"| others({g['profiles']}) {g['macro_t11su']:.3f}/{g['macro_t11f']:.3f} | {seconds:.0f} s",
              flush=True)

    vectorizer: dict = {} if args.truncate is None else {"truncate": args.truncate}
    if args.chars is not None:
        vectorizer["chars"] = args.chars
    vtag = "".join(f",{k}={v}" for k, v in vectorizer.items())
    for model in args.models.split(","):
        for update in ("every", "never"):
            t0 = time.perf_counter()
            rs = [replay(corpus, ReplayConfig(model=model, update=update, model_params=params, seed=seed,
                                              vectorizer=vectorizer, measure=args.measure))
                  for seed in seeds]
            tag = "".join(f",{k}={v}" for k, v in params.items()) + vtag
            if args.measure != "t11su":
                tag += f",measure={args.measure}"
            record(f"{model}/update={update}{tag}", [r.metrics for r in rs], time.perf_counter() - t0)
    if not args.no_peer:
        t0 = time.perf_counter()
        rs = [replay(corpus, ReplayConfig(model="rocchio", seed=seed, vectorizer=vectorizer),
                     filterer_factory=lambda bank, vec, X: OnlineLogisticPeer(bank, vec, X))
              for seed in seeds]
        record(f"peer:online-logreg{vtag}", [r.metrics for r in rs], time.perf_counter() - t0)
    if not args.no_full:
        for model in ("knn", "rocchio"):
            t0 = time.perf_counter()
            r = replay(corpus, ReplayConfig(model=model, full_training=True, update="never"))
            record(f"{model}/full-training", [r.metrics], time.perf_counter() - t0)
    out = Path(args.out) if args.out else ROOT / "benchmarks/results" / f"engine_replay_{split}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    opts = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
    if args.merge and out.exists():
        runs = {**orjson.loads(out.read_bytes())["runs"], **runs}
    out.write_bytes(orjson.dumps({"split": split, "runs": runs}, option=opts))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
