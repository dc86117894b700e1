"""Where the adaptive thresholds lose, on the validation split (first 70 % of the
Reuters-21578 training file as training, the last 30 % as the stream); never the
test stream. Writes ``benchmarks/results/engine_thresholds.json`` (``--out FILE``, anywhere
on the command line, for another file), keeping the other modes' results of the file.

    .venv/bin/python benchmarks/engine_thresholds.py seeds 0,1,2 base min_neg_rank=50
    .venv/bin/python benchmarks/engine_thresholds.py fixed        # seed 0
    .venv/bin/python benchmarks/engine_thresholds.py oracle-start # seed 0
    .venv/bin/python benchmarks/engine_thresholds.py qdf-start    # seed 0
    .venv/bin/python benchmarks/engine_thresholds.py trace        # seed 0
    .venv/bin/python benchmarks/engine_thresholds.py stops 0,1,2,3,4,5,6,7,8,9 [--truncate 6]

``seeds``: Rocchio replays of each variant (``key=value`` pairs as in
``benchmarks/engine_variants.py``; ``base`` for the defaults), macro T11SU / T11F averaged
over the seeds; ``seeds 0,1,2 --model knn base mp_query_weight=0`` replays another model
(its rows keyed ``knn:<variant>``). ``fixed``: each profile's initial model with a fixed threshold: TROT's
first one, a score-distribution threshold (normal relevant and exponential non-relevant
scores fitted by EM to the pseudo-negatives' leave-one-out scores with the positives',
delivering while the posterior is at least 1/3, after Arampatzis et al.) and the best one
for the stream (hindsight). ``oracle-start``: every profile started at that best fixed
threshold, then adaptive (update every) and kept fixed (update never): a diagnostic
that uses the answers. ``qdf-start``: the same with the query's document frequency in
the training set taken as the category's size (the score at that rank of the training
ranking; ``fixed`` reports it kept fixed as ``query_df``), an estimate that needs no answers.
``trace``: the adaptive Rocchio replay (update every) of every profile with at most 30
relevant stream documents, delivery by delivery (stream position, score, threshold in
force, relevant), and how many non-relevant deliveries each made before its threshold
first rose by more than 0.005, or before its first relevant one.
``stops``: would a profile do better by giving up? Each seed's default replay (Rocchio,
update every; ``--truncate N`` for the vectorizer option) is replayed once, and rules
that stop a profile for good are applied to its deliveries afterwards: up to the stop
the profile is exactly what it was, and after it delivers nothing, so cutting each
profile's delivery sequence gives the rule's result without replaying it. Rules: stop
after ``c`` non-relevant deliveries with no relevant one yet (``zero<c>``), and stop once
the feedback's utility ``2r - n`` falls to ``-c`` (``util<c>``). Writes macro T11SU / T11F
per rule, their mean paired difference from no rule and the seeds where T11SU rose
(under ``stops``, keyed by the vectorizer option), and the bound of any stop rule:
each profile stopped after the prefix that scores best (hindsight, ``hindsight_best_stop_t11su``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from engine_variants import validation_corpus, variant_params

from sift.filters.measures import t11f, t11su
from sift.filters.vectorize import Vectorizer
from sift.replay import (
    BankFilterer,
    Corpus,
    ReplayConfig,
    build_bank,
    default_specs,
    evaluate,
    replay,
    run_protocol,
)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks/results/engine_thresholds.json"


def config(spec: str, seed: int, update: str = "every", model: str = "rocchio") -> ReplayConfig:
    pseudo, model_params, profile = variant_params(spec)
    return ReplayConfig(model=model, update=update, pseudolabel=pseudo, seed=seed,
                        model_params=model_params, profile_params=profile)


def seeds(val: Corpus, seed_list: list[int], variants: list[str], model: str = "rocchio") -> dict[str, Any]:
    out = {}
    for variant in variants:
        runs = [replay(val, config(variant, s, model=model)).metrics for s in seed_list]
        spec = variant if model == "rocchio" else f"{model}:{variant}"
        out[spec] = {"seeds": seed_list,
                     "macro_t11su": float(np.mean([m["macro_t11su"] for m in runs])),
                     "macro_t11f": float(np.mean([m["macro_t11f"] for m in runs])),
                     "per_seed": [(m["macro_t11su"], m["macro_t11f"]) for m in runs]}
        print(f"{spec:40s} T11SU {out[spec]['macro_t11su']:.4f} T11F {out[spec]['macro_t11f']:.4f}",
              flush=True)
    return out


def mixture_threshold(u: np.ndarray, pos: np.ndarray, top: float = 0.2, iters: int = 50) -> float:
    """Normal (relevant) + exponential (non-relevant) fitted by EM to the top ``top`` of
    the unlabelled scores ``u``, the positives' scores ``pos`` held relevant; the lowest
    score down to which delivering keeps the expected utility 2a - b highest."""
    u = np.sort(u)[::-1][: max(int(top * u.size), 20)]
    x0 = u.min()
    mu, sd = pos.mean(), max(pos.std(), 0.05)
    pi, lam = 0.1, 1.0 / max((u - x0).mean(), 1e-6)

    def densities(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        fr = np.exp(-0.5 * ((x - mu) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
        return fr, lam * np.exp(-lam * (x - x0))

    for _ in range(iters):
        fr, fn = densities(u)
        r = pi * fr / (pi * fr + (1 - pi) * fn + 1e-300)
        pi = max(r.mean(), 1e-4)
        wr, xr = np.concatenate([r, np.ones(pos.size)]), np.concatenate([u, pos])
        mu = (wr * xr).sum() / wr.sum()
        sd = max(math.sqrt((wr * (xr - mu) ** 2).sum() / wr.sum()), 0.02)
        lam = (1 - r).sum() / max(((1 - r) * (u - x0)).sum(), 1e-9)
    fr, fn = densities(u)
    util = np.cumsum(3 * (pi * fr / (pi * fr + (1 - pi) * fn + 1e-300)) - 1)
    k = int(np.argmax(util))
    return float(u[k]) if util[k] > 0 else math.inf


def best_fixed(scores: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """The stream's best fixed threshold for T11SU (hindsight) and its value."""
    o = np.argsort(-scores)
    a, b, r = np.cumsum(y[o]), np.cumsum(~y[o]), int(y.sum())
    su = np.array([t11su(a[k], b[k], r - a[k], 0) for k in range(o.size)])
    k = int(np.argmax(su))
    return (float(scores[o[k]]), float(su[k])) if su[k] > 1 / 3 else (math.inf, 1 / 3)


