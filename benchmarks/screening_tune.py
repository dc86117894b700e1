"""Tuning runs for review mode, on seeds kept apart from the reported ones.

Each configuration (a dict of :class:`~sift.filters.screening.Review` parameters) is
simulated on every dataset and seed until every relevant record is found and every
stopping variant has fired. The parameters that do not change the screening process
(the rule, the target, the bound's confidence, ``min_batches``) are evaluated *after*
the run from the same batches, so one run scores a whole grid of stopping variants:
``hh``, ``ht`` and ``bound`` at each confidence, each target, each ``min_batches``.

Also scores WSS@95 of the screening order, and with ``"prior": true`` in a
configuration starts like ASReview (one random relevant and one random irrelevant
record judged first, counted as screened) to separate the start from the model.

Usage::

    .venv/bin/python benchmarks/screening_tune.py \\
        '{"default": {}, "greedy": {"draws": 0, "estimator": "ht", "warmup_precision": 0}}' \\
        --seeds 100,101,102 --jobs 2 --out benchmarks/results/screening_tune.json

``--compact FILES --out FILE`` merges tuning files without their per-run rows;
``--table FILE`` prints WSS@95 per configuration against ASReview's per-dataset figures.

Seeds 0-9 are the reported ones (``screening_sift.py``); tune on others (100+).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sift.commands._common import write_json  # noqa: E402
from sift.commands.screen import default_topic, load_records  # noqa: E402
from sift.filters.screening.cal import Review  # noqa: E402
from sift.filters.screening.metrics import shuffle_permutation, wss  # noqa: E402
from sift.filters.screening.stopping import bound_rule, target_rule  # noqa: E402

TARGETS = (0.8, 0.9, 0.95)
CONFIDENCES = (0.5, 0.8, 0.9, 0.95)
MIN_BATCHES = (5, 7, 10)
WINDOWS = (5, 10)


def variants() -> list[str]:
    out = []
    for mb in MIN_BATCHES:
        for t in TARGETS:
            out.append(f"ht@{t}/mb{mb}")
            for w in [f"{x}{m}" for x in WINDOWS for m in ("", "m")]:
                out.append(f"hh@{t}/w{w}/mb{mb}")
                out += [f"bound{c}@{t}/w{w}/mb{mb}" for c in CONFIDENCES]
    return out


class _SVM:
    """ASReview's learner (linear SVM, squared hinge), in place of the logistic regression."""

    def __init__(self, C: float = 0.11, **_: Any) -> None:
        from sklearn.svm import LinearSVC
        self.model = LinearSVC(C=C)

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> _SVM:
        self.model.fit(X, y, sample_weight=sample_weight)
        return self

    def decision_function(self, X: Any) -> Any:
        return self.model.decision_function(X)


class _NB:
    """Multinomial naive Bayes (ASReview's elas_u3 learner), scored by its log odds."""

    def __init__(self, alpha: float = 3.822, **_: Any) -> None:
        from sklearn.naive_bayes import MultinomialNB
        self.model = MultinomialNB(alpha=alpha)

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> _NB:
        self.model.fit(X, y, sample_weight=sample_weight)
        return self

    def decision_function(self, X: Any) -> Any:
        lp = self.model.predict_log_proba(X)
        return lp[:, 1] - lp[:, 0]


def _use_learner(name: str, c: float | None) -> None:
    """Swap the review's learner for a tuning run (this process only)."""
    from sklearn.linear_model import LogisticRegression

    import sift.filters.screening.cal as cal

    if name == "svm":
        cal.LogisticRegression = lambda **kw: _SVM(C=c if c is not None else 0.11)  # type: ignore
    elif name == "nb":
        cal.LogisticRegression = lambda **kw: _NB()  # type: ignore
    else:
        cal.LogisticRegression = LogisticRegression  # type: ignore


