"""Memory of fitted profiles, with and without the vectorizer's character n-grams.

Each (model, vectorizer) pair runs in a fresh process: the Reuters-21578 vectorizer and
training matrix are built, then 100 profiles are fitted as ``benchmarks/engine_speed.py``
fits them (3 initial positives each, default pseudolabels) and stacked by scoring one
batch. The process's resident memory grows by what the profiles hold (their example
sets keep the vectors of the judged and pseudolabelled documents) and their stack:

    .venv/bin/python benchmarks/profile_memory.py [--profiles 100] [--chars 0.4]

Writes ``benchmarks/results/profile_memory.json`` (or ``--out``): per model and vectorizer the stored
entries a training document has, the MB the fitted profiles added, the MB after
stacking, and per profile.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def measure(model: str, chars: float, profiles: int) -> dict[str, float]:
    """One measurement, in this process (call it in a fresh one)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import engine_speed

    train, test, cats, vec, X_train = engine_speed.reuters(**({"chars": chars} if chars else {}))
    before = _rss_mb()
    bank = engine_speed.build_bank(profiles, model, vec, X_train, train, cats)
    fitted = _rss_mb() - before
    bank.score(vec.transform([d.text for d in test[:256]]))
    stacked = _rss_mb() - before
    return {"entries_per_document": X_train.nnz / X_train.shape[0], "mb_fitted": fitted,
            "mb_stacked": stacked, "mb_per_profile": stacked / profiles}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profiles", type=int, default=100)
    ap.add_argument("--chars", type=float, default=0.4)
    ap.add_argument("--models", default="rocchio,kantor,knn")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/profile_memory.json")
    ap.add_argument("--one", nargs=2, metavar=("MODEL", "CHARS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(orjson.dumps(measure(args.one[0], float(args.one[1]), args.profiles)).decode())
        return
    out: dict = {"profiles": args.profiles, "command": " ".join(["benchmarks/profile_memory.py", *sys.argv[1:]]),
                 "runs": {}}
    for model in args.models.split(","):
        for chars in (0.0, args.chars):
            done = subprocess.run([sys.executable, __file__, "--profiles", str(args.profiles),
                                   "--one", model, str(chars)], capture_output=True, text=True, check=True,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
            row = orjson.loads(done.stdout.strip().splitlines()[-1])
            key = f"{model}/chars={chars}"
            out["runs"][key] = row
            print(f"{key:22s} {row['entries_per_document']:6.1f} entries a document, "
                  f"{row['mb_stacked']:7.0f} MB for {args.profiles} profiles "
                  f"({row['mb_per_profile']:.1f} MB each)", flush=True)
    args.out.write_bytes(orjson.dumps(out, option=orjson.OPT_INDENT_2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
