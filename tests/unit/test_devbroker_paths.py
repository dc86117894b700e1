"""The local broker's configuration, without starting Java (thirty-seventh session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sift.devbroker import BrokerError, DevBroker


def test_relative_directories_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Java runs in the data directory: a relative path given to it pointed elsewhere
    monkeypatch.chdir(tmp_path)
    b = DevBroker(port=39592, controller_port=39593, cache_dir=Path("cache"), data_dir=Path("data"))
    assert b.cache_dir == tmp_path / "cache" and b.data == tmp_path / "data"
    assert DevBroker(port=39592, controller_port=39593, cache_dir=Path("c")).data == \
        tmp_path / "c" / "data-39592"


@pytest.mark.parametrize(("port", "controller"), [(70000, 9093), (0, 9093), (9092, 70001)])
def test_ports_out_of_range_are_refused(port: int, controller: int) -> None:
    with pytest.raises(BrokerError, match="must be in \\[1, 65535\\]"):
        DevBroker(port=port, controller_port=controller)


def test_java_is_found_through_java_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert DevBroker(port=39592, controller_port=39593)._java() == str(java)
    monkeypatch.delenv("JAVA_HOME")
    with pytest.raises(BrokerError, match="not found \\(nor in JAVA_HOME\\)"):
        DevBroker(port=39592, controller_port=39593)._java()
