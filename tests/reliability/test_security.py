"""Security: constant-time token checks, no pickle, secrets kept out of reprs and logs,
SASL/SSL settings reaching the Faust app and every Kafka client sift builds (no broker)."""

from __future__ import annotations

import ast
import asyncio
import logging
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

import sift
from sift import kafkaclient
from sift.agents.app import create_app, faust_credentials
from sift.agents.service import TrainingSet
from sift.settings import Settings
from sift.web.app import create_web_app
from sift.web.feed import aiokafka_config
from sift.web.state import WebState
from tests.web.conftest import Recorder, fill

pytestmark = pytest.mark.reliability

SRC = Path(sift.__file__).resolve().parent
FILES = sorted(SRC.rglob("*.py"))
PASSWORD = "pw-Zq81-never-log-me"
TOKEN = "tok-Kp22-never-log-me"
#: Modules whose use would deserialize code: never imported by sift.
UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle",
                  "joblib", "jsonpickle", "copyreg"}
#: The only places allowed to construct Kafka clients (devbroker: the local PLAINTEXT broker).
CLIENT_FACTORIES = {"kafkaclient.py", "feed.py", "devbroker.py"}
CLIENT_CLASSES = {"KafkaProducer", "KafkaConsumer", "KafkaAdminClient", "AIOKafkaProducer",
                  "AIOKafkaConsumer", "AIOKafkaAdminClient", "AIOKafkaClient", "KafkaClient"}


def trees() -> Iterator[tuple[Path, ast.Module]]:
    for path in FILES:
        yield path, ast.parse(path.read_text(), filename=str(path))


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


# ----------------------------------------------------------------------------- tokens
def test_api_token_is_checked_with_compare_digest() -> None:
    tree = ast.parse((SRC / "web" / "app.py").read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
              and n.name == "authorized")
    calls = {dotted(c.func) for c in ast.walk(fn) if isinstance(c, ast.Call)}
    assert "hmac.compare_digest" in calls


def test_no_token_or_secret_is_compared_with_equality_anywhere() -> None:
    """No ``==``/``!=``/``in`` on anything named like a token, password or secret."""
    secretish = ("token", "password", "secret")
    found = []
    for path, tree in trees():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            if not any(isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn)
                       for op in node.ops):
                continue
            names = [dotted(x).lower() for x in [node.left, *node.comparators]]
            if any(s in n for n in names for s in secretish):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not found, found


def test_authorized_behaviour() -> None:
    from sift.web.app import authorized

    class Req:
        def __init__(self, headers: dict[str, str]) -> None:
            self.headers = headers

    good = {"Authorization": f"Bearer {TOKEN}"}
    assert authorized(Req(good), TOKEN)  # type: ignore[arg-type]
    assert authorized(Req({"X-Sift-Token": TOKEN}), TOKEN)  # type: ignore[arg-type]
    for bad in ({}, {"Authorization": f"Bearer {TOKEN[:-1]}"}, {"Authorization": TOKEN},
                {"Authorization": "Bearer \udcff"}, {"X-Sift-Token": ""}):
        assert not authorized(Req(bad), TOKEN)  # type: ignore[arg-type]
    assert not authorized(Req(good), "")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- no pickle
def test_no_pickle_marshal_or_shelve_anywhere_in_sift() -> None:
    found = []
    for path, tree in trees():
        where = path.relative_to(SRC)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [(node.module or "").split(".")[0]]
            else:
                mods = []
            found += [f"{where}:{node.lineno} import {m}" for m in mods if m in UNSAFE_MODULES]
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    if (kw.arg == "allow_pickle" and isinstance(kw.value, ast.Constant)
                            and kw.value.value):
                        found.append(f"{where}:{node.lineno} allow_pickle=True")
                    if (kw.arg and "serializer" in kw.arg and isinstance(kw.value, ast.Constant)
                            and kw.value.value not in ("raw", "json", None)):
                        found.append(f"{where}:{node.lineno} {kw.arg}={kw.value.value!r}")
                name = dotted(node.func)
                if name.endswith(("pd.read_pickle", "torch.load", "yaml.load")):
                    found.append(f"{where}:{node.lineno} {name}")
    assert not found, found


@pytest.fixture(scope="module")
def training() -> TrainingSet:
    return TrainingSet.load(None)


