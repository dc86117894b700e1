"""Operations audit (forty-fourth session): settings refused when they are read, naming the
variable (topic prefix and app id Kafka would refuse, SASL mechanisms, certificate files,
broker ports), the worker's data directory and training corpus checked before any topic is
created, ``sift web`` creating no topic, and names printed escaped on the terminal.
No broker: every Kafka client is replaced."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

from sift.cli import main
from sift.errors import ConfigError, SiftError
from sift.settings import Settings


# ----------------------------------------------------------------------------- 6, 7: names
@pytest.mark.parametrize(("env", "match"), [
    ({"SIFT_APP_ID": "bad id/"},
     r"SIFT_APP_ID must hold only ASCII letters, digits, '.', '_' and '-' \(got 'bad id/'\)"),
    ({"SIFT_APP_ID": "caf\u00e9"}, "SIFT_APP_ID must hold only ASCII letters"),
    ({"SIFT_APP_ID": " sift"}, "SIFT_APP_ID must hold only ASCII letters"),
    ({"SIFT_TOPIC_PREFIX": "bad prefix/"},
     r"SIFT_TOPIC_PREFIX must hold only ASCII letters, digits, '.', '_' and '-' \(got 'bad prefix/'\)"),
    ({"SIFT_TOPIC_PREFIX": "x\n."}, "SIFT_TOPIC_PREFIX must hold only ASCII letters"),
    ({"SIFT_TOPIC_PREFIX": "p" * 260}, r"SIFT_TOPIC_PREFIX must be at most 233 characters .*got 260"),
    ({"SIFT_TOPIC_PREFIX": "p" * 234}, r"SIFT_TOPIC_PREFIX must be at most 233 characters"),
    ({"SIFT_APP_ID": "a" * 221}, r"SIFT_APP_ID must be at most 220 characters .*got 221"),
])
def test_names_kafka_would_refuse_are_refused_naming_the_variable(env: dict[str, str],
                                                                  match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        Settings.from_env(env)
    assert "\n" not in str(info.value).replace("\\n", "")


def test_the_longest_names_kafka_takes_are_accepted() -> None:
    s = Settings.from_env({"SIFT_TOPIC_PREFIX": "p" * 233, "SIFT_APP_ID": "a" * 220})
    assert len(s.topic("review-documents")) == 249
    assert Settings.from_env({"SIFT_TOPIC_PREFIX": ""}).topic("documents") == "documents"
    assert Settings.from_env({"SIFT_APP_ID": "Ops-44_x.y"}).app_id == "Ops-44_x.y"


def test_the_length_limits_cover_every_topic_sift_creates() -> None:
    """The settings hold the longest logical topic name and app-id topic suffix (they do not
    import the Faust app): every topic and table of the app must fit them."""
    from sift.agents import app, review
    from sift.settings import LONGEST_APP_TOPIC_SUFFIX, LONGEST_TOPIC

    logical = [*app.WIRE_TOPICS, app.SHARD_TOPIC, *review.REVIEW_WIRE_TOPICS,
               review.REVIEW_DOCUMENTS_TOPIC]
    assert max(map(len, logical)) == len(LONGEST_TOPIC) and LONGEST_TOPIC in logical
    suffixes = [f"-{t}-changelog" for t in (app.TABLE, app.JOURNAL_TABLE, review.REVIEW_TABLE)]
    suffixes.append("-__assignor-__leader")  # Faust's own
    assert max(map(len, suffixes)) == len(LONGEST_APP_TOPIC_SUFFIX)
    assert LONGEST_APP_TOPIC_SUFFIX in suffixes


# ----------------------------------------------------------------------------- 8: security
@pytest.mark.parametrize("mechanism", ["", "PLAIN", "plain", "SCRAM-SHA-256", "SCRAM-SHA-512",
                                       "GSSAPI"])
def test_the_documented_sasl_mechanisms_are_accepted(mechanism: str) -> None:
    assert Settings.from_env({"SIFT_SASL_MECHANISM": mechanism}).sasl_mechanism == mechanism


@pytest.mark.parametrize("mechanism", ["FOO", "SCRAM-SHA-1", " PLAIN"])
def test_another_sasl_mechanism_is_refused(mechanism: str) -> None:
    with pytest.raises(ConfigError, match=r"SIFT_SASL_MECHANISM must be one of PLAIN, "
                                          r"SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI \(or empty\), got "
                                          + repr(mechanism).replace("\\", "\\\\")):
        Settings.from_env({"SIFT_SASL_MECHANISM": mechanism})


@pytest.mark.parametrize("name", ["SIFT_SSL_CAFILE", "SIFT_SSL_CERTFILE", "SIFT_SSL_KEYFILE"])
def test_a_certificate_file_that_is_not_there_is_refused_naming_the_variable(
        name: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=rf"{name} '/nonexistent.pem': no such file"):
        Settings.from_env({name: "/nonexistent.pem"})
    with pytest.raises(ConfigError, match=rf"{name} '{tmp_path}' is not a file"):
        Settings.from_env({name: str(tmp_path)})
    pem = tmp_path / "x.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n")
    assert getattr(Settings.from_env({name: str(pem)}), name[5:].lower()) == str(pem)


def test_an_unreadable_certificate_file_is_refused(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pem = tmp_path / "x.pem"
    pem.write_text("x")
    # the tests may run as root, who reads any file: the permission check is what fails
    monkeypatch.setattr(os, "access", lambda path, mode: path != str(pem))
    with pytest.raises(ConfigError, match=rf"SIFT_SSL_CAFILE '{pem}' cannot be read"):
        Settings.from_env({"SIFT_SSL_CAFILE": str(pem)})


def test_a_listener_that_does_not_speak_sasl_names_the_protocol_and_mechanism() -> None:
    """``IllegalSaslStateError`` (a SASL client on a PLAINTEXT listener, or a mechanism the
    listener does not take) said nothing else."""
    from kafka.errors import IllegalSaslStateError, KafkaTimeoutError

    from sift.kafkaclient import KafkaClientError, _connect, failure_reason

    why = failure_reason(["IllegalSaslStateError"], sasl=True)
    assert why is not None and why.startswith("IllegalSaslStateError (")
    assert "SIFT_SECURITY_PROTOCOL" in why and "SIFT_SASL_MECHANISM" in why
    s = Settings(security_protocol="SASL_PLAINTEXT")

    def logged_then_timeout() -> None:
        logging.getLogger("kafka.net.manager").error("Connection failed: [Error 34] "
                                                     "IllegalSaslStateError")
        raise KafkaTimeoutError("Unable to bootstrap")

    def raised() -> None:
        raise IllegalSaslStateError()

    for make in (logged_then_timeout, raised):
        with pytest.raises(KafkaClientError) as info:
            _connect(s, make)
        text = str(info.value)
        assert "IllegalSaslStateError" in text and "SIFT_SECURITY_PROTOCOL" in text, text
        assert "SIFT_SASL_MECHANISM" in text and "\n" not in text


# ----------------------------------------------------------------------------- 9: broker ports
@pytest.mark.parametrize(("url", "port"), [
    ("kafka://127.0.0.1:abc", "abc"), ("kafka://127.0.0.1:99999", "99999"),
    ("kafka://h:0", "0"), ("kafka://a:1;kafka://b:65536", "65536"),
    ("kafka://h:\uff15", "\uff15"), ("kafka://h:", ""), ("kafka://[::1]:x", "x"),
])
def test_a_broker_port_that_is_not_a_port_is_refused(url: str, port: str) -> None:
    with pytest.raises(ConfigError, match=rf"SIFT_BROKER port {port!r} of .* is not a port in "
                                          r"\[1, 65535\]"):
        Settings.from_env({"SIFT_BROKER": url})


@pytest.mark.parametrize("url", ["kafka://h", "kafka://h:1", "kafka://h:65535/",
                                 "kafka://[::1]:9092", "kafka://[::1]"])
def test_broker_ports_in_range_or_none_are_accepted(url: str) -> None:
    assert Settings.from_env({"SIFT_BROKER": url}).broker == url


# ----------------------------------------------------------------------------- 6, 9: the worker
@pytest.fixture
def no_topics(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``prepare_topics`` recorded and stopping the worker there (no broker)."""
    import sift.agents.app as app

    calls: list[str] = []

    def prepare(settings: Settings) -> None:
        calls.append(settings.topic_prefix)
        raise SiftError("prepare_topics reached")

    monkeypatch.setattr(app, "prepare_topics", prepare)
    monkeypatch.setenv("SIFT_BROKER", "kafka://127.0.0.1:1")
    return calls


