"""sift against a broker that asks for TLS and SASL: a worker, `sift web` and the command
line over SASL_SSL with SCRAM-SHA-512 (the usual managed-Kafka setting), the command line over
SASL_PLAINTEXT with PLAIN and over SSL alone, and wrong settings each refused with
one line that says what to check.

The broker is a second local broker (the session's own one has only a PLAINTEXT
listener), with a self-signed certificate made by openssl (a PEM keystore), PLAIN
users from its JAAS configuration and a SCRAM user added when its storage is formatted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest

from sift.agents.harness import WebProcess, WorkerProcess, settings_env, wait_for
from sift.cli import main
from sift.devbroker import BrokerError, DevBroker, free_port
from sift.settings import Settings
from tests.integration.conftest import unavailable
from tests.integration.test_service import make_corpus

USER, PLAIN_PASSWORD, SCRAM_PASSWORD = "alice", "plain-secret-1", "scram-secret-2"
LISTENERS = ("SASL_SSL", "SASL_PLAINTEXT", "SSL")


class SecureBroker:
    def __init__(self, broker: DevBroker, ports: dict[str, int], cafile: Path) -> None:
        self.broker, self.ports, self.cafile = broker, ports, cafile

    def settings(self, protocol: str, tmp_path: Path, **overrides: Any) -> Settings:
        """Settings for the listener of ``protocol``, right by default."""
        kw: dict[str, Any] = {
            "broker": f"kafka://127.0.0.1:{self.ports[protocol]}", "security_protocol": protocol,
            "topic_prefix": f"sec-{uuid.uuid4().hex[:8]}.", "app_id": f"sift-{uuid.uuid4().hex[:8]}",
            "partitions": 2, "data_dir": str(tmp_path / "worker")}
        if protocol.startswith("SASL"):
            scram = protocol == "SASL_SSL"
            kw.update(sasl_mechanism="SCRAM-SHA-512" if scram else "PLAIN", sasl_username=USER,
                      sasl_password=SCRAM_PASSWORD if scram else PLAIN_PASSWORD)
        if protocol.endswith("SSL"):
            kw["ssl_cafile"] = str(self.cafile)
        kw.update(overrides)
        return Settings(**kw)


def certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and the broker's PEM keystore (key and
    certificate in one file)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                        "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        unavailable(f"openssl could not make a certificate: {exc}")
    keystore = folder / "keystore.pem"
    keystore.write_bytes(key.read_bytes() + cert.read_bytes())
    return cert, keystore


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    folder = tmp_path_factory.mktemp("secure-kafka")
    cafile, keystore = certificate(folder)
    ports: dict[str, int] = {}
    while len(set(ports.values())) < len(LISTENERS) + 2:
        ports = {name: free_port() for name in (*LISTENERS, "PLAINTEXT", "CONTROLLER")}
    plain = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
             f'user_{USER}="{PLAIN_PASSWORD}";')
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    names = [*LISTENERS, "PLAINTEXT"]  # PLAINTEXT between brokers and for the readiness check
    extra = {
        "listeners": ",".join(f"{n}://127.0.0.1:{ports[n]}" for n in [*names, "CONTROLLER"]),
        "advertised.listeners": ",".join(f"{n}://127.0.0.1:{ports[n]}" for n in names),
        "listener.security.protocol.map": ",".join(f"{n}:{n}" for n in names)
                                          + ",CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
    }
    for listener in ("sasl_ssl", "sasl_plaintext"):
        extra[f"listener.name.{listener}.plain.sasl.jaas.config"] = plain
        extra[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] = scram
    broker = DevBroker(port=ports["PLAINTEXT"], controller_port=ports["CONTROLLER"],
                       data_dir=folder / "data", die_with_parent=True, extra_config=extra,
                       format_args=("--add-scram",
                                    f"SCRAM-SHA-512=[name={USER},password={SCRAM_PASSWORD}]"))
    try:
        broker.start(timeout=120.0)
    except BrokerError as exc:
        unavailable(str(exc))
    try:
        yield SecureBroker(broker, ports, cafile)
    finally:
        broker.stop()


def use(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> None:
    """The command line reads its settings from the environment, as a user's shell gives them."""
    for key, value in settings_env(settings).items():
        monkeypatch.setenv(key, value)


