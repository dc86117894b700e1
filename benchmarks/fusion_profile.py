"""``model: fusion`` against the single models in the TREC adaptive filtering replay.

The replay protocol of :mod:`sift.replay` on Reuters-21578 (ModApte) with the
same :class:`~sift.replay.ReplayConfig` for every model (3 initial positives,
update every judgment, T11SU TROT thresholds, default pseudolabelling, at most
2000 examples): a :class:`~sift.filters.representations.FusionVectorizer` (word
+ character n-gram blocks, LSA) for ``model: fusion``, the engine's standard
``Vectorizer`` otherwise; ``NAME:fusion_vec`` runs a single model on the
FusionVectorizer's vectors, to separate the effect of the representation from
that of the fusion.

**One bank per profile.** ``run_protocol`` re-scores the rest of a batch after
every delivery that changed a profile, for every profile of the bank, so with 90
profiles the cost grows with (profiles x deliveries). Profiles do not interact
(the protocol's result is that of one document at a time), so this script runs
``build_bank`` + ``run_protocol`` per profile, on one fitted vectorizer, and
``evaluate`` on all hits together: the same decisions as ``replay`` (checked:
the ``rocchio`` figures equal the engine's ``replay``), at a cost linear in the
number of profiles.

Run names (``--models``, comma-separated):

* ``fusion``: all six components (word, char, lsa, rocchio, kantor, knn);
* ``fusion-noknn``: without the kNN component (kNN's leave-one-out neighbours
  over the word + character vectors are most of the cost);
* ``fusion-mass3``: all six, with the single models' ``"auto"`` TROT weighting of the
  pseudo-negatives (``negative_mass=3``) and re-opening of silenced profiles
  (``reopen_share=0.05``): fusion's own ``"auto"`` since the forty-first session, so the
  same as ``fusion`` now; ``fusion-design``: the values before (``None``, ``None``);
* ``rocchio``, ``kantor``, ``knn``: the single models, plain vectorizer;
* ``rocchio:fusion_vec`` etc.: a single model on the FusionVectorizer's vectors.

``--resolve-every N`` sets the fusion model's re-solve interval (positives).
``--split val`` uses the first 70 % of the training file as training and the
last 30 % as the stream; ``--split test`` is the official split.

Usage: .venv/bin/python benchmarks/fusion_profile.py [--split test]
       [--models rocchio,kantor,fusion-noknn,knn,fusion] [--out FILE]

``--summarize`` adds paired per-profile comparisons of the runs to ``--out``.

Writes benchmarks/results/fusion_profile.json (or --out) after every run, with
macro T11SU/T11F, per-profile contingencies and, for fusion runs, the weights
and solver statistics of every profile at the end of the stream.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sift.filters.bank import ProfileBank  # noqa: E402
from sift.filters.representations import FusionVectorizer  # noqa: E402
from sift.filters.vectorize import Vectorizer  # noqa: E402
from sift.replay import (  # noqa: E402
    BankFilterer,
    Corpus,
    ReplayConfig,
    build_bank,
    default_specs,
    evaluate,
    load_corpus,
    run_protocol,
)
from sift.topics.records import ProfileSpec  # noqa: E402

KEYS = ("t11su", "t11f", "R+", "N+", "R-", "relevant_in_test")
#: run name -> (the fusion model's parameters, the profile's parameters)
FUSION_RUNS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "fusion": ({}, {}),
    "fusion-noknn": ({"components": ["word", "char", "lsa", "rocchio", "kantor"]}, {}),
    # the single models' "auto" TROT weighting of pseudo-negatives and re-opening of
    # silenced profiles, which fusion's "auto" took in the forty-first session
    "fusion-mass3": ({}, {"negative_mass": 3.0, "reopen_share": 0.05}),
    # fusion's "auto" before that: the design's weights and the gate alone
    "fusion-design": ({}, {"negative_mass": None, "reopen_share": None}),
}


def fusion_stats(bank: ProfileBank) -> dict[str, Any]:
    """Weights and last solve of every fusion profile (after the stream)."""
    out: dict[str, Any] = {}
    for prof in bank:
        m = prof.model_
        if getattr(m, "name", "") != "fusion":
            continue
        out[prof.name] = {"weights": {k: round(v, 4) for k, v in m.weights_.items()},
                          "solves": int(m.n_solves_), "last_solve": m.last_solve_}
    return out


_VECTORS: dict[str, tuple[Vectorizer, sp.csr_matrix, sp.csr_matrix, float]] = {}


def vectors(corpus: Corpus, fusion: bool) -> tuple[Vectorizer, sp.csr_matrix, sp.csr_matrix, float]:
    """Fitted vectorizer, training and stream matrices, fit seconds (one per kind)."""
    key = "fusion" if fusion else "plain"
    if key not in _VECTORS:
        t0 = time.perf_counter()
        vec: Vectorizer = FusionVectorizer() if fusion else Vectorizer()
        vec.fit(d.text for d in corpus.train)
        X_train = vec.transform([d.text for d in corpus.train])
        X_test = vec.transform([d.text for d in corpus.test])
        _VECTORS[key] = (vec, X_train, X_test, time.perf_counter() - t0)
    return _VECTORS[key]


def run(corpus: Corpus, name: str, cfg: ReplayConfig, specs: list[ProfileSpec],
        fusion_vec: bool) -> dict[str, Any]:
    vec, X_train, X_test, fit_s = vectors(corpus, fusion_vec)
    t0 = time.perf_counter()
    hits = []
    n_initial: dict[str, int] = {}
    stats: dict[str, Any] = {}
    for spec in specs:
        bank, n0 = build_bank(corpus, [spec], cfg, vec, X_train)
        n_initial.update(n0)
        t_p = time.perf_counter()
        hits.extend(run_protocol(BankFilterer(bank), X_test, corpus.test, feedback=True,
                                 batch_size=cfg.batch_size))
        stats.update(fusion_stats(bank))
        print(f"  {name} {spec.profile}: {time.perf_counter() - t_p:.1f}s", file=sys.stderr,
              flush=True)
    names = [s.profile for s in specs]
    m = evaluate(hits, corpus.test, names, n_initial=n_initial)
    row: dict[str, Any] = {
        "run": name, "model": cfg.model, "model_params": cfg.model_params,
        "profile_params": cfg.profile_params,
        "vectorizer": "FusionVectorizer" if fusion_vec else "Vectorizer",
        "profiles": len(names),
        "macro_t11su": m["macro_t11su"], "macro_t11f": m["macro_t11f"],
        "micro_precision": m["micro_precision"], "micro_recall": m["micro_recall"],
        "groups": m["groups"], "seconds": time.perf_counter() - t0,
        "vectorizer_fit_seconds": fit_s,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "per_profile": {p: {k: v[k] for k in KEYS} for p, v in m["per_profile"].items()},
    }
    if stats:
        row["fusion"] = stats
        secs = [s["last_solve"].get("seconds", 0.0) for s in stats.values() if s["last_solve"]]
        comps = next((list(s["weights"]) for s in stats.values() if s["weights"]), [])
        row["fusion_summary"] = {
            "solves": int(sum(s["solves"] for s in stats.values())),
            "last_solve_seconds_median": float(np.median(secs)) if secs else None,
            "mean_weights": {c: float(np.mean([s["weights"][c] for s in stats.values()
                                               if s["weights"]])) for c in comps},
        }
    print(f"{name:24s} T11SU {row['macro_t11su']:.4f} T11F {row['macro_t11f']:.4f} "
          f"P {row['micro_precision']:.3f} R {row['micro_recall']:.3f} {row['seconds']:.0f}s",
          flush=True)
    return row


def diagnose(fus: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """Where fusion wins and loses against a single model, by profile."""
    f, r, st = fus["per_profile"], ref["per_profile"], fus["fusion"]
    names = sorted(set(f) & set(r) & set(st))
    diff = {n: f[n]["t11su"] - r[n]["t11su"] for n in names}
    worse = [n for n in names if diff[n] < -1e-12]
    better = [n for n in names if diff[n] > 1e-12]
    big = [n for n in names if f[n]["relevant_in_test"] >= 50]
    order = sorted(names, key=lambda n: diff[n])

    def row(n: str) -> dict[str, Any]:
        return {"profile": n, "fusion_t11su": round(f[n]["t11su"], 4),
                "ref_t11su": round(r[n]["t11su"], 4), "solves": st[n]["solves"],
                "fusion_R+/N+": [f[n]["R+"], f[n]["N+"]], "ref_R+/N+": [r[n]["R+"], r[n]["N+"]],
                "relevant_in_test": f[n]["relevant_in_test"], "weights": st[n]["weights"]}

    solves = [st[n]["solves"] for n in names]
    return {
        "profiles": len(names), "better": len(better), "worse": len(worse),
        "at_most_one_solve": sum(1 for s in solves if s <= 1),
        "worse_with_at_most_one_solve": sum(1 for n in worse if st[n]["solves"] <= 1),
        "better_with_at_most_one_solve": sum(1 for n in better if st[n]["solves"] <= 1),
        "median_solves": float(np.median(solves)),
        "total_R+": [sum(f[n]["R+"] for n in names), sum(r[n]["R+"] for n in names)],
        "total_N+": [sum(f[n]["N+"] for n in names), sum(r[n]["N+"] for n in names)],
        "at_least_50_relevant": [row(n) for n in big],
        "at_least_50_relevant_mean_difference": float(np.mean([diff[n] for n in big])),
        "largest_losses": [row(n) for n in order[:5]],
        "largest_gains": [row(n) for n in order[-5:]],
        "dominant_component": {c: sum(1 for n in names if st[n]["weights"]
                                      and max(st[n]["weights"], key=st[n]["weights"].get) == c)
                               for c in next(iter(st.values()))["weights"]},
    }


def summarize(path: Path) -> dict[str, Any]:
    """Paired per-profile comparison of every run with every other (T11SU), added to
    the JSON file: wins / ties / losses, mean difference and a Wilcoxon p-value."""
    from scipy.stats import wilcoxon

    data = json.loads(path.read_text())
    runs = {r["run"]: r for r in data["runs"]}
    out: dict[str, Any] = {}
    for a, ra in runs.items():
        for b, rb in runs.items():
            if a >= b:
                continue
            names = sorted(set(ra["per_profile"]) & set(rb["per_profile"]))
            x = np.array([ra["per_profile"][n]["t11su"] for n in names])
            y = np.array([rb["per_profile"][n]["t11su"] for n in names])
            diff = x - y
            p = float(wilcoxon(x, y).pvalue) if np.any(diff != 0) else 1.0
            out[f"{a} vs {b}"] = {
                "profiles": len(names), "wins": int((diff > 1e-12).sum()),
                "ties": int((np.abs(diff) <= 1e-12).sum()), "losses": int((diff < -1e-12).sum()),
                "mean_t11su_difference": float(diff.mean()), "wilcoxon_two_sided_p": p,
            }
    data["paired_t11su"] = out
    if "fusion" in runs and "rocchio" in runs and "fusion" in runs["fusion"]:
        data["fusion_vs_rocchio_diagnostics"] = diagnose(runs["fusion"], runs["rocchio"])
        print(json.dumps(data["fusion_vs_rocchio_diagnostics"], indent=1))
    path.write_text(json.dumps(data, indent=1) + "\n")
    for k, v in out.items():
        print(f"{k:40s} W/T/L {v['wins']}/{v['ties']}/{v['losses']}  "
              f"mean diff {v['mean_t11su_difference']:+.4f}  p {v['wilcoxon_two_sided_p']:.3g}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=("val", "test"), default="test")
    ap.add_argument("--models", default="rocchio,kantor,fusion-noknn,knn,fusion")
    ap.add_argument("--resolve-every", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=1.0, help="seconds per fusion solve")
    ap.add_argument("--profiles", default="", help="comma-separated subset (default: all)")
    ap.add_argument("--sample", type=int, default=0,
                    help="run a random subset of this many profiles (default: all)")
    ap.add_argument("--sample-seed", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0, help="the profiles' pseudolabel seed")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/fusion_profile.json"))
    ap.add_argument("--summarize", action="store_true",
                    help="only add the paired comparisons to --out (no runs)")
    ap.add_argument("--merge", default="",
                    help="comma-separated result files whose runs are merged into --out "
                         "(then summarized; no runs)")
    args = ap.parse_args()
    if args.merge:
        merged: dict[str, Any] = {}
        for f in args.merge.split(","):
            part = json.loads(Path(f).read_text())
            runs = merged.get("runs", []) + part["runs"]
            merged = {**merged, **{k: v for k, v in part.items() if k != "runs"}}
            merged["runs"] = runs
            merged.setdefault("merged_from", []).append(part.get("command", f))
        merged.pop("paired_t11su", None)
        Path(args.out).write_text(json.dumps(merged, indent=1) + "\n")
    if args.summarize or args.merge:
        summarize(Path(args.out))
        return
    data = ROOT / "data/reuters21578"
    corpus = load_corpus(data / "train.jsonl.gz", data / "test.jsonl.gz")
    if args.split == "val":
        cut = int(len(corpus.train) * 0.7)
        corpus = Corpus(corpus.train[:cut], corpus.train[cut:])
    specs = default_specs(corpus)
    if args.profiles:
        keep = set(args.profiles.split(","))
        specs = [s for s in specs if s.profile in keep]
    if args.sample:
        pick = np.random.default_rng(args.sample_seed).choice(len(specs), args.sample,
                                                              replace=False)
        specs = [specs[i] for i in sorted(pick)]
    args.profile_names = [s.profile for s in specs]
    rows = []
    for spec in args.models.split(","):
        base, _, suffix = spec.partition(":")
        if base in FUSION_RUNS:
            model_params, profile_params = FUSION_RUNS[base]
            params = {**model_params, "resolve_every": args.resolve_every,
                      "time_limit": args.time_limit}
            cfg = ReplayConfig(model="fusion", model_params=params, profile_params=profile_params,
                               seed=args.seed)
            fusion_vec = True
        else:
            cfg = ReplayConfig(model=base, seed=args.seed)
            fusion_vec = suffix == "fusion_vec"
        rows.append(run(corpus, spec, cfg, specs, fusion_vec))
        write(args, corpus, rows)


def write(args: argparse.Namespace, corpus: Corpus, rows: list[dict[str, Any]]) -> None:
    """Write the results so far (after every run, so a partial benchmark survives)."""
    out = {
        "command": "benchmarks/fusion_profile.py " + " ".join(sys.argv[1:]),
        "split": args.split, "train_docs": len(corpus.train), "stream_docs": len(corpus.test),
        "protocol": "TREC adaptive filtering replay: 3 initial positives, update every, "
                    "T11SU TROT, default pseudolabels, max_examples 2000",
        "fusion_resolve_every": args.resolve_every, "fusion_time_limit": args.time_limit,
        "profiles": getattr(args, "profile_names", []),
        "cpus": os.cpu_count(),
        "runs": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