def query_df_threshold(p: Any, vec: Vectorizer, X_train: Any) -> float:
    """The query's document frequency as the category's size: the score of the training
    document at that rank (every query term present; TROT's threshold when no training
    document holds them all)."""
    q = vec.transform([p.query])
    if not q.nnz:
        return float(p.threshold_)
    n = int((q.nnz == (X_train[:, q.indices] != 0).sum(axis=1).A1).sum())
    if n == 0:
        return float(p.threshold_)
    scores = np.sort(p.score(X_train))[::-1]
    return float(scores[min(n, scores.size) - 1])


def fixed_and_oracle(val: Corpus, what: str) -> dict[str, Any]:
    vec = Vectorizer().fit(d.text for d in val.train)
    X_train = vec.transform([d.text for d in val.train])
    X_test = vec.transform([d.text for d in val.test])
    specs = default_specs(val)
    out: dict[str, Any] = {}
    for update in (("every",) if what == "fixed" else ("every", "never")):
        bank, n_init = build_bank(val, specs, config("base", 0, update), vec, X_train)
        sums: dict[str, list[float]] = {"trot": [0, 0], "mixture": [0, 0], "best": [0, 0],
                                        "query_df": [0, 0]}
        rows: dict[str, Any] = {}
        n = 0
        for s in specs:
            p = bank[s.profile]
            y = np.array([s.profile in d.topics for d in val.test])
            if what == "qdf-start":
                p.threshold_ = query_df_threshold(p, vec, X_train)
                p.version_ += 1
                continue
            scores = p.score(X_test)
            best_thr, _ = best_fixed(scores, y)
            if what == "oracle-start":
                p.threshold_ = best_thr
                p.version_ += 1
                continue
            if not y.any():
                continue
            ex, loo = p.examples_, p.model_.loo_scores()
            thr = {"trot": p.threshold_, "best": best_thr,
                   "query_df": query_df_threshold(p, vec, X_train),
                   "mixture": mixture_threshold(loo[(ex.labels < 0) & ~ex.real],
                                                loo[(ex.labels > 0) & ex.real])}
            r = int(y.sum())
            top = np.argsort(-scores)[:5]
            row: dict[str, Any] = {
                "relevant_in_stream": r, "precision_of_top_5": float(y[top].mean()),
                "positive_loo": sorted(loo[(ex.labels > 0) & ex.real].tolist(), reverse=True),
                "top_pseudo_negative_loo": sorted(loo[(ex.labels < 0) & ~ex.real].tolist(),
                                                  reverse=True)[:8]}
            for k, t in thr.items():
                d = scores >= t
                a, b = int((d & y).sum()), int((d & ~y).sum())
                sums[k][0] += t11su(a, b, r - a, 0)
                sums[k][1] += t11f(a, b, r - a, 0)
                row[k] = {"threshold": None if math.isinf(t) else t, "delivered": a + b,
                          "t11su": float(t11su(a, b, r - a, 0))}
            rows[s.profile] = row
            n += 1
        if what == "fixed":
            out = {k: {"macro_t11su": v[0] / n, "macro_t11f": v[1] / n} for k, v in sums.items()}
            out["profiles"] = n
            out["per_profile"] = rows
        else:
            hits = run_protocol(BankFilterer(bank), X_test, val.test, feedback=True, batch_size=256)
            m = evaluate(hits, val.test, [s.profile for s in specs], n_initial=n_init)
            out[update] = {"macro_t11su": m["macro_t11su"], "macro_t11f": m["macro_t11f"],
                           "per_profile": m["per_profile"]}
    print({k: v if not isinstance(v, dict) else {kk: vv for kk, vv in v.items() if kk != "per_profile"}
           for k, v in out.items() if k != "per_profile"}, flush=True)
    return out