def test_a_worker_and_the_command_line_over_sasl_ssl_with_scram(
    secure: SecureBroker, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    path, train, _ = make_corpus(tmp_path_factory)
    settings = secure.settings("SASL_SSL", tmp_path, idf_corpus=str(path), web_port=free_port(),
                               api_token="web-token-3")
    use(monkeypatch, settings)
    worker = WorkerProcess(settings, "secure").start()
    web = WebProcess(settings, tmp_path / "web.log")
    try:
        worker.wait_ready(120)
        wheat = [d.id for d in train if "wheat" in d.topics][:2]
        capsys.readouterr()
        assert main(["profiles", "add", "wheat", "--query", "wheat grain", "--positive", wheat[0],
                     "--positive", wheat[1], "--wait", "60"]) == 0
        assert "created (rocchio" in capsys.readouterr().out

        docs = [{"id": f"s{i}", "text": t} for i, t in enumerate(
            ["wheat and grain exports rose", "the wheat harvest and grain prices",
             "grain traders bought wheat futures", "bank shares fell"])]
        file = tmp_path / "docs.jsonl"
        file.write_text("".join(orjson.dumps(d).decode() + "\n" for d in docs))
        assert main(["produce", str(file), "--batch", "2"]) == 0
        wait_for(lambda: worker.stats()["stats"].get("documents", 0) >= 4, 60, "documents")
        assert "sent 4 documents" in capsys.readouterr().out

        assert main(["tail", "decisions", "--from-beginning", "--max", "1", "--timeout", "30"]) == 0
        decision = orjson.loads(capsys.readouterr().out.splitlines()[0])
        assert decision["profile"] == "wheat" and decision["doc_id"].startswith("s")

        # sift web reads the decision and publishes a judgment through the secured
        # listener; the worker learns it
        web.start()
        wait_for(web.ready, 60, "sift web")
        wait_for(lambda: any(p["doc_id"] == decision["doc_id"]
                             for p in web.get("/api/pending?profile=wheat")["items"]), 60,
                 "the decision on the judging page")
        body = orjson.dumps({"doc_id": decision["doc_id"], "profile": "wheat", "relevant": True})
        request = urllib.request.Request(web.url + "/api/judgments", data=body, method="POST",
                                         headers={"Authorization": "Bearer web-token-3",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as resp:
            assert resp.status == 202
        wait_for(lambda: worker.stats()["stats"].get("judgments", 0) >= 1, 60, "judgment")
        wait_for(lambda: web.get("/api/profiles/wheat")["learned_judgments"] == 1, 60,
                 "the count the worker learned, on the web")

        def listed() -> list[tuple[str, int]]:
            assert main(["profiles", "list", "--json"]) == 0
            return [(p["profile"], p["judged"]) for p in map(
                orjson.loads, capsys.readouterr().out.splitlines())]

        # the list reads the profile table's changelog, which the worker writes after
        # applying the judgment
        wait_for(lambda: listed() == [("wheat", 1)], 60, "the judged profile in the list")
    finally:
        web.stop()
        worker.stop()
    assert worker.stats()["stats"].get("dead_letters", 0) == 0, worker.log_tail()


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SSL"])
def test_the_command_line_over_plain_sasl_and_over_tls(
    secure: SecureBroker, protocol: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = secure.settings(protocol, tmp_path)
    use(monkeypatch, settings)
    spec = tmp_path / "profiles.jsonl"
    spec.write_text(orjson.dumps({"profile": "gold", "query": "gold"}).decode() + "\n")
    assert main(["produce", str(spec), "--topic", "profiles"]) == 0
    assert main(["tail", "profiles", "--from-beginning", "--max", "1", "--timeout", "30"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert orjson.loads(out[-1])["profile"] == "gold"


def run_cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **settings_env(settings)}
    return subprocess.run([sys.executable, "-m", "sift.cli", *args], env=env, text=True,
                          capture_output=True, timeout=120, check=False)


def test_wrong_security_settings_are_one_line_errors_that_say_what_to_check(
    secure: SecureBroker, tmp_path: Path,
) -> None:
    """kafka-python gives up with "Unable to bootstrap"; the command says why."""
    # refused credentials: the broker's answer names them ("refused the credentials"),
    # unless the connection closes before kafka-python reads it (about one run in seven
    # here), when the hint names the credentials among the suspects
    cases = {
        "wrong password": (secure.settings("SASL_SSL", tmp_path, sasl_password="not-it"),
                           "SIFT_SASL_PASSWORD"),
        "wrong mechanism": (secure.settings("SASL_PLAINTEXT", tmp_path,
                                            sasl_mechanism="SCRAM-SHA-512"),
                            "SIFT_SASL_MECHANISM"),
        "no CA": (secure.settings("SSL", tmp_path, ssl_cafile=""), "SIFT_SSL_CAFILE"),
        "plaintext to a SASL listener": (
            secure.settings("SASL_SSL", tmp_path, security_protocol="PLAINTEXT"),
            "does SIFT_SECURITY_PROTOCOL match this listener"),
    }
    with ThreadPoolExecutor(len(cases)) as pool:  # each waits out the client's 15 s
        runs = dict(zip(cases, pool.map(lambda c: run_cli(c[0], "profiles", "list"),
                                        cases.values()), strict=True))
    for name, (_, expected) in cases.items():
        res = runs[name]
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 1, (name, res.stderr)
        assert len(lines) == 1 and lines[0].startswith("sift profiles: error: cannot connect"), \
            (name, res.stderr)
        assert expected in lines[0], (name, lines[0])
        assert "Traceback" not in res.stderr and "not-it" not in res.stderr
