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


# -- the jar cache and the start-up error (thirty-eighth session) ----------------------
def _cache(tmp_path: Path) -> DevBroker:
    """A broker whose jar cache holds two small jars stamped as fetched for its pom."""
    import hashlib
    import zipfile

    pom = tmp_path / "pom.xml"
    pom.write_text("<project/>")
    b = DevBroker(port=39592, controller_port=39593, cache_dir=tmp_path / "cache", pom=pom)
    b.libs_dir.mkdir(parents=True)
    for name in ("kafka_2.13-3.9.1.jar", "slf4j.jar"):
        with zipfile.ZipFile(b.libs_dir / name, "w") as z:
            z.writestr("a/B.class", name * 50)
    lines = [hashlib.sha256(pom.read_bytes()).hexdigest()]
    lines += [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}"
              for p in sorted(b.libs_dir.glob("*.jar"))]
    (b.libs_dir / ".pom-sha256").write_text("\n".join(lines) + "\n")
    return b


def test_an_intact_jar_cache_is_used_without_maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = _cache(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))  # no mvn: fetching would fail
    assert b.fetch() == b.libs_dir


@pytest.mark.parametrize("damage", ["truncated", "flipped", "deleted", "extra"])
def test_a_damaged_jar_cache_is_fetched_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str], damage: str) -> None:
    b = _cache(tmp_path)
    jar = b.libs_dir / "slf4j.jar"
    data = jar.read_bytes()
    if damage == "truncated":
        jar.write_bytes(data[: len(data) // 2])
    elif damage == "flipped":  # same size, one byte changed: a zip check alone would miss it
        jar.write_bytes(data[:40] + bytes([data[40] ^ 0xFF]) + data[41:])
    elif damage == "deleted":
        jar.unlink()
    else:
        (b.libs_dir / "stray.jar").write_bytes(data)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    with pytest.raises(BrokerError, match="Maven \\(mvn\\) is not installed"):
        b.fetch()  # it tried to fetch again
    err = capsys.readouterr().err
    assert "are damaged" in err and ("slf4j.jar" in err or "stray.jar" in err)


def test_a_stamp_without_manifest_gets_one_when_the_jars_open(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    b = _cache(tmp_path)
    stamp = b.libs_dir / ".pom-sha256"
    digest = stamp.read_text().splitlines()[0]
    stamp.write_text(digest + "\n")  # as written before the manifest existed
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert b.fetch() == b.libs_dir
    assert len(stamp.read_text().splitlines()) == 3
    (b.libs_dir / "slf4j.jar").write_bytes(b"not a zip")
    stamp.write_text(digest + "\n")
    with pytest.raises(BrokerError, match="mvn"):
        b.fetch()


_FATAL = """\
[2026-12-06 05:00:14,533] INFO Setting -D jdk.tls.rejectClientInitiatedRenegotiation=true (X509Util)
[2026-12-06 05:00:14,624] ERROR [KafkaRaftServer nodeId=1] Fatal error during broker startup. \
Prepare to shutdown (kafka.server.BrokerServer)
org.apache.kafka.common.KafkaException: Socket server failed to bind to 127.0.0.1:9092: Address already in use.
\tat kafka.network.Acceptor.openServerSocket(SocketServer.scala:734)
\tat kafka.network.Acceptor.<init>(SocketServer.scala:610)
Caused by: java.net.BindException: Address already in use
\tat java.base/sun.nio.ch.Net.bind0(Native Method)
\t... 20 more
[2026-12-06 05:00:14,700] INFO [BrokerServer id=1] shutting down (kafka.server.BrokerServer)
[2026-12-06 05:00:14,800] ERROR [SharedServer id=1] Got exception while shutting down (SharedServer)
java.lang.IllegalStateException: not started
\tat kafka.raft.KafkaRaftManager.shutdown(RaftManager.scala:200)
"""


def test_the_start_up_error_names_the_first_error_and_its_root_cause() -> None:
    from sift.devbroker import startup_failure

    why = startup_failure(_FATAL)
    assert why.startswith("ERROR [KafkaRaftServer nodeId=1] Fatal error during broker startup")
    assert why.endswith(": java.net.BindException: Address already in use")
    assert "shutting down" not in why


def test_the_start_up_error_without_error_lines() -> None:
    from sift.devbroker import startup_failure

    # Kafka's own words for a bad setting, on standard output without a log4j head
    assert startup_failure("starting\norg.apache.kafka.common.config.ConfigException: Invalid value abc"
                           " for configuration log.retention.hours\n\tat kafka.Kafka.main(Kafka.scala)\n") \
        == "org.apache.kafka.common.config.ConfigException: Invalid value abc for configuration " \
           "log.retention.hours"
    assert startup_failure("Error: Could not find or load main class kafka.Kafka\n") == \
        "Error: Could not find or load main class kafka.Kafka"
    assert startup_failure("") == "no log"
    # the cause on the ERROR line itself is not repeated
    assert startup_failure("[t] ERROR Exiting Kafka due to fatal exception (kafka.Kafka$)\n"
                           "java.lang.RuntimeException: Stored node id 1 doesn't match previous node id 7\n") \
        == "ERROR Exiting Kafka due to fatal exception (kafka.Kafka$): java.lang.RuntimeException: " \
           "Stored node id 1 doesn't match previous node id 7"


def test_only_this_start_s_lines_are_read(tmp_path: Path) -> None:
    from sift.devbroker import _since

    log = tmp_path / "server.log"
    log.write_text("[t] ERROR an earlier start failed\n")
    offset = log.stat().st_size
    with open(log, "a") as fh:
        fh.write("[t] INFO this start\n")
    assert _since(log, offset) == "[t] INFO this start\n"
    assert _since(log, 10**9).startswith("[t] ERROR")  # a log made again: from its start
    assert _since(tmp_path / "none.log", 0) == ""