def trace(val: Corpus, small: int = 30) -> dict[str, Any]:
    """Seed 0, defaults: the deliveries of the profiles with at most ``small`` relevant
    stream documents, and their non-relevant deliveries before a threshold move."""
    res = replay(val, config("base", 0))
    pos = {d.id: i for i, d in enumerate(val.test)}
    topics = {d.id: set(d.topics) for d in val.test}
    seqs: dict[str, list[tuple[int, float, float, bool]]] = {}
    for h in res.decisions:
        seqs.setdefault(h["profile"], []).append(
            (pos[h["doc_id"]], h["score"], h["threshold"], h["profile"] in topics[h["doc_id"]]))
    rows: dict[str, Any] = {}
    for name, m in res.metrics["per_profile"].items():
        if m["relevant_in_test"] > small:
            continue
        seq = seqs.get(name, [])
        junk_before_rise = junk_before_relevant = 0
        rose = found = False
        for k, (_, _, thr, rel) in enumerate(seq):
            if k and thr > seq[k - 1][2] + 0.005:
                rose = True
            if not rel:
                junk_before_rise += not rose
                junk_before_relevant += not found
            found |= rel
        rows[name] = {"relevant_in_stream": m["relevant_in_test"], "t11su": m["t11su"],
                      "junk_before_threshold_rise": junk_before_rise,
                      "junk_before_first_relevant": junk_before_relevant,
                      "deliveries": [{"at": a, "score": sc, "threshold": t, "relevant": r}
                                     for a, sc, t, r in seq]}
    tiny = [r for r in rows.values() if r["relevant_in_stream"] <= 5]
    out = {"profiles": len(rows), "profiles_at_most_5_relevant": len(tiny),
           "at_most_5_relevant_below_one_third": sum(r["t11su"] < 1 / 3 for r in tiny),
           "at_most_5_relevant_mean_junk_before_threshold_rise":
               float(np.mean([r["junk_before_threshold_rise"] for r in tiny])) if tiny else 0.0,
           "per_profile": rows}
    print({k: v for k, v in out.items() if k != "per_profile"}, flush=True)
    for name, r in sorted(rows.items(), key=lambda kv: kv[1]["relevant_in_stream"]):
        if r["relevant_in_stream"] <= 5 and r["t11su"] < 1 / 3:
            print(f"  {name:16s} relevant {r['relevant_in_stream']}  T11SU {r['t11su']:.2f}  " + " ".join(
                f"{d['score']:.3f}/{d['threshold']:.3f}{'+' if d['relevant'] else '-'}"
                for d in r["deliveries"][:8]), flush=True)
    return out


def stop_rules() -> dict[str, Any]:
    """The ``stops`` rules: each maps a delivery sequence (relevant or not, in order) to
    the prefix the profile would have delivered under it."""

    def after_junk(c: int) -> Any:
        def rule(seq: list[bool]) -> list[bool]:
            junk = found = 0
            for k, rel in enumerate(seq):
                found += rel
                junk += not rel
                if not found and junk >= c:
                    return seq[: k + 1]
            return seq
        return rule

    def below_utility(c: int) -> Any:
        def rule(seq: list[bool]) -> list[bool]:
            u = 0
            for k, rel in enumerate(seq):
                u += 2 if rel else -1
                if u <= -c:
                    return seq[: k + 1]
            return seq
        return rule

    rules: dict[str, Any] = {"none": lambda seq: seq}
    rules.update({f"zero{c}": after_junk(c) for c in (1, 2, 3, 4, 5, 6, 8)})
    rules.update({f"util{c}": below_utility(c) for c in (2, 3, 4, 5, 6, 8, 10)})
    return rules


