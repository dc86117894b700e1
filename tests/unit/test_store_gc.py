"""benchmarks/store_gc.py end to end on a few documents: both stores run, in processes of
their own, and every figure is reported."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scripts import load_benchmark

store_gc = load_benchmark("store_gc")


def test_store_gc_runs_both_stores_and_reports_the_collector(tmp_path: Path) -> None:
    out = tmp_path / "store_gc.json"
    assert store_gc.main(["--documents", "4000", "--profiles", "8", "--rounds", "1",
                          "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert [r["store"] for r in got["runs"]] == ["ints", "tuples"]
    for run in got["runs"]:
        assert run["documents"] == 4000 and run["stored"] == 4000
        assert run["us_per_document_second_half"] > 0
        assert len(run["gc"]["collections"]) == 3
    assert set(got["medians"]) == {"ints", "tuples"}


def test_the_baseline_store_behaves_as_the_store() -> None:
    """The tuple store is the old design: same ids kept, same rows located."""
    import numpy as np
    import scipy.sparse as sp

    from sift.agents.service import DocumentStore

    old, new = store_gc.TupleStore(4), DocumentStore(4)
    for k, ids in enumerate([["a", "b", "c"], ["b", "d", "e"], ["f", "a"]]):
        X = sp.csr_matrix(np.eye(len(ids)) * (k + 1))
        old.put(ids, X)
        new.put(ids, X)
    # "a" was evicted by the second batch and came back with the third
    assert list(old._rows) == list(new.ids()) == ["d", "e", "f", "a"]
    for doc in ("d", "e", "f", "a"):
        a, b = old.locate(doc), new.locate(doc)
        assert a is not None and b is not None and a[0] is b[0] and a[1] == b[1]
    assert "b" not in old and "b" not in new and new.locate("a") == (X, 1)
