"""The stream benchmark's corpus writes a training file for the workers' IDF into a
temporary folder of its own, and removes the folder when it goes (each benchmark run,
and each process of benchmarks/judgments_ab.py, left one behind before)."""

from __future__ import annotations

import gc
import gzip

from tests.scripts import load_benchmark

stream_bench = load_benchmark("stream_bench")


def test_the_corpus_removes_its_folder_when_it_goes() -> None:
    corpus = stream_bench.Corpus(train_n=50)
    folder = corpus.idf.parent
    with gzip.open(corpus.idf) as fh:
        assert sum(1 for _ in fh) == 50
    assert [d["id"] for d in corpus.documents(2)] == [f"{corpus.test[0].id}-0", f"{corpus.test[1].id}-1"]
    del corpus
    gc.collect()
    assert not folder.exists()
