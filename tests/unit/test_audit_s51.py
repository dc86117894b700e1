"""The fifty-first session's audit of the fiftieth session's code: each test failed
before its fix."""

from __future__ import annotations

import io
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sift.commands.worker import StopWatchdog, worker_class

FORGED = "d1\n[2026-01-01 00:00:00,000] [1] [ERROR] forged"


def worker_logging() -> None:
    """Faust's set-up as ``sift worker`` gets it (no log file: a stream handler, which
    writes to standard error, through mode's colour formatter ``ExtensionFormatter``),
    then the worker's hook."""
    from mode.utils.logging import setup_logging

    cls = worker_class(StopWatchdog(1.0))
    worker = cls.__new__(cls)  # the hook needs no running app
    worker.spinner = None
    level = setup_logging(loglevel="INFO", logfile=io.StringIO())
    worker.on_setup_root_logger(logging.getLogger(), level)


def test_a1_the_worker_writes_its_records_through_the_stream_formatter(
        root_handlers: None, capsys: pytest.CaptureFixture[str]) -> None:
    """``OneLineFilter`` left ``args`` None; mode's ``ExtensionFormatter`` (the worker's
    formatter on its default stream) makes that ``(None,)``, so every record failed to
    format: "--- Logging error ---" on standard error and the record lost."""
    worker_logging()
    log = logging.getLogger("sift.worker")
    log.warning("dead letter from %s", FORGED)
    log.warning("plain message, %d %% sure", 100)
    log.info("no arguments at all")
    err = capsys.readouterr().err
    assert "Logging error" not in err
    lines = err.splitlines()
    assert len(lines) == 3, lines
    assert "dead letter from d1\\n[2026-01-01 00:00:00,000] [1] [ERROR] forged" in lines[0]
    assert "plain message, 100 % sure" in lines[1]
    assert "no arguments at all" in lines[2]


def test_a2_an_exception_message_starts_no_record_of_its_own(
        root_handlers: None, capsys: pytest.CaptureFixture[str]) -> None:
    """Faust's formatter writes a traceback as it is: an exception that quotes user text
    (a profile name, a ``doc_id`` with a line feed) wrote a line that reads as a record.
    As ``sift web``'s :class:`~sift.observability.PlainFormatter` writes it: each line of
    the traceback indented, escaped."""
    worker_logging()
    try:
        raise ValueError(f"unknown document {FORGED}")
    except ValueError:
        logging.getLogger("sift.worker").exception("batch failed")
    lines = capsys.readouterr().err.splitlines()
    assert "batch failed" in lines[0], lines
    assert len(lines) > 2, lines  # the traceback is kept
    assert all(line.startswith("  ") for line in lines[1:]), lines
    assert lines[-2:] == ["  ValueError: unknown document d1",
                          "  [2026-01-01 00:00:00,000] [1] [ERROR] forged"], lines


def test_a3_the_soaks_profiles_are_half_rocchio_half_knn() -> None:
    """docs/reliability.md (Soak): "100 profiles, 50 Reuters categories × Rocchio and
    kNN". ``profile_specs`` took Rocchio over every category before any kNN: the 2,000
    training documents of the fiftieth session's runs hold 90 categories, so the soak
    ran 90 Rocchio profiles and 10 kNN ones (before, over the whole training set's 115
    categories, 100 Rocchio and none); ``--caps`` found at most 10 kNN specs."""
    from sift.topics.records import Document
    from tests.scripts import load_benchmark

    soak = load_benchmark("soak")
    train = [Document(f"t{i}", "text", topics=(f"c{i % 7}",)) for i in range(70)]
    specs = soak.profile_specs(train, 6)
    assert [s["model"] for s in specs] == ["rocchio"] * 3 + ["knn"] * 3
    assert [s["profile"] for s in specs[3:]] == [s["profile"].replace("rocchio", "knn")
                                                 for s in specs[:3]]
    assert all(len(s["positives"]) == 3 for s in specs)
    assert len(soak.profile_specs(train, 100)) == 14  # every category, each model once


# -- checked and right: kNN's stack against each model's own scores ----------------------
@settings(max_examples=200, deadline=None)
@given(st.data())
def test_checked_knn_stack_scores_are_each_models_own(data: st.DataObject) -> None:
    """Pools sharing a base, pools of their own (``KNNStack._mostly_own``), pools mixing
    both, empty pools, k above the pool size, ties (0/1 and 0/2 entries): the stack's
    scores are each model's own :meth:`KNN.score`, bit for bit, whichever path."""
    import numpy as np
    import scipy.sparse as sp

    from sift.filters.examples import ExampleSet
    from sift.filters.knn import KNN, KNNStack

    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    nf, nd = data.draw(st.integers(3, 12)), data.draw(st.integers(4, 60))
    D = sp.csr_matrix((rng.random((nd, nf)) < 0.3) * rng.choice([1.0, 2.0], (nd, nf)))
    base = rng.permutation(nd)[: data.draw(st.integers(0, nd))]
    models = []
    for _ in range(data.draw(st.integers(2, 7))):
        kind = data.draw(st.sampled_from(["base", "own", "mix", "empty"]))
        if kind == "empty":
            rows = np.zeros(0, dtype=np.int64)
        elif kind == "base":
            rows = np.concatenate([base, rng.permutation(nd)[: rng.integers(0, 4)]])
        elif kind == "own":
            rows = rng.permutation(nd)[: rng.integers(1, nd + 1)]
        else:
            rows = np.concatenate([base[: rng.integers(0, base.size + 1)],
                                   rng.permutation(nd)[: rng.integers(0, nd)]])
        rows = rng.permutation(np.unique(rows))
        m = KNN(k=data.draw(st.integers(1, 12)), normalize=data.draw(st.booleans()),
                vote=data.draw(st.sampled_from(["positive", "signed"])))
        ex = ExampleSet(None, nf)
        m.bind(nf, None, ex)
        if rows.size:
            ex.add(D[rows], np.where(rng.random(rows.size) < 0.4, 1, -1),
                   rng.choice([1.0, 0.5], rows.size), np.ones(rows.size, bool))
        models.append(m)
    X = sp.csr_matrix((rng.random((data.draw(st.integers(1, 80)), nf)) < 0.4).astype(float))
    stack = KNNStack(models)
    stack._build()  # the union's paths, whatever the number of documents
    got = stack.score(X)
    for j, m in enumerate(models):
        assert np.array_equal(got[:, j], m.score(X)), (j, stack.cols, stack.alone)