def stops(val: Corpus, seed_list: list[int], truncate: int | None) -> dict[str, Any]:
    names = [s.profile for s in default_specs(val)]
    row = {d.id: i for i, d in enumerate(val.test)}
    relevant = {n: {i for i, d in enumerate(val.test) if n in d.topics} for n in names}
    n_docs = len(val.test)
    seqs = []
    for seed in seed_list:
        cfg = config("base", seed)
        if truncate:
            cfg.vectorizer = {"truncate": truncate}
        res = replay(val, cfg)
        seq: dict[str, list[bool]] = {n: [] for n in names}
        for h in res.decisions:  # in stream order
            seq[h["profile"]].append(row[h["doc_id"]] in relevant[h["profile"]])
        seqs.append(seq)
        print(f"seed {seed}: macro T11SU {res.metrics['macro_t11su']:.4f}", flush=True)

    def measures(cut: list[bool], r: int) -> tuple[float, float]:
        a = sum(cut)
        b, c = len(cut) - a, r - a
        return float(t11su(a, b, c, n_docs - a - b - c)), float(t11f(a, b, c, n_docs - a - b - c))

    out: dict[str, Any] = {"seeds": seed_list, "truncate": truncate, "rules": {}}
    base_su = base_f = np.zeros(0)
    for name, rule in stop_rules().items():
        su, f = [], []
        for seq in seqs:
            vals = [measures(rule(seq[n]), len(relevant[n])) for n in names]
            su.append(np.mean([v[0] for v in vals]))
            f.append(np.mean([v[1] for v in vals]))
        su_a, f_a = np.array(su), np.array(f)
        if name == "none":
            base_su, base_f = su_a, f_a
        out["rules"][name] = {
            "macro_t11su": float(su_a.mean()), "macro_t11f": float(f_a.mean()),
            "vs_none": [float(np.mean(su_a - base_su)), float(np.mean(f_a - base_f))],
            "t11su_up_in_seeds": int(np.count_nonzero(su_a > base_su + 1e-12))}
        print(f"{name:8s} T11SU {su_a.mean():.4f} T11F {f_a.mean():.4f}  vs none "
              f"{np.mean(su_a - base_su):+.4f} / {np.mean(f_a - base_f):+.4f} "
              f"(T11SU up in {out['rules'][name]['t11su_up_in_seeds']} of {len(seed_list)} seeds)",
              flush=True)
    # the bound of any such rule: each profile stopped after its best prefix (hindsight)
    best = [np.mean([max(measures(seq[n][:k], len(relevant[n]))[0] for k in range(len(seq[n]) + 1))
                     for n in names]) for seq in seqs]
    out["hindsight_best_stop_t11su"] = float(np.mean(best))
    print(f"hindsight (each profile stopped after its best prefix): T11SU {np.mean(best):.4f}", flush=True)
    return out


USAGE = ("usage: engine_thresholds.py {seeds,fixed,oracle-start,qdf-start,trace,stops} "
         "[ARGS ...] [--out FILE]")


def out_option(argv: list[str]) -> tuple[list[str], Path]:
    """``argv`` without ``--out FILE`` (or ``--out=FILE``), and that file (default ``OUT``)."""
    rest, out = [], OUT
    i = 0
    while i < len(argv):
        if argv[i] == "--out" and i + 1 < len(argv):
            out, i = Path(argv[i + 1]), i + 2
            continue
        if argv[i].startswith("--out="):
            out = Path(argv[i].partition("=")[2])
        else:
            rest.append(argv[i])
        i += 1
    return rest, out


def main(argv: list[str]) -> None:
    if argv[:1] in (["-h"], ["--help"]):
        print(f"{USAGE}\n\n{__doc__}")
        return
    argv, out = out_option(argv)
    if not argv or argv[0] not in ("seeds", "fixed", "oracle-start", "qdf-start", "trace", "stops"):
        sys.exit(f"{USAGE}\n\n{__doc__}")
    val = validation_corpus()
    result = orjson.loads(out.read_bytes()) if out.exists() else {}
    if argv[0] == "seeds":
        model = "rocchio"
        if len(argv) > 3 and argv[2] == "--model":
            model, argv = argv[3], argv[:2] + argv[4:]
        if len(argv) < 3:
            sys.exit(__doc__)
        result.setdefault("seeds", {}).update(
            seeds(val, [int(s) for s in argv[1].split(",")], argv[2:], model))
    elif argv[0] == "trace":
        result["trace"] = trace(val)
    elif argv[0] == "stops":
        if len(argv) < 2:
            sys.exit(__doc__)
        truncate = int(argv[3]) if len(argv) > 3 and argv[2] == "--truncate" else None
        result.setdefault("stops", {})[f"truncate={truncate}"] = stops(
            val, [int(s) for s in argv[1].split(",")], truncate)
    else:
        result[argv[0]] = fixed_and_oracle(val, argv[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
