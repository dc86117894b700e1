"""Reuters-21578 full training (batch categorization): kNN and Rocchio, micro and macro F1.

``sift replay --full-training``: one profile per category (ModApte, the 90 categories
present in both training and test), trained on every training label, no feedback; the
test documents are classified in order. Writes
``benchmarks/results/engine_fulltrain.json``:

- ``validation``: every candidate configuration run on a validation split of the
  training set (first 70% of the training file as training, last 30% as the test;
  the categories present in both halves), with micro/macro F1 and micro P/R. The
  shipped defaults (:class:`sift.replay.FullTrainingConfig`) are the best of these on
  micro F1; nothing was chosen on the test set.
- ``test``: the final configurations (the shipped defaults) on the test file, with
  micro/macro F1, micro P/R and per-category F1, R+, N+, R-.

    .venv/bin/python benchmarks/engine_fulltrain.py                    # validation grid + test
    .venv/bin/python benchmarks/engine_fulltrain.py --skip-validation  # test only, keep the grid
    .venv/bin/python benchmarks/engine_fulltrain.py --validation-only --models rocchio

The same test figures come from the command line:
``sift replay --full-training --model knn`` and ``... --model rocchio``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from sift.replay import Corpus, FullTrainingConfig, ReplayConfig, load_corpus, replay

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks/results/engine_fulltrain.json"
DEFAULT = FullTrainingConfig()

#: The configuration before this benchmark (TROT on T11SU, kNN k=30, all features).
OLD = FullTrainingConfig(threshold="trot", select_features=None, knn_normalize=False,
                         model_params={"knn": {"k": 30}, "rocchio": {}})


def _cands() -> dict[str, list[tuple[str, dict[str, Any], FullTrainingConfig]]]:
    d = DEFAULT
    scut_all = replace(d, select_features=None, knn_normalize=False)
    knn: list[tuple[str, dict[str, Any], FullTrainingConfig]] = [
        ("old: k=30, TROT t11su, all features, sum vote", {"k": 30}, OLD),
        ("k=30, SCut", {"k": 30}, scut_all),
        ("k=45, SCut", {"k": 45}, scut_all),
        ("k=45, SCut, normalised vote", {"k": 45}, replace(scut_all, knn_normalize=True)),
        ("k=45, SCut, 5000 features, sum vote", {"k": 45}, replace(d, knn_normalize=False)),
        ("k=45, SCut, 5000 features, normalised vote", {"k": 45}, d),
        ("k=30, SCut, 5000 features, normalised vote", {"k": 30}, d),
        ("k=60", {"k": 60}, d),
        ("k=75", {"k": 75}, d),
        ("k=100 (default)", {"k": 100}, d),
        ("k=150", {"k": 150}, d),
        ("k=100, 2000 features", {"k": 100}, replace(d, select_features=2000)),
        ("k=100, 10000 features", {"k": 100}, replace(d, select_features=10000)),
        ("k=100, all features", {"k": 100}, replace(d, select_features=None)),
        ("k=100, sum vote", {"k": 100}, replace(d, knn_normalize=False)),
        ("k=100, TROT t11su instead of SCut", {"k": 100}, replace(d, threshold="trot")),
        ("k=100, SCut without fbr and min score", {"k": 100}, replace(d, fbr=0.0, min_score=None)),
        ("k=100, SCut without min score", {"k": 100}, replace(d, min_score=None)),
        ("k=100, fbr 0.1", {"k": 100}, replace(d, fbr=0.1)),
        ("k=100, fbr 0.5", {"k": 100}, replace(d, fbr=0.5)),
        ("k=100, fbr fallback none", {"k": 100}, replace(d, fbr_fallback="none")),
        ("k=100, placement 0.5", {"k": 100}, replace(d, placement=0.5)),
    ]
    r0 = {"alpha": 1.0, "beta": 2.0, "gamma": 0.5, "corpus_weight": "none", "nonnegative": True}

    def r(alpha: float, gamma: float, cw: str = "idf", nonneg: bool = False, **kw: Any) -> dict[str, Any]:
        return {"alpha": alpha, "beta": 16.0, "gamma": gamma, "corpus_weight": cw, "nonnegative": nonneg, **kw}

    best = r(1.0, 24.0)
    rocchio: list[tuple[str, dict[str, Any], FullTrainingConfig]] = [
        ("old: alpha=1 beta=2 gamma=0.5, TROT t11su, all features", r0, OLD),
        ("alpha=1 beta=2 gamma=0.5, SCut, all features", r0, replace(d, select_features=None)),
        ("alpha=1 beta=2 gamma=0.5, SCut, 5000 features", r0, d),
        ("alpha=0 beta=16 gamma=4, SCut, all features", r(0, 4, "none", True), replace(d, select_features=None)),
        ("alpha=0 beta=16 gamma=4, SCut, 5000 features", r(0, 4, "none", True), d),
        ("alpha=0 beta=16 gamma=16, 5000 features", r(0, 16, "none", True), d),
        ("alpha=0 beta=16 gamma=4, corpus_weight idf", r(0, 4, "idf", True), d),
        ("alpha=0 beta=16 gamma=16, idf", r(0, 16, "idf", True), d),
        ("alpha=0 beta=16 gamma=64, idf", r(0, 64, "idf", True), d),
        ("alpha=0 beta=16 gamma=128, idf", r(0, 128, "idf", True), d),
        ("alpha=0 beta=16 gamma=64, idf2", r(0, 64, "idf2", True), d),
        ("alpha=1 beta=16 gamma=64, idf", r(1, 64, "idf", True), d),
        ("alpha=0 beta=16 gamma=24, idf, signed coefficients", r(0, 24), d),
        ("alpha=1 beta=16 gamma=16, idf, signed", r(1, 16), replace(d, min_score=None)),
        ("alpha=1 beta=16 gamma=24, idf, signed (default)", best, d),
        ("alpha=1 beta=16 gamma=24, idf, signed, no min score", best, replace(d, min_score=None)),
        ("alpha=1 beta=16 gamma=32, idf, signed", r(1, 32), replace(d, min_score=None)),
        ("alpha=1 beta=16 gamma=48, idf, signed", r(1, 48), replace(d, min_score=None)),
        ("alpha=2 beta=16 gamma=32, idf, signed", r(2, 32), d),
        ("default, top_k=1000", {**best, "top_k": 1000}, d),
        ("default, all features", best, replace(d, select_features=None)),
        ("default, 3000 features", best, replace(d, select_features=3000)),
        ("default, 10000 features", best, replace(d, select_features=10000)),
        ("default, TROT t11su", best, replace(d, threshold="trot")),
        ("default, fbr 0.1", best, replace(d, fbr=0.1)),
        ("default, fbr 0.5", best, replace(d, fbr=0.5)),
        ("default, placement 0.5", best, replace(d, placement=0.5)),
    ]
    return {"knn": knn, "rocchio": rocchio}


def summary(m: dict[str, Any]) -> dict[str, Any]:
    return {k: m[k] for k in ("profiles", "micro_f1", "macro_f1", "micro_precision", "micro_recall",
                              "macro_t11su", "macro_t11f", "seconds")}


def run(corpus: Corpus, model: str, params: dict[str, Any], full: FullTrainingConfig) -> dict[str, Any]:
    cfg = ReplayConfig(model=model, model_params=params, full_training=True, update="never", full=full)
    return replay(corpus, cfg).metrics


def validation(corpus: Corpus, models: list[str]) -> dict[str, Any]:
    cut = int(len(corpus.train) * 0.7)
    val = Corpus(corpus.train[:cut], corpus.train[cut:])
    out: dict[str, Any] = {
        "protocol": f"first 70% of the training file as training ({cut} documents), last 30% as the "
                    f"test ({len(val.test)}); categories present in both halves",
        "runs": {},
    }
    for model in models:
        rows = []
        for label, params, full in _cands()[model]:
            t0 = time.perf_counter()
            m = run(val, model, params, full)
            row = {"label": label, "model_params": m["config"]["model_params"], "full": full.as_dict(),
                   **summary(m)}
            rows.append(row)
            print(f"[validation] {model:8s} {label:58s} micro F1 {m['micro_f1']:.4f} macro F1 "
                  f"{m['macro_f1']:.4f} ({time.perf_counter() - t0:.0f} s)", flush=True)
        out["runs"][model] = rows
    return out


def test_run(corpus: Corpus, model: str) -> dict[str, Any]:
    m = run(corpus, model, {}, DEFAULT)
    n_train = {name: sum(name in d.topics for d in corpus.train) for name in m["per_profile"]}
    per = {name: {"f1": r["f1"], "precision": r["precision"], "recall": r["recall"], "R+": r["R+"],
                  "N+": r["N+"], "R-": r["R-"], "relevant_in_test": r["relevant_in_test"],
                  "train_positives": n_train[name]}
           for name, r in m["per_profile"].items()}
    print(f"[test] {model:8s} micro F1 {m['micro_f1']:.4f} macro F1 {m['macro_f1']:.4f} "
          f"P {m['micro_precision']:.4f} R {m['micro_recall']:.4f}", flush=True)
    return {**summary(m), "config": m["config"], "per_category": per,
            "command": f"sift replay --full-training --model {model}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="knn,rocchio")
    ap.add_argument("--skip-validation", action="store_true",
                    help="do not rerun the validation grid (keep the one in the results file)")
    ap.add_argument("--validation-only", action="store_true", help="run the validation grid only")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    models = args.models.split(",")
    corpus = load_corpus(ROOT / "data/reuters21578/train.jsonl.gz", ROOT / "data/reuters21578/test.jsonl.gz")
    out_path = Path(args.out)
    result: dict[str, Any] = orjson.loads(out_path.read_bytes()) if out_path.exists() else {}
    result.setdefault("validation", {"runs": {}})
    result.setdefault("test", {})
    if not args.skip_validation:
        v = validation(corpus, models)
        result["validation"]["protocol"] = v["protocol"]
        result["validation"]["runs"].update(v["runs"])
    if not args.validation_only:
        for model in models:
            result["test"][model] = test_run(corpus, model)
    result["defaults"] = DEFAULT.as_dict()
    result["bars"] = {"knn_micro_f1": 0.85, "rocchio_micro_f1": 0.80}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