def test_a_data_dir_that_cannot_be_a_directory_is_refused_before_any_topic(
        no_topics: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    monkeypatch.setenv("SIFT_DATA_DIR", str(afile / "sub"))
    assert main(["worker"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"sift worker: error: SIFT_DATA_DIR '{afile / 'sub'}' is not a "
                          "writable directory") and err.count("\n") == 1, err
    assert no_topics == []
    monkeypatch.setenv("SIFT_DATA_DIR", str(afile))
    assert main(["worker"]) == 1
    assert "SIFT_DATA_DIR" in capsys.readouterr().err and no_topics == []


def test_check_data_dir_makes_the_directory_and_leaves_nothing_in_it(tmp_path: Path) -> None:
    from sift.commands.worker import check_data_dir

    target = tmp_path / "a" / "b"
    check_data_dir(str(target))
    assert target.is_dir() and list(target.iterdir()) == []


def test_a_data_dir_that_cannot_be_written_is_refused(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from sift.commands.worker import check_data_dir

    def refused(**kw: Any) -> Any:  # the tests may run as root, who writes anywhere
        raise PermissionError(13, "Permission denied", str(kw.get("dir")))

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with pytest.raises(SiftError, match=rf"^SIFT_DATA_DIR '{tmp_path}' is not a writable "
                                        r"directory: Permission denied$"):
        check_data_dir(str(tmp_path))


def test_training_corpus_errors_name_the_variable_and_the_bad_line(
        no_topics: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SIFT_DATA_DIR", str(tmp_path / "w"))
    monkeypatch.setenv("SIFT_IDF_CORPUS", str(tmp_path / "nonexistent.jsonl"))
    assert main(["worker"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"sift worker: error: SIFT_IDF_CORPUS {tmp_path / 'nonexistent.jsonl'}"
                          ": no such file") and err.count("\n") == 1, err
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n" + '{"id": "a"}\n' + "not json\n")
    monkeypatch.setenv("SIFT_IDF_CORPUS", str(bad))
    assert main(["worker"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"sift worker: error: SIFT_IDF_CORPUS {bad}: no documents") and (
        f"{bad}:2:" in err) and err.count("\n") == 1, err
    assert no_topics == []  # refused before any topic was created


def test_a_good_training_corpus_reaches_the_topics(no_topics: list[str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text('{"id": "a", "text": "wheat grain"}\n{"id": "b", "text": "oil"}\n')
    monkeypatch.setenv("SIFT_DATA_DIR", str(tmp_path / "w"))
    monkeypatch.setenv("SIFT_IDF_CORPUS", str(good))
    assert main(["worker"]) == 1
    assert "prepare_topics reached" in capsys.readouterr().err and no_topics == ["sift."]


# ----------------------------------------------------------------------------- 12: sift web
def test_sift_web_creates_no_topic_and_warns_when_the_workers_are_not_there(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import sift.kafkaclient as kc
    import sift.web.feed as feed
    from sift.commands.web import serve

    created: list[Any] = []
    surveyed: list[list[str]] = []

    def survey(settings: Settings, names: list[str]) -> tuple[list[str], bool | None]:
        surveyed.append(list(names))
        return list(names), False  # nothing there: a misspelt prefix and app id

    async def refuse(self: Any) -> None:
        raise ConnectionError("stop here")

    monkeypatch.setattr(kc, "ensure_topics", lambda *a, **k: created.append(a))
    monkeypatch.setattr(kc, "topic_survey", survey, raising=False)
    monkeypatch.setattr(feed.KafkaPublisher, "start", refuse)
    monkeypatch.setattr(feed.KafkaFeed, "start", refuse)
    with caplog.at_level(logging.WARNING, logger="sift.web"), \
            pytest.raises(SiftError, match="cannot connect"):
        asyncio.run(serve(Settings(topic_prefix="typo.", app_id="typo")))
    assert created == []
    assert "typo.documents" in surveyed[0] and "typo-profile_to_state-changelog" in surveyed[0]
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "typo.documents" in text and "typo-profile_to_state-changelog" in text
    assert "SIFT_TOPIC_PREFIX='typo.'" in text and "SIFT_APP_ID='typo'" in text
    assert "has committed no offsets" in text


def test_sift_web_is_quiet_when_the_workers_topics_and_group_are_there(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import sift.kafkaclient as kc
    import sift.web.feed as feed
    from sift.commands.web import serve

    async def refuse(self: Any) -> None:
        raise ConnectionError("stop here")

    monkeypatch.setattr(kc, "topic_survey", lambda settings, names: ([], True), raising=False)
    monkeypatch.setattr(feed.KafkaPublisher, "start", refuse)
    monkeypatch.setattr(feed.KafkaFeed, "start", refuse)
    with caplog.at_level(logging.WARNING, logger="sift.web"), pytest.raises(SiftError):
        asyncio.run(serve(Settings()))
    assert [r for r in caplog.records if r.name == "sift.web"] == []


class FakeAdmin:
    """aiokafka's admin client: the group's committed offsets and the topics."""

    committed: ClassVar[dict[Any, Any]] = {}
    topics: ClassVar[list[str]] = []

    def __init__(self, **kw: Any) -> None:
        pass

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def list_consumer_group_offsets(self, group: str) -> dict[Any, Any]:
        return dict(self.committed)

    async def list_topics(self) -> list[str]:
        return list(self.topics)


def test_the_lag_says_when_the_group_has_nothing_or_the_changelog_is_missing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import aiokafka.admin
    from kafka.structs import OffsetAndMetadata, TopicPartition

    from sift.web.feed import KafkaFeed
    from sift.web.state import WebState

    monkeypatch.setattr(aiokafka.admin, "AIOKafkaAdminClient", FakeAdmin)
    settings = Settings(topic_prefix="p.", app_id="grp")
    state = WebState()
    feed = KafkaFeed(settings, state)
    FakeAdmin.topics = ["p.documents"]
    FakeAdmin.committed = {}
    with pytest.raises(ConfigError, match=r"topic grp-profile_to_state-changelog does not "
                                           r"exist: no worker with SIFT_APP_ID='grp'"):
        asyncio.run(feed.lag())
    FakeAdmin.topics = ["p.documents", "grp-profile_to_state-changelog"]
    with pytest.raises(RuntimeError, match=r"the workers' group 'grp' \(SIFT_APP_ID\) has "
                                           r"committed no offsets on p\.documents"):
        asyncio.run(feed.lag())
    # offsets of other topics only: another prefix's
    FakeAdmin.committed = {TopicPartition("q.documents", 0): OffsetAndMetadata(5, "", -1)}
    with pytest.raises(ConfigError, match=r"SIFT_TOPIC_PREFIX='p\.'"):
        asyncio.run(feed.lag())
    FakeAdmin.committed = {TopicPartition("p.documents", 0): OffsetAndMetadata(5, "", -1)}
    monkeypatch.setattr(feed, "_end_offsets", lambda tps: {("p.documents", 0): 7})
    assert asyncio.run(feed.lag()) == {"documents": 2}


def test_the_feed_subscribes_by_pattern_so_no_missing_topic_is_auto_created(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A subscription by name asks the broker for the topic's metadata, which creates it
    (with the broker's partitions) where ``auto.create.topics.enable`` is on."""
    import re

    import aiokafka

    from sift.web.feed import KafkaFeed
    from sift.web.state import WebState

    seen: dict[str, Any] = {}

    class FakeConsumer:
        def __init__(self, **kw: Any) -> None:
            pass

        async def start(self) -> None:
            pass

        async def stop(self) -> None:
            pass

        def subscribe(self, topics: Any = (), pattern: Any = None) -> None:
            seen.update(topics=topics, pattern=pattern)

        async def getmany(self, **kw: Any) -> dict[Any, Any]:
            await asyncio.sleep(10)
            return {}

    monkeypatch.setattr(aiokafka, "AIOKafkaConsumer", FakeConsumer)
    feed = KafkaFeed(Settings(topic_prefix="p.x", app_id="a.b"), WebState())

    async def go() -> None:
        feed._lag_loop = lambda: asyncio.sleep(0)  # type: ignore[method-assign]
        await feed.start()
        await feed.stop()

    asyncio.run(go())
    assert not seen["topics"]
    pattern = re.compile(seen["pattern"])
    for topic in feed.topics:
        assert pattern.match(topic), topic
    for other in ("p.xdocumentsX", "pyxdocuments", "a.b-profile_to_state-changelog2",
                  "aXb-profile_to_state-changelog", "q.documents"):
        assert not pattern.match(other), other


def test_the_publisher_refuses_a_topic_that_does_not_exist(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Sending to a missing topic would have the broker create it (auto-creation) with the
    wrong partitions, or wait out the time-out: the web creates no topic."""
    from sift.web.feed import KafkaPublisher

    sent: list[str] = []

    class Cluster:
        def topics(self) -> set[str]:
            return {"p.judgments"}

    class Client:
        async def fetch_all_metadata(self) -> Cluster:
            return Cluster()

    class Producer:
        client = Client()

        async def send_and_wait(self, topic: str, value: bytes, key: bytes) -> None:
            sent.append(topic)

    pub = KafkaPublisher(Settings(topic_prefix="p."))
    pub.producer = Producer()
    asyncio.run(pub.send("p.judgments", b"k", b"v"))
    with pytest.raises(RuntimeError, match=r"topic p\.profiles does not exist .*"
                                           r"SIFT_TOPIC_PREFIX='p\.'"):
        asyncio.run(pub.send("p.profiles", b"k", b"v"))
    assert sent == ["p.judgments"]


# ----------------------------------------------------------------------------- 13: terminal
NASTY = "new\nline\x1b[31mred\x07\x7f\u202e"


def test_profiles_list_escapes_what_is_not_printable(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import sift.commands.profiles as profiles

    rows = [{"profile": NASTY, "model": "rocchio", "bags": 1, "update": "every", "measure": "f1",
             "threshold": 0.25, "model_version": 2, "judged": 3, "waiting": 0, "shard": 1},
            {"profile": "bad\x1b]0;x\x07", "error": "unreadable state"}]
    monkeypatch.setattr(profiles, "list_profiles", lambda settings: rows)
    monkeypatch.setenv("SIFT_BROKER", "kafka://127.0.0.1:1")
    assert main(["profiles", "list"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) == 4 and lines[-1] == "2 profiles"
    assert lines[1].startswith("new\\nline\\x1b[31mred\\x07\\x7f\\u202e ")
    assert lines[2].startswith("bad\\x1b]0;x\\x07 ")
    for ch in "\x1b\x07\x7f\u202e":
        assert ch not in out
    assert main(["profiles", "list", "--json"]) == 0
    out = capsys.readouterr().out
    assert [orjson.loads(line)["profile"] for line in out.splitlines()] == [NASTY, rows[1]["profile"]]
    for ch in "\x1b\x07\x7f\u202e":
        assert ch not in out


def test_review_status_escapes_what_is_not_printable(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import sift.commands.review as review_cmd
    from sift.topics.review import ReviewStatus

    fields = {f: 0 for f in ReviewStatus.__dataclass_fields__}
    fields.update(review=NASTY, estimator="bound", target_recall=0.95, stop=False,
                  complete=False, recall_estimate=None, ts=1.0)
    st = ReviewStatus(**fields)  # type: ignore[arg-type]
    line = review_cmd.describe(st)
    assert line.startswith("new\\nline\\x1b[31mred\\x07\\x7f\\u202e: ")
    monkeypatch.setattr(review_cmd, "statuses", lambda settings: {NASTY: st})
    monkeypatch.setenv("SIFT_BROKER", "kafka://127.0.0.1:1")
    for argv in (["review", "status"], ["review", "status", "--json"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert out.count("\n") == 1
        for ch in "\x1b\x07\x7f\u202e":
            assert ch not in out
    assert orjson.loads(out)["review"] == NASTY


def test_printable_leaves_ordinary_names_alone() -> None:
    from sift.commands._common import printable

    for name in ("earn", "wil son/x", "caf\u00e9 \u00fcber", "a\\b", "\u4e2d\u6587"):
        assert printable(name) == name
    assert printable("a\tb\x00") == "a\\tb\\x00"
