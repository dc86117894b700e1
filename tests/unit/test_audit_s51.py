"""The fifty-first session's audit of the fiftieth session's code: each test failed
before its fix."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator

import pytest

from sift.commands.worker import StopWatchdog, worker_class

FORGED = "d1\n[2026-01-01 00:00:00,000] [1] [ERROR] forged"


@pytest.fixture
def root_handlers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from mode.utils import logging as mode_logging

    # mode's colour formatter asks the standard output it found at its import whether it
    # is a terminal: pytest's capture of an earlier test, closed since
    monkeypatch.setitem(mode_logging.DEFAULT_FORMATTERS["colored"], "stream", sys.stdout)
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
        if h not in saved:
            h.close()
    for h in saved:
        root.addHandler(h)
    root.setLevel(level)


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
