"""The frozen settings object: environment parsing and validation."""

from __future__ import annotations

import pytest

from sift.errors import ConfigError
from sift.settings import Settings


def test_environment_values_are_parsed_by_the_field_type() -> None:
    s = Settings.from_env({"SIFT_PARTITIONS": "8", "SIFT_JUDGMENT_BATCH_TIMEOUT": "0.5",
                           "SIFT_LOG_JSON": "yes", "SIFT_TOPIC_PREFIX": "x.", "OTHER": "1"})
    assert (s.partitions, s.judgment_batch_timeout, s.log_json, s.topic_prefix) == (8, 0.5, True,
                                                                                    "x.")
    assert s.topic("documents") == "x.documents"
    assert Settings.from_env({}, partitions=2, app_id=None).partitions == 2
    s = Settings.from_env({"SIFT_SESSION_TIMEOUT": "9", "SIFT_HEARTBEAT_INTERVAL": "3"})
    assert (s.session_timeout, s.heartbeat_interval) == (9.0, 3.0)  # a third exactly is fine


@pytest.mark.parametrize(("env", "match"), [
    ({"SIFT_PARTITIONS": "four"}, "SIFT_PARTITIONS must be an integer, got 'four'"),
    ({"SIFT_LOG_JSON": "maybe"}, "SIFT_LOG_JSON must be a boolean"),
    ({"SIFT_BATCH_SIZE": "0"}, r"SIFT_BATCH_SIZE must be in \[1, 1000000\], got 0"),
    ({"SIFT_BATCH_BYTES": "0"}, r"SIFT_BATCH_BYTES must be in \[1, 2147483647\], got 0"),
    ({"SIFT_JUDGMENT_BATCH_SIZE": "-5"}, r"SIFT_JUDGMENT_BATCH_SIZE must be in \[1, "),
    ({"SIFT_BATCH_TIMEOUT": "0"}, "SIFT_BATCH_TIMEOUT must be a positive number"),
    ({"SIFT_STOP_TIMEOUT": "-1"}, "SIFT_STOP_TIMEOUT must be a positive number"),
    ({"SIFT_JUDGMENT_BATCH_TIMEOUT": "nan"}, "SIFT_JUDGMENT_BATCH_TIMEOUT must be a positive"),
    ({"SIFT_JUDGMENT_BATCH_TIMEOUT": "inf"}, "SIFT_JUDGMENT_BATCH_TIMEOUT must be a positive"),
    ({"SIFT_FETCH_MAX_WAIT_MS": "0"}, r"SIFT_FETCH_MAX_WAIT_MS must be in \[1, 300000\], got 0"),
    ({"SIFT_TRUNCATE": "-1"}, "SIFT_TRUNCATE must be >= 0"),
    ({"SIFT_CHARS": "1"}, r"SIFT_CHARS must be in \[0, 1\)"),
    ({"SIFT_CHARS": "-0.1"}, r"SIFT_CHARS must be in \[0, 1\)"),
    ({"SIFT_CHARS": "x"}, "SIFT_CHARS must be a number"),
    ({"SIFT_SESSION_TIMEOUT": "0"}, "SIFT_SESSION_TIMEOUT must be a positive number"),
    ({"SIFT_HEARTBEAT_INTERVAL": "nan"}, "SIFT_HEARTBEAT_INTERVAL must be a positive number"),
    ({"SIFT_SESSION_TIMEOUT": "6"},
     r"SIFT_HEARTBEAT_INTERVAL must be at most a third of SIFT_SESSION_TIMEOUT \(6.0 s\), got 3.0"),
    ({"SIFT_SESSION_TIMEOUT": "10", "SIFT_HEARTBEAT_INTERVAL": "4"},
     "SIFT_HEARTBEAT_INTERVAL must be at most a third"),
    # found by breaking the settings on purpose (thirty-seventh session)
    ({"SIFT_BROKER": " "}, "SIFT_BROKER is empty"),
    ({"SIFT_APP_ID": ""}, "SIFT_APP_ID is empty"),
    ({"SIFT_SESSION_TIMEOUT": "3600"}, r"SIFT_SESSION_TIMEOUT must be in \[6, 1800\] seconds"),
    ({"SIFT_PARTITIONS": "99999999999999999999999"}, r"SIFT_PARTITIONS must be in \[1, 10000\]"),
    ({"SIFT_FETCH_MAX_WAIT_MS": "99999999999"}, r"SIFT_FETCH_MAX_WAIT_MS must be in \[1, 300000\]"),
    ({"SIFT_MAX_DOCUMENT_BYTES": "0"}, r"SIFT_MAX_DOCUMENT_BYTES must be in \[1, "),
    ({"SIFT_RECENT_DOCUMENTS": "-1"}, r"SIFT_RECENT_DOCUMENTS must be in \[0, "),
    ({"SIFT_WEB_PORT": "70000"}, r"SIFT_WEB_PORT must be a port in \[1, 65535\], got 70000"),
    ({"SIFT_LOG_LEVEL": "bogus"}, "SIFT_LOG_LEVEL must be one of DEBUG, INFO"),
    ({"SIFT_PROCESSING_GUARANTEE": "bogus"}, "SIFT_PROCESSING_GUARANTEE must be one of at_least_once"),
    ({"SIFT_SECURITY_PROTOCOL": "SASL-SSL"}, "SIFT_SECURITY_PROTOCOL must be one of PLAINTEXT, SSL"),
    ({"SIFT_JOURNAL": ""}, "SIFT_JOURNAL must be a boolean"),
    # forty-first session: another scheme ended in a TypeError traceback from Faust's
    # transport lookup, no scheme in a DNS failure
    ({"SIFT_BROKER": "http://127.0.0.1:9092"},
     r"SIFT_BROKER must be kafka://HOST:PORT \(several separated by ';'\), got 'http://127.0.0.1:9092'"),
    ({"SIFT_BROKER": "127.0.0.1:9092"}, "SIFT_BROKER must be kafka://HOST:PORT"),
    ({"SIFT_BROKER": "kafka://a:1;kafka://"}, "got 'kafka://'"),
    ({"SIFT_REPLICATION_FACTOR": "0"}, r"SIFT_REPLICATION_FACTOR must be in \[1, 32767\], got 0"),
])
def test_bad_values_raise_one_clear_error(env: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Settings.from_env(env)


@pytest.mark.parametrize("url", ["kafka://a:1", "kafka://a:1;kafka://b:2", "aiokafka://a:1",
                                 "KAFKA://a:1/", "kafka://a:1,kafka://b:2;"])
def test_broker_urls_faust_and_kafka_python_take_are_accepted(url: str) -> None:
    assert Settings.from_env({"SIFT_BROKER": url}).broker == url


def test_a_lower_case_log_level_is_fine() -> None:
    assert Settings.from_env({"SIFT_LOG_LEVEL": "debug"}).log_level == "DEBUG"


def test_the_protocol_and_the_guarantee_are_taken_in_any_case() -> None:
    """``SIFT_SECURITY_PROTOCOL=sasl_ssl`` was refused, while the clients upper-case it and
    ``SIFT_LOG_LEVEL`` and ``SIFT_SASL_MECHANISM`` were taken in any case (forty-ninth
    session); each is kept in the case its client takes."""
    s = Settings.from_env({"SIFT_SECURITY_PROTOCOL": "sasl_ssl",
                           "SIFT_PROCESSING_GUARANTEE": "Exactly_Once"})
    assert (s.security_protocol, s.processing_guarantee) == ("SASL_SSL", "exactly_once")
    with pytest.raises(ConfigError, match="SIFT_SECURITY_PROTOCOL must be one of"):
        Settings(security_protocol="tls")


def test_settings_are_frozen() -> None:
    s = Settings()
    with pytest.raises(AttributeError):
        s.partitions = 3  # type: ignore[misc]


def test_every_setting_is_in_the_documented_table() -> None:
    """docs/streaming.md lists every ``SIFT_*`` variable (and no other) in its settings table."""
    import re
    from dataclasses import fields
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "streaming.md").read_text()
    start = doc.index("Every setting comes from the environment")
    table = doc[start:doc.index("\n\n", doc.index("| --- |", start))]
    documented = set(re.findall(r"`(SIFT_[A-Z_]+)`", table))
    assert documented == {f"SIFT_{f.name.upper()}" for f in fields(Settings)}
