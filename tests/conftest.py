"""Test order for the parallel run (``scripts/test.sh`` runs pytest-xdist, file by file).

The tests against a real broker (``tests/integration``, ``tests/reliability``) spend
most of their time waiting for workers, brokers and consumer groups; the rest are short
and busy on a core. Collected first, the waiting files start at once on every process
and the short ones fill the gaps after them, instead of one long broker test running
alone at the end. The sort is stable, so tests keep their order within each group, and
every process collects the same order (xdist requires it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
#: Folders whose tests mostly wait on a broker: run first.
WAITING = (HERE / "integration", HERE / "reliability")


def _waits(item: pytest.Item) -> bool:
    parents = Path(str(item.path)).resolve().parents
    return any(folder in parents for folder in WAITING)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not _waits(item))