def one_run(job: tuple[str, dict[str, Any], str, int]) -> dict[str, Any]:
    ds, params, path, seed = job
    params = dict(params)
    # "nb" (and "svm" with "learner_C", as in the earlier runs) swap the learner here;
    # "lr", "svm" and "lr+svm" alone are Review's own ``learner`` parameter
    if params.get("learner") == "nb" or "learner_C" in params:
        _use_learner(str(params.pop("learner", "lr")), params.pop("learner_C", None))
    else:
        _use_learner("lr", None)
    recs = load_records(path)
    topic = default_topic(path)
    params = dict(params)
    prior = bool(params.pop("prior", False))
    use_topic = bool(params.pop("use_topic", True))
    ht_too = bool(params.pop("ht_too", False))
    n = len(recs)
    perm = shuffle_permutation(n, seed)
    ids = [recs[i].id for i in perm]
    gold = {recs[i].id: recs[i].label for i in perm}
    n_rel = sum(gold.values())
    review = Review(topic if use_topic else None, random_state=seed,
                    **{**params, "min_batches": 1})
    review.add_documents(ids, [recs[i].text for i in perm])
    labels: list[int] = []
    if prior:
        rng = np.random.default_rng(seed)
        rel = [d for d in ids if gold[d] == 1]
        non = [d for d in ids if gold[d] == 0]
        for d in (rel[int(rng.integers(len(rel)))], non[int(rng.integers(len(non)))]):
            review.record_judgment(d, bool(gold[d]))
            labels.append(gold[d])
    want = variants()
    stops: dict[str, list[float]] = {}
    found = sum(labels)
    c0 = time.process_time()
    while True:
        batch = review.next_batch()
        if not batch:
            break
        for d in batch:
            review.record_judgment(d, bool(gold[d]))
            labels.append(gold[d])
            found += gold[d]
        nb = review.n_sampling_batches()
        if nb >= 1 and review.draws > 0:
            ht = review.estimate_ht() if ht_too else None
            window, hv = review.hh_window, review.hh_variance
            hhs = {}
            for w in WINDOWS:
                for v in ("within", "max"):
                    review.hh_window, review.hh_variance = w, v  # type: ignore[assignment]
                    hhs[f"{w}{'m' if v == 'max' else ''}"] = review.estimate_hh()
            review.hh_window, review.hh_variance = window, hv
            for mb in MIN_BATCHES:
                if nb < mb:
                    continue
                for t in TARGETS:
                    fire: dict[str, bool] = {}
                    if ht is not None:
                        fire[f"ht@{t}/mb{mb}"] = target_rule(found, ht.r_hat, t)
                    for w, hh in hhs.items():
                        fire[f"hh@{t}/w{w}/mb{mb}"] = target_rule(found, hh.r_hat, t)
                        for c in CONFIDENCES:
                            fire[f"bound{c}@{t}/w{w}/mb{mb}"] = bound_rule(found, hh.upper(c), t)
                    for key, f in fire.items():
                        if f and key not in stops:
                            stops[key] = [found / n_rel, len(labels) / n]
        if found == n_rel and (review.draws == 0 or all(
                k in stops for k in want if not k.startswith("ht") or ht_too)):
            break
        if review.draws == 0 and found >= 0.95 * n_rel:
            break
    first = labels.index(1) + 1 if 1 in labels else None
    return {"dataset": ds, "seed": seed, "n": n, "relevant": n_rel,
            "wss95": wss(labels, 0.95, n, n_rel), "stops": stops,
            "screened_at_first_relevant": first,
            "cpu": round(time.process_time() - c0, 1)}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    per: dict[str, float] = {}
    for ds in sorted({r["dataset"] for r in runs}):
        per[ds] = float(np.mean([r["wss95"] for r in runs if r["dataset"] == ds]))
    out: dict[str, Any] = {"wss95": per, "wss95_mean": float(np.mean(list(per.values())))}
    keys = sorted({k for r in runs for k in r["stops"]})
    rules: dict[str, Any] = {}
    for k in keys:
        t = float(k.split("@")[1].split("/")[0])
        pts = [r["stops"].get(k, [1.0, 1.0]) for r in runs]
        rules[k] = {"met": float(np.mean([p[0] >= t - 1e-12 for p in pts])),
                    "cost": float(np.mean([p[1] for p in pts])),
                    "recall": float(np.mean([p[0] for p in pts]))}
    out["rules"] = rules
    return out