def test_faust_app_serializes_raw_bytes_only(training: TrainingSet) -> None:
    worker = create_app(Settings(data_dir="/tmp/sift-sec-test"), training=training)
    conf = worker.app.conf
    assert conf.key_serializer == "raw" and conf.value_serializer == "raw"
    for topic in worker.topics.values():
        assert topic.key_serializer == "raw" and topic.value_serializer == "raw"


# ----------------------------------------------------------------------------- secrets
@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A self-signed certificate and key (openssl), used as CA and client certificate.

    Without openssl the tests that take it fail, not skip: it is a requirement of the
    test run (``.ci/run`` installs Debian's ``openssl``)."""
    d = tmp_path_factory.mktemp("certs")
    cert, key = d / "cert.pem", d / "key.pem"
    error = None
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        error = " ".join(str(exc).split())
    if error is not None:  # (outside the except: one line, no chained traceback)
        pytest.fail(f"openssl could not make a test certificate (apt-get install openssl): {error}",
                    pytrace=False)
    return {"ssl_cafile": str(cert), "ssl_certfile": str(cert), "ssl_keyfile": str(key)}


def secure(certs: dict[str, str], protocol: str = "SASL_SSL",
           mechanism: str = "SCRAM-SHA-512") -> Settings:
    return Settings(broker="kafka://kafka.example:9093", security_protocol=protocol,
                    sasl_mechanism=mechanism, sasl_username="alice", sasl_password=PASSWORD,
                    api_token=TOKEN, data_dir="/tmp/sift-sec-test", **certs)


def test_secrets_are_not_in_the_settings_repr(certs: dict[str, str]) -> None:
    s = secure(certs)
    for text in (repr(s), str(s), f"{s}", f"{s!r}"):
        assert PASSWORD not in text and TOKEN not in text
    assert "alice" in repr(s)  # the repr still says who


def test_secrets_are_not_logged_building_the_app_and_clients(
        certs: dict[str, str], training: TrainingSet, caplog: pytest.LogCaptureFixture,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    s = secure(certs)
    recorded = patch_kafka(monkeypatch)
    with caplog.at_level(logging.DEBUG):
        worker = create_app(s, training=training)
        creds = faust_credentials(s)
        logging.getLogger("sift.test").info("settings %r credentials %r app %r", s, creds,
                                            worker.app.conf.broker_credentials)
        kafkaclient.producer(s)
        kafkaclient.consumer(s, "t")
        kafkaclient.admin(s)
    assert len(recorded) == 3
    text = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records)
    out = capsys.readouterr()
    assert "credentials" in text
    for blob in (text, out.out, out.err, repr(creds)):
        assert PASSWORD not in blob and TOKEN not in blob


def test_the_token_is_never_logged_by_the_web_app(caplog: pytest.LogCaptureFixture) -> None:
    state = WebState()
    fill(state, "earn", 2)
    settings = Settings(topic_prefix="t.", api_token=TOKEN)

    async def main() -> None:
        app = create_web_app(state, settings, Recorder())
        async with TestClient(TestServer(app)) as client:
            for headers in ({"Authorization": f"Bearer {TOKEN}"},
                            {"Authorization": f"Bearer {TOKEN}x"}, {"X-Sift-Token": TOKEN}):
                for body in (b"{bad", orjson.dumps({"doc_id": "d0", "profile": "earn",
                                                    "relevant": True})):
                    resp = await client.post("/api/judgments", data=body, headers=headers)
                    assert TOKEN not in await resp.text()
            resp = await client.post("/api/profiles", json={"profile": "x", "query": TOKEN},
                                     headers={"Authorization": f"Bearer {TOKEN}"})
            assert resp.status == 202

    with caplog.at_level(logging.DEBUG):
        asyncio.run(main())
    logged = [r for r in caplog.records if r.name.startswith(("sift", "aiohttp"))]
    assert logged
    # the query text is the caller's data, not the credential; only headers matter here
    for r in logged:
        msg = r.getMessage()
        assert f"Bearer {TOKEN}" not in msg and "X-Sift-Token" not in msg


# ----------------------------------------------------------------------------- SASL / SSL
def patch_kafka(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Replace kafka-python's client classes by recorders; the list of (class, kwargs)."""
    import kafka

    recorded: list[tuple[str, dict[str, Any]]] = []

    def recorder(name: str) -> type:
        class Rec:
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                recorded.append((name, kwargs))

        return Rec

    for name in ("KafkaProducer", "KafkaConsumer", "KafkaAdminClient"):
        monkeypatch.setattr(kafka, name, recorder(name))
    return recorded


@pytest.mark.parametrize(("protocol", "mechanism"), [
    ("SASL_SSL", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SSL", ""), ("SASL_PLAINTEXT", ""),
])
def test_security_settings_reach_every_kafka_python_client(
        certs: dict[str, str], monkeypatch: pytest.MonkeyPatch, protocol: str,
        mechanism: str) -> None:
    s = secure(certs, protocol, mechanism)
    recorded = patch_kafka(monkeypatch)
    kafkaclient.producer(s)
    kafkaclient.consumer(s, "topic", group_id="g")
    kafkaclient.admin(s)
    assert [n for n, _ in recorded] == ["KafkaProducer", "KafkaConsumer", "KafkaAdminClient"]
    for _, kw in recorded:
        assert kw["bootstrap_servers"] == ["kafka.example:9093"]
        assert kw["security_protocol"] == protocol
        if protocol.startswith("SASL"):
            assert kw["sasl_mechanism"] == (mechanism or "PLAIN")
            assert kw["sasl_plain_username"] == "alice"
            assert kw["sasl_plain_password"] == PASSWORD
        for key, value in certs.items():
            assert kw[key] == value


@pytest.mark.parametrize(("protocol", "mechanism"), [
    ("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN"), ("SSL", ""), ("PLAINTEXT", ""),
])
def test_security_settings_reach_the_faust_app_and_the_web_clients(
        certs: dict[str, str], training: TrainingSet, protocol: str, mechanism: str) -> None:
    from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

    s = secure(certs, protocol, mechanism)
    worker = create_app(s, training=training)
    conf = worker.app.conf
    consumer_auth = credentials_to_aiokafka_auth(conf.broker_credentials, conf.ssl_context)
    producer_auth = worker.app.producer._settings_auth()  # what Faust's producer is built with
    web_auth = aiokafka_config(s)  # `sift web`'s producer, consumer and admin client
    for auth in (consumer_auth, producer_auth, web_auth):
        assert auth["security_protocol"] == protocol, auth
        if protocol.startswith("SASL"):
            assert auth["sasl_mechanism"] == (mechanism or "PLAIN")
            assert auth["sasl_plain_username"] == "alice"
            assert auth["sasl_plain_password"] == PASSWORD
        if protocol.endswith("SSL"):
            ctx = auth["ssl_context"]
            assert isinstance(ctx, ssl.SSLContext) and ctx.verify_mode == ssl.CERT_REQUIRED
            # the CA file was loaded (our self-signed certificate is the only extra CA)
            assert any(c.get("subject") == ((("commonName", "localhost"),),)
                       for c in ctx.get_ca_certs())
        else:
            assert auth.get("ssl_context") is None


def test_kafka_clients_are_built_only_by_the_configured_factories() -> None:
    """Every Kafka client construction in sift goes through a function that applies the
    security settings (kafkaclient.py, web/feed.py), except the local dev broker's check."""
    found = []
    for path, tree in trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and dotted(node.func).split(".")[-1] in CLIENT_CLASSES:
                if path.name not in CLIENT_FACTORIES:
                    found.append(f"{path.relative_to(SRC)}:{node.lineno}")
                elif path.name != "devbroker.py":
                    spread = [k.value for k in node.keywords if k.arg is None]
                    assert spread, f"{path.name}:{node.lineno} passes no **config"
                    names = {dotted(c.func) for v in spread for c in ast.walk(v)
                             if isinstance(c, ast.Call)} | {dotted(v) for v in spread}
                    assert names & {"client_config", "aiokafka_config", "cfg"}, (
                        f"{path.name}:{node.lineno}", names)
    assert not found, found


def test_unknown_security_protocol_is_refused() -> None:
    # refused when the settings are read, before any client (the CLI's kafka-python
    # clients took a misspelt protocol for PLAINTEXT)
    from sift.errors import ConfigError

    with pytest.raises(ConfigError, match="SIFT_SECURITY_PROTOCOL must be one of"):
        Settings(security_protocol="TLS")
    for protocol in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        assert Settings(security_protocol=protocol).security_protocol == protocol
