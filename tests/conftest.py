"""Test order for the parallel run (``scripts/test.sh`` runs pytest-xdist, file by file).

The tests against a real broker (``tests/integration``, ``tests/reliability``) spend
most of their time waiting for workers, brokers and consumer groups; the rest are short
and busy on a core. Collected first, the waiting files start at once on every process
and the short ones fill the gaps after them, instead of one long broker test running
alone at the end. The sort is stable, so tests keep their order within each group, and
every process collects the same order (xdist requires it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
#: Folders whose tests mostly wait on a broker: run first.
WAITING = (HERE / "integration", HERE / "reliability")


def _waits(item: pytest.Item) -> bool:
    parents = Path(str(item.path)).resolve().parents
    return any(folder in parents for folder in WAITING)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not _waits(item))


@pytest.fixture(autouse=True)
def _logs_without_logging_errors(request: pytest.FixtureRequest,
                                 monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every ``sift worker`` and ``sift web`` process a broker test starts must write its
    log without a logging error: Python's logging prints ``--- Logging error ---`` and
    drops the record when a formatter fails, and the process goes on, so nothing else
    fails (the fiftieth session's one-line filter made every plain-text record of the
    worker fail so, unseen by the suite until the fifty-first session's audit)."""
    if not _waits(request.node):
        yield
        return
    from sift.agents.harness import WebProcess, WorkerProcess

    started: list[WorkerProcess | WebProcess] = []
    for cls in (WorkerProcess, WebProcess):
        def start(self: Any, _real: Any = cls.start) -> Any:
            started.append(self)
            return _real(self)
        monkeypatch.setattr(cls, "start", start)
    yield
    broken = []
    for proc in started:
        try:
            text = Path(proc.log_path).read_text(errors="replace")
        except OSError:
            continue
        if LOGGING_ERROR in text:
            broken.append(f"{proc.log_path}: {text.count(LOGGING_ERROR)} records lost")
    assert not broken, "logging errors in: " + "; ".join(broken)


#: What Python's logging prints, instead of the record, when a handler fails to format it.
LOGGING_ERROR = "--- Logging error ---"
