"""The one place sift reads its environment.

:class:`Settings` is frozen; build it with :meth:`Settings.from_env` at start-up
and pass it down. Nothing else in sift reads ``os.environ`` (two exceptions, both
outside the service's settings: :mod:`sift.devbroker` reads the JVM's own
``JAVA_HOME``, and the test harness hands its environment to the worker processes it
starts; ``tests/unit/test_static_checks.py`` holds the list).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from sift.errors import ConfigError

_PREFIX = "SIFT_"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: the SASL mechanisms docs/streaming.md lists (any case; empty: PLAIN under SASL)
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI")
#: what Kafka takes in a topic name, and its longest
_TOPIC_CHARS = re.compile(r"[A-Za-z0-9._-]*")
MAX_TOPIC_NAME = 249
#: the longest logical topic name after ``SIFT_TOPIC_PREFIX`` and the longest topic name
#: after ``SIFT_APP_ID`` (a table's changelog; Faust's ``-__assignor-__leader`` is
#: shorter), kept here so that the settings need not import the Faust app (a unit test
#: checks them against ``sift.agents``)
LONGEST_TOPIC = "review-documents"
LONGEST_APP_TOPIC_SUFFIX = "-profile_to_journal-changelog"


def _parse_bool(name: str, value: str) -> bool:
    low = value.strip().lower()
    if low in {"1", "true", "yes", "on"}:
        return True
    if low in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name} must be a boolean (true/false), got {value!r}")


def _check_topic_part(name: str, value: str, longest: str) -> None:
    """``value`` (``SIFT_TOPIC_PREFIX`` before, or ``SIFT_APP_ID`` beside, a name as long
    as ``longest``) makes topic names Kafka takes: its characters and their length."""
    if not _TOPIC_CHARS.fullmatch(value):
        shown = repr(value) if len(value) <= 100 else f"{value[:100]!r}... ({len(value)} characters)"
        raise ConfigError(f"{name} must hold only ASCII letters, digits, '.', '_' and '-' "
                          f"(got {shown})")
    most = MAX_TOPIC_NAME - len(longest)
    if len(value) > most:
        raise ConfigError(f"{name} must be at most {most} characters (the topic "
                          f"'<{name}>{longest}' must fit Kafka's {MAX_TOPIC_NAME}), got "
                          f"{len(value)}")


def _check_broker_port(url: str) -> None:
    """The port of one broker URL, if it has one, is an integer in [1, 65535]."""
    host = url.strip().partition("://")[2].rstrip("/")
    if host.startswith("["):  # [IPv6] or [IPv6]:port
        rest = host.partition("]")[2]
        if not rest:
            return
        port = rest.removeprefix(":")
    else:
        _, sep, port = host.rpartition(":")
        if not sep:
            return
    if not (port.isascii() and port.isdigit() and len(port) <= 5 and 1 <= int(port) <= 65535):
        raise ConfigError(f"SIFT_BROKER port {port!r} of {url.strip()!r} is not a port in "
                          "[1, 65535]")


def _check_readable_file(name: str, path: str) -> None:
    """A certificate or key file setting names a file that can be read."""
    if not os.path.exists(path):
        raise ConfigError(f"{name} {path!r}: no such file")
    if not os.path.isfile(path):
        raise ConfigError(f"{name} {path!r} is not a file")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"{name} {path!r} cannot be read (permission denied)")


@dataclass(frozen=True)
class Settings:
    """Service settings; every field maps to an environment variable ``SIFT_<NAME>``."""

    broker: str = "kafka://127.0.0.1:9092"
    topic_prefix: str = "sift."
    app_id: str = "sift"
    partitions: int = 4
    #: Replicas of every topic sift creates, the tables' changelogs included (1 fits the
    #: single local broker; a cluster wants 3, or a broker lost loses profile state).
    replication_factor: int = 1
    batch_size: int = 256
    #: How long a take waits to fill a batch: at a low rate most of a document's
    #: latency (at 1,000 profiles, 1,000 doc/s, one a message: p99 110 ms with 0.05 s,
    #: 64 ms with 0.02 s); under a backlog batches fill at once and it does not act.
    batch_timeout: float = 0.02
    #: A batch of document messages is routed and scored in steps of at most this many
    #: bytes of messages (a larger message is a step of its own), as if taken so.
    batch_bytes: int = 2_000_000
    #: Judgments are taken in larger, longer batches: the judgments of one profile in one
    #: batch share one re-threshold and one state write, and a human's feedback taking
    #: effect half a second later changes nothing. A batch of judgments costs about one
    #: re-threshold per profile it touches, whatever their number, so under a backlog
    #: the batch should hold as many as Faust can hand over: Faust's take fills for
    #: ``judgment_batch_timeout`` seconds. At 1,000 profiles, by turns twice each, 0.25 s
    #: and 4,096 gave batches of 3,333 (four judgments a profile's share) and 2,435 and
    #: 2,170 judgments/s; 0.5 s and 16,384 gave batches of 10,000 and 6,667 and 6,148
    #: and 2,727 judgments/s (docs/streaming.md, thirty-second session).
    judgment_batch_size: int = 16384
    judgment_batch_timeout: float = 0.5
    #: Seconds between two writes of the worker's counters to ``<data_dir>/stats.json``
    #: (what ``sift demo``, the tests and the benchmarks watch; ``sift demo`` sets 0.05
    #: for its own worker, whose closed loop waits on them after every chunk).
    stats_interval: float = 0.25
    #: How long the broker may hold the worker's fetch when nothing new has arrived
    #: (Faust fixes 1,500 ms, which delayed documents by up to that per hop).
    fetch_max_wait_ms: int = 50
    #: Score a routed document directly for the shards this worker holds, instead of
    #: through the internal shard topic (which then carries only the other shards').
    #: Two workers starting on a backlog lost (document, profile) pairs with it until
    #: the fixes of docs/streaming.md finding 15 (none in 33 of 35 runs since, the other
    #: two re-scored only); false sends every shard's copy through the shard topic.
    score_here: bool = True
    #: Append each batch of judgments to the profile's journal (a second table) and
    #: rewrite the profile's whole state record only when the journal is full, instead
    #: of after every batch (``sift.agents.journal``); false: a record per batch
    #: (journals an earlier run left are still read on recovery).
    journal: bool = True
    #: Hand each consumed message to its stream without Faust's four-task race when the
    #: stream's buffer has room (see ``sift.agents.app.deliver_first``); process-wide.
    direct_delivery: bool = True
    #: A worker told to stop (SIGTERM, SIGINT) that has not exited after this many
    #: seconds exits anyway: with its broker gone, aiokafka's metadata loop kept a
    #: stopping worker alive, spinning at 70-90 % of a core (seventh session).
    stop_timeout: float = 30.0
    #: How long the group waits for a silent worker (crashed, or cut off) before its
    #: shards move to the others: Faust's ``broker_session_timeout``. A SIGKILLed worker's
    #: shards are not scored for this long (docs/reliability.md). Heartbeats come from
    #: the consumer's own thread, so a long batch on the event loop does not count
    #: against it; the broker bounds it (``group.min.session.timeout.ms``, 6 s, and
    #: ``group.max.session.timeout.ms``, 30 min, by default).
    session_timeout: float = 60.0
    #: How often the worker tells the group it is alive (at most a third of
    #: ``session_timeout``, as Kafka advises).
    heartbeat_interval: float = 3.0
    #: A name for this worker that stays the same across its restarts (Kafka's static
    #: membership, ``group.instance.id``: Faust's ``consumer_group_instance_id``), unique
    #: in the group; empty: none. A worker restarted under its name after a crash gets
    #: its shards back at once, instead of after the dead member's session or Faust's
    #: 60 s rebalance timeout; but a worker with a name that stops for good keeps its
    #: shards from the others for ``session_timeout`` (it does not leave the group), and
    #: of two workers given one name at least one, usually both, stops with an error
    #: (``sift.agents.membership``).
    instance_id: str = ""
    max_document_bytes: int = 1_000_000
    max_batch_documents: int = 1000
    recent_documents: int = 100_000
    web_host: str = "127.0.0.1"
    web_port: int = 6066
    #: Host names ``sift web`` and ``sift worker --web`` answer besides ``localhost`` and IP
    #: addresses, comma-separated (``*``: any). Bound to a loopback address they refuse every
    #: other name, so that a site whose name is rebound to 127.0.0.1 (DNS rebinding) cannot
    #: read them from a local browser; bound to another address they check only a list
    #: given here (``sift/hosts.py``).
    web_allowed_hosts: str = ""
    api_token: str = field(default="", repr=False)
    data_dir: str = ".cache/sift-worker"
    idf_corpus: str = ""
    #: Cut every token to its first N characters (``Vectorizer(truncate=N)``, as
    #: ``sift replay --truncate N``); 0 keeps tokens whole. Every worker of a group must
    #: use the same value: profile state holds vectors of the vectorizer that made them.
    truncate: int = 0
    #: Share of character n-grams in the vectors (``Vectorizer(chars=C)``, as ``sift
    #: replay --chars C``), in [0, 1); 0 (default) vectorizes words only. The same on every
    #: worker of a group, for the same reason.
    chars: float = 0.0
    log_json: bool = False
    log_level: str = "INFO"
    processing_guarantee: str = "at_least_once"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = ""
    sasl_username: str = ""
    sasl_password: str = field(default="", repr=False)
    ssl_cafile: str = ""
    ssl_certfile: str = ""
    ssl_keyfile: str = ""

    def __post_init__(self) -> None:
        # the upper bounds: what the Kafka protocol's 32-bit fields and the broker take
        for name, high in (("partitions", 10_000), ("replication_factor", 32_767),
                           ("batch_size", 1_000_000),
                           ("batch_bytes", 2**31 - 1), ("judgment_batch_size", 1_000_000),
                           ("max_batch_documents", 1_000_000), ("fetch_max_wait_ms", 300_000),
                           ("max_document_bytes", 2**31 - 1)):
            value = getattr(self, name)
            if not 1 <= value <= high:
                raise ConfigError(f"SIFT_{name.upper()} must be in [1, {high}], got {value!r}")
        if not 0 <= self.recent_documents <= 100_000_000:
            raise ConfigError(f"SIFT_RECENT_DOCUMENTS must be in [0, 100000000], got "
                              f"{self.recent_documents!r}")
        if not self.broker.strip():
            raise ConfigError("SIFT_BROKER is empty: give a broker URL such as kafka://127.0.0.1:9092")
        for url in self.broker.replace(";", ",").split(","):
            scheme, sep, host = url.strip().partition("://")
            if url.strip() and (not sep or scheme.lower() not in ("kafka", "aiokafka")
                                or not host.strip("/")):
                raise ConfigError(f"SIFT_BROKER must be kafka://HOST:PORT (several separated by "
                                  f"';'), got {url.strip()!r}")
            if url.strip():
                _check_broker_port(url)
        if not self.app_id.strip():
            raise ConfigError("SIFT_APP_ID is empty: give the consumer group's name")
        # Kafka refuses other topic names (the worker failed in an 85-line traceback, after
        # creating the topics it could; forty-fourth session)
        _check_topic_part("SIFT_APP_ID", self.app_id, LONGEST_APP_TOPIC_SUFFIX)
        _check_topic_part("SIFT_TOPIC_PREFIX", self.topic_prefix, LONGEST_TOPIC)
        if self.instance_id:
            _check_topic_part("SIFT_INSTANCE_ID", self.instance_id, "")
        for name in self.allowed_hosts():
            if name != "*" and not re.fullmatch(r"[a-z0-9._-]+|[0-9a-f:]+", name):
                raise ConfigError(f"SIFT_WEB_ALLOWED_HOSTS must list host names separated by "
                                  f"commas (or *), got {self.web_allowed_hosts!r}")
        if not 1 <= self.web_port <= 65535:
            raise ConfigError(f"SIFT_WEB_PORT must be a port in [1, 65535], got {self.web_port!r}")
        # in any case, as the clients take them, kept in the case they take (Faust's
        # guarantee lower case; SIFT_SECURITY_PROTOCOL=sasl_ssl was refused, while
        # SIFT_LOG_LEVEL and SIFT_SASL_MECHANISM were taken in any case)
        for name, allowed, case in (("log_level", LOG_LEVELS, str.upper),
                                    ("processing_guarantee", ("at_least_once", "exactly_once"),
                                     str.lower),
                                    ("security_protocol", SECURITY_PROTOCOLS, str.upper)):
            value = getattr(self, name)
            if not isinstance(value, str) or case(value) not in allowed:
                raise ConfigError(f"SIFT_{name.upper()} must be one of {', '.join(allowed)}, "
                                  f"got {value!r}")
            object.__setattr__(self, name, case(value))
        # the clients took any mechanism and any path, and failed 15 s later naming neither
        if self.sasl_mechanism and self.sasl_mechanism.upper() not in SASL_MECHANISMS:
            raise ConfigError(f"SIFT_SASL_MECHANISM must be one of {', '.join(SASL_MECHANISMS)} "
                              f"(or empty), got {self.sasl_mechanism!r}")
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            if getattr(self, name):
                _check_readable_file(f"SIFT_{name.upper()}", getattr(self, name))
        if self.truncate < 0:
            raise ConfigError(f"SIFT_TRUNCATE must be >= 0 (0: tokens whole), got {self.truncate!r}")
        if not 0.0 <= self.chars < 1.0:
            raise ConfigError(f"SIFT_CHARS must be in [0, 1) (0: words only), got {self.chars!r}")
        for name in ("batch_timeout", "judgment_batch_timeout", "stop_timeout",
                     "session_timeout", "heartbeat_interval", "stats_interval"):
            value = getattr(self, name)
            if not 0 < value < float("inf"):
                raise ConfigError(f"SIFT_{name.upper()} must be a positive number of seconds, "
                                  f"got {value!r}")
        if not 6.0 <= self.session_timeout <= 1800.0:  # the broker's default bounds
            raise ConfigError(f"SIFT_SESSION_TIMEOUT must be in [6, 1800] seconds (what the "
                              f"broker accepts by default), got {self.session_timeout!r}")
        if self.heartbeat_interval * 3 > self.session_timeout:
            raise ConfigError(f"SIFT_HEARTBEAT_INTERVAL must be at most a third of "
                              f"SIFT_SESSION_TIMEOUT ({self.session_timeout!r} s), got "
                              f"{self.heartbeat_interval!r}")

    def allowed_hosts(self) -> tuple[str, ...]:
        """``web_allowed_hosts`` as lower-case names (``("*",)``: any)."""
        return tuple(n.strip().lower() for n in self.web_allowed_hosts.split(",") if n.strip())

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *,
                 options: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read ``SIFT_*`` variables (or ``environ``), then apply ``overrides``.

        ``overrides`` come from a command's options: an error in one names the option
        (``options``: a setting's option when it is not ``--`` and the setting's name with
        dashes, as ``sift web --port`` for ``web_port``), not the variable the user never
        set.

        >>> Settings.from_env({}, partitions=0)
        Traceback (most recent call last):
        ...
        sift.errors.ConfigError: --partitions must be in [1, 10000], got 0
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            key = _PREFIX + f.name.upper()
            if key not in env:
                continue
            raw = env[key]
            default = f.default
            try:
                if isinstance(default, bool):
                    values[f.name] = _parse_bool(key, raw)
                elif isinstance(default, int):
                    values[f.name] = int(raw)
                elif isinstance(default, float):
                    values[f.name] = float(raw)
                else:
                    values[f.name] = raw
            except ValueError:
                kind = {"int": "an integer", "float": "a number"}.get(type(default).__name__,
                                                                      type(default).__name__)
                raise ConfigError(f"{key} must be {kind}, got {raw!r}") from None
        settings = cls(**values)
        overrides = {k: v for k, v in overrides.items() if v is not None}
        if not overrides:
            return settings
        try:
            return replace(settings, **overrides)
        except ConfigError as exc:
            text = str(exc)
            for name in overrides:
                option = (options or {}).get(name, "--" + name.replace("_", "-"))
                text = re.sub(rf"\b{_PREFIX}{name.upper()}\b", option, text)
            raise ConfigError(text) from None

    @staticmethod
    def is_set(name: str, environ: Mapping[str, str] | None = None) -> bool:
        """Whether ``SIFT_<NAME>`` is set in the environment (or ``environ``), as opposed
        to left at its default (``sift demo`` starts a local broker unless
        ``SIFT_BROKER`` is set).

        >>> Settings.is_set("broker", {"SIFT_BROKER": "kafka://kafka:9092"})
        True
        >>> Settings.is_set("broker", {})
        False
        """
        if name not in {f.name for f in fields(Settings)}:
            raise ConfigError(f"no setting named {name!r}")
        return _PREFIX + name.upper() in (os.environ if environ is None else environ)

    def topic(self, name: str) -> str:
        """Full Kafka topic name for a logical name such as ``"documents"``."""
        return f"{self.topic_prefix}{name}"