def compact(paths: list[str], out: Path) -> None:
    """Merge tuning files into one without the per-run rows: per dataset and overall."""
    merged: dict[str, Any] = {}
    for path in paths:
        for name, res in orjson.loads(Path(path).read_bytes())["results"].items():
            runs = res["runs"]
            per_ds: dict[str, Any] = {}
            for ds in sorted({r["dataset"] for r in runs}):
                per_ds[ds] = summarise([r for r in runs if r["dataset"] == ds])["rules"]
            merged[name] = {"params": res["params"], "seeds": res["seeds"],
                            "wss95": res["wss95"], "wss95_mean": res["wss95_mean"],
                            "rules": res["rules"], "rules_per_dataset": per_ds,
                            "wss95_runs": [[r["dataset"], r["seed"], r["wss95"]] for r in runs],
                            "first_relevant_runs": [
                                [r["dataset"], r["seed"], r["screened_at_first_relevant"]]
                                for r in runs if "screened_at_first_relevant" in r],
                            "file": Path(path).name}
    write_json(out, {"command": "python benchmarks/screening_tune.py --compact "
                     + " ".join(Path(p).name for p in paths) + f" --out {out}",
                     "keys": "rule@target/w<hh_window>[m = hh_variance max]/mb<min_batches>;"
                     " boundC = the bound rule at one-sided confidence C",
                     "results": merged})


def table(path: str) -> None:
    """Markdown table of WSS@95 per configuration of a tuning file, with the datasets
    where it is >= ASReview's mean WSS@95 (``screening_asreview.json``, seeds 0-4)."""
    asr = orjson.loads((ROOT / "benchmarks" / "results" / "screening_asreview.json")
                       .read_bytes())["per_dataset"]
    names = sorted(asr)
    print("| configuration (seeds) | mean | " + " | ".join(n.split("_")[0] for n in names)
          + " | >= ASReview |")
    print("| --- | ---: |" + " ---: |" * len(names) + " ---: |")
    for name, res in orjson.loads(Path(path).read_bytes())["results"].items():
        w = res["wss95"]
        wins = sum(w[n] >= asr[n]["wss95"] for n in names)
        seeds = res["seeds"]
        print(f"| {name} ({seeds[0]}-{seeds[-1]}) | {res['wss95_mean']:.3f} | "
              + " | ".join(f"{w[n]:.3f}" for n in names) + f" | {wins} of {len(names)} |")


def main() -> None:
    if sys.argv[1:2] == ["--table"]:
        table(sys.argv[2])
        return
    if sys.argv[1:2] == ["--compact"]:
        ap = argparse.ArgumentParser()
        ap.add_argument("--compact", nargs="+", required=True)
        ap.add_argument("--out", required=True)
        a = ap.parse_args()
        compact(a.compact, Path(a.out))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", help='JSON: {"name": {Review params}, ...}')
    ap.add_argument("--seeds", default="100,101,102")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--only", default="")
    ap.add_argument("--data", default=str(ROOT / "data" / "screening"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" /
                                         "screening_tune.json"))
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    files = sorted(Path(args.data).glob("*.jsonl.gz"))
    if args.only:
        files = [f for f in files if f.name.split(".")[0] in args.only.split(",")]
    configs = orjson.loads(args.configs)
    out_path = Path(args.out)
    old = orjson.loads(out_path.read_bytes()) if out_path.exists() else {"results": {}}
    results: dict[str, Any] = old.get("results", {})
    for name, params in configs.items():
        jobs = [(f.name.split(".")[0], params, str(f), s) for s in seeds for f in files]
        with ProcessPoolExecutor(args.jobs) as ex:
            runs = list(ex.map(one_run, jobs))
        summ = summarise(runs)
        results[name] = {"params": params, "seeds": seeds, **summ, "runs": runs}
        print(f"{name}: WSS@95 {summ['wss95_mean']:.3f} "
              + " ".join(f"{k[:6]}={v:.3f}" for k, v in summ["wss95"].items())
              + f" cpu={sum(r['cpu'] for r in runs):.0f}s", flush=True)
        for k in ("bound0.95@0.95/w10/mb10", "hh@0.95/w10/mb10", "bound0.95@0.95/w10m/mb10",
                  "bound0.9@0.95/w10m/mb5", "bound0.95@0.95/w5m/mb10", "hh@0.8/w10/mb10"):
            if k in summ["rules"]:
                v = summ["rules"][k]
                print(f"   {k:22s} met {v['met']:.0%} cost {v['cost']:.3f} "
                      f"recall {v['recall']:.3f}", flush=True)
        write_json(out_path, {"command": "python benchmarks/screening_tune.py <configs> "
                              "(each result holds its params and seeds)",
                              "results": results})


if __name__ == "__main__":
    main()
