"""Rocchio bags on stemmed text: a rejected experiment, kept so that it can be re-run.

The vectorizer has no stemmer; ``--truncate 6`` stands in for one. This stems every
training and stream text with a Snowball stemmer (first argument ``porter`` or ``english``,
i.e. Porter2; stop words are dropped first, as the vectorizer would) and runs
``engine_bagging.py`` on the result with the arguments given after the algorithm, e.g.

    .venv/bin/pip install snowballstemmer   # not a dependency of sift
    .venv/bin/python benchmarks/engine_stemming.py porter --bags 5 --groups 4 --validation \\
        --out benchmarks/results/engine_stemming.json --merge

Results: docs/engine.md (thirty-ninth session). The runs' keys in the JSON file name
the algorithm (recorded in ``commands``).
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_bagging
import engine_variants

import sift.replay as replay
from sift.filters.vectorize import STOP_WORDS

#: the vectorizer's word rule (sift.filters.vectorize._TOKEN)
WORD = re.compile(r"(?u)\b[^\W\d_][\w'-]*\w")


def stemmed_loader(algorithm: str) -> Any:
    """``sift.replay.load_corpus`` with every text replaced by its stemmed words."""
    try:
        import snowballstemmer  # type: ignore[import-not-found]
    except ImportError:
        raise SystemExit("this experiment needs snowballstemmer: .venv/bin/pip install "
                         "snowballstemmer") from None
    stem = snowballstemmer.stemmer(algorithm).stemWord
    cache: dict[str, str] = {}

    def text(t: str) -> str:
        out = []
        for w in WORD.findall(t.lower()):
            if w not in STOP_WORDS:
                s = cache.get(w)
                if s is None:
                    s = cache[w] = stem(w)
                out.append(s)
        return " ".join(out)

    def load(*args: Any, **kwargs: Any) -> replay.Corpus:
        corpus = replay.load_corpus(*args, **kwargs)
        return replay.Corpus([dataclasses.replace(d, text=text(d.text)) for d in corpus.train],
                             [dataclasses.replace(d, text=text(d.text)) for d in corpus.test])

    return load


USAGE = "usage: engine_stemming.py {porter,english} [engine_bagging.py options]"


def main() -> None:
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(f"{USAGE}\n\n{__doc__}")
        return
    if len(sys.argv) < 2 or sys.argv[1] not in ("porter", "english"):
        raise SystemExit(f"{USAGE}\n\n{__doc__}")
    load = stemmed_loader(sys.argv.pop(1))
    engine_variants.load_corpus = load  # type: ignore[attr-defined]
    engine_bagging.load_corpus = load  # type: ignore[attr-defined]
    engine_bagging.main()


if __name__ == "__main__":
    main()
