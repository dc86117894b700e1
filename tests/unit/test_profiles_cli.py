"""``sift profiles`` without a broker: the table ``list`` prints."""

from __future__ import annotations

import pytest

from sift.cli import main


def test_profiles_list_prints_a_table_with_every_column(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import sift.commands.profiles as profiles

    rows = [{"profile": "oil", "model": "rocchio", "bags": 1, "update": 3, "measure": "f1",
             "threshold": 0.25, "model_version": 2, "judged": 3, "waiting": 2, "shard": 1},
            {"profile": "bad", "error": "unreadable state"}]
    monkeypatch.setattr(profiles, "list_profiles", lambda settings: rows)
    monkeypatch.setenv("SIFT_BROKER", "kafka://127.0.0.1:1")
    assert main(["profiles", "list"]) == 0
    head, oil, bad, total = capsys.readouterr().out.splitlines()
    assert head.split() == ["profile", "model", "bags", "update", "measure", "threshold",
                            "version", "judged", "waiting", "shard"]
    assert oil.split() == ["oil", "rocchio", "1", "3", "f1", "0.2500", "2", "3", "2", "1"]
    assert bad.split() == ["bad", "unreadable", "state"] and total == "2 profiles"
