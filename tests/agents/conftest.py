"""Agent tests: plain-Python service tests and Faust test_context tests (no broker)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def no_broker_start_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agents ask the broker where the group starts on a partition it has no commit
    for (``sift.kafkaclient.start_offsets``); there is no broker here, so none is known
    (the test wrapper numbers offsets from 1). Tests of it patch it again."""
    import sift.agents.app as app_module

    monkeypatch.setattr(app_module, "start_offsets", lambda settings, tps: {})
