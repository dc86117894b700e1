"""kafka-python clients configured from :class:`~sift.settings.Settings` (security included).

Every producer, consumer and admin client the command line creates comes from
here, so the SASL/SSL settings reach all of them, as they reach the Faust app
(:func:`sift.agents.app.faust_credentials`).
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sift.errors import SiftError
from sift.settings import Settings
from sift.topics.deadletter import TOPIC_MAX_BYTES as DEAD_LETTER_TOPIC_BYTES


class KafkaClientError(SiftError):
    """The broker cannot be reached or refused a request."""


#: what kafka-python logs when a connection attempt fails: the reason, which its
#: exception (``Unable to bootstrap from [...]``) leaves out
_FAILED = (re.compile(r"Bootstrap connection to \S+ failed: (.+?)(?: \(backoff [\d.]+ secs\))?$"),
           re.compile(r"^Connection failed: (.+)$"), re.compile(r"Connection lost: (.+)$"),
           re.compile(r"^Metadata refresh: failed (.+)$"))

#: the broker's answer to a SASL handshake on a listener that does not speak SASL, or not
#: that mechanism (the error said only "IllegalSaslStateError"; forty-fourth session)
_ILLEGAL_SASL = re.compile(r"IllegalSaslState|ILLEGAL_SASL_STATE")

#: (a pattern of the reason, what to check), most specific first
_HINTS = (
    (re.compile(r"SaslAuthenticationFailed|Authentication failed", re.I),
     "the broker refused the credentials: check SIFT_SASL_USERNAME, SIFT_SASL_PASSWORD and "
     "SIFT_SASL_MECHANISM"),
    (_ILLEGAL_SASL,
     "the listener does not speak SASL (or not this mechanism): check SIFT_SECURITY_PROTOCOL "
     "and SIFT_SASL_MECHANISM"),
    (re.compile(r"UnsupportedSaslMechanism|mechanism", re.I),
     "the listener does not offer that SASL mechanism: check SIFT_SASL_MECHANISM"),
    (re.compile(r"CERTIFICATE_VERIFY_FAILED|certificate verify", re.I),
     "the broker's certificate is not trusted: set SIFT_SSL_CAFILE to the CA that signed it"),
    (re.compile(r"WRONG_VERSION_NUMBER|Handshake failed|SSL", re.I),
     "the TLS handshake failed: does SIFT_SECURITY_PROTOCOL match this listener?"),
    (re.compile(r"ECONNREFUSED|Connection refused", re.I),
     "nothing listens there: is the broker running, and is SIFT_BROKER right?"),
    (re.compile(r"socket disconnected|Connection reset", re.I),
     # (also what an address that does not answer gives on some networks: the connection
     # attempt ends the same way, so both causes are named)
     "the connection was closed: is SIFT_BROKER right and reachable from here, and does "
     "SIFT_SECURITY_PROTOCOL match this listener?"),
)

#: a closed connection under SASL: refused credentials sometimes end the connection
#: before kafka-python reads the broker's answer, so the credentials are suspects too
_CLOSED_UNDER_SASL = (
    "the broker closed the connection: check SIFT_SASL_USERNAME, SIFT_SASL_PASSWORD and "
    "SIFT_SASL_MECHANISM, and that SIFT_SECURITY_PROTOCOL matches this listener")


class _FailureLog(logging.Handler):
    """Keeps the reasons kafka-python logs for failed connection attempts."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.reasons: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a record that cannot be formatted says nothing we can use
            return
        for pattern in _FAILED:
            found = pattern.search(text)
            if found:  # "[Error 58] XError: XError: text" -> "XError: text"
                reason = re.sub(r"^\[Error -?\d+\] ", "", found.group(1).strip())
                self.reasons.append(re.sub(r"\b(\w+): \1: ", r"\1: ", reason))
                return


def failure_reason(reasons: list[str], sasl: bool = False) -> str | None:
    """The most telling of the logged connection failures, with what to check (``sasl``:
    the client authenticates with SASL).

    An authentication or certificate failure beats the disconnections that follow it.

    >>> print(failure_reason(["KafkaConnectionError: socket disconnected",
    ...                       "SaslAuthenticationFailedError: Authentication failed: bad user"]))
    ... # doctest: +NORMALIZE_WHITESPACE
    SaslAuthenticationFailedError: Authentication failed: bad user (the broker refused
    the credentials: check SIFT_SASL_USERNAME, SIFT_SASL_PASSWORD and SIFT_SASL_MECHANISM)
    >>> failure_reason([]) is None
    True
    """
    for pattern, hint in _HINTS:
        for reason in reasons:
            if pattern.search(reason):
                if sasl and hint is _HINTS[-1][1]:
                    hint = _CLOSED_UNDER_SASL
                return f"{reason} ({hint})"
    return reasons[0] if reasons else None


@contextlib.contextmanager
def _failures() -> Iterator[_FailureLog]:
    """kafka-python's failure records while a client connects. A caller that silenced
    that logger (``sift web`` sets it to CRITICAL) still gets them, without their being
    printed: its level is lowered and its propagation cut for the time being."""
    handler = _FailureLog()
    logger = logging.getLogger("kafka")
    level, propagate = logger.level, logger.propagate
    silenced = logger.getEffectiveLevel() > logging.WARNING
    if silenced:
        logger.setLevel(logging.WARNING)
        logger.propagate = False
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        if silenced:
            logger.setLevel(level)
            logger.propagate = propagate


def _connect(settings: Settings, make: Callable[[], Any]) -> Any:
    """``make()`` (a kafka-python client's constructor, which connects), its failure
    turned into a one-line :class:`KafkaClientError` that names the cause kafka-python
    logged (refused credentials, an untrusted certificate, a closed connection) rather
    than only its time-out."""
    from kafka.errors import KafkaError

    with _failures() as log:
        try:
            return make()
        except (KafkaError, OSError, ValueError) as exc:
            text = str(exc)
            name = type(exc).__name__
            sasl = settings.security_protocol.upper().startswith("SASL")
            why = failure_reason(log.reasons, sasl)
            if why is None:
                why = text if text.startswith(name) else f"{name}: {text}"
                if _ILLEGAL_SASL.search(why):  # raised, not logged: the same hint
                    why = failure_reason([why], sasl) or why
            raise KafkaClientError(f"cannot connect to {settings.broker}: {why}") from None


#: how long every bootstrap address may refuse TCP connections before a client says so:
#: kafka-python retried a refused address until its 15 s bootstrap time-out (so a command
#: run with no broker took 17 s to say "nothing listens there"); a broker whose port opens
#: within this is still used
REFUSED_PATIENCE = 2.0


def host_port(address: str) -> tuple[str, int]:
    """``"h:9093"`` -> ``("h", 9093)``; Kafka's port 9092 when none is given; IPv6 in
    brackets (``[::1]:9092``) or bare (``::1``)."""
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else 9092
    if address.count(":") > 1:
        return address, 9092
    host, colon, port = address.rpartition(":")
    return (host, int(port)) if colon else (address, 9092)


def refused(addresses: list[str], patience: float | None = None) -> str | None:
    """``"ECONNREFUSED from a, b"`` when every one of ``addresses`` refused TCP connections
    for ``patience`` seconds; ``None`` as soon as one accepts, or fails in any other way
    (an unknown host, a time-out: kafka-python's own attempt names those). ``patience``:
    :data:`REFUSED_PATIENCE` unless given."""
    deadline = time.monotonic() + (REFUSED_PATIENCE if patience is None else patience)
    while True:
        for address in addresses:
            try:
                socket.create_connection(host_port(address), timeout=1.0).close()
                return None
            except ConnectionRefusedError:
                continue
            except (OSError, ValueError):
                return None
        if time.monotonic() >= deadline:
            return f"ECONNREFUSED from {', '.join(addresses)}"
        time.sleep(0.1)


def _connect_checked(settings: Settings, make: Callable[[], Any]) -> Any:
    """:func:`_connect`, after making sure the broker's addresses do not all refuse
    connections (said in :data:`REFUSED_PATIENCE` seconds, not kafka-python's 15)."""
    addresses = bootstrap(settings)
    why = refused(addresses) if addresses else None
    if why is not None:
        raise KafkaClientError(f"cannot connect to {settings.broker}: {failure_reason([why])}")
    return _connect(settings, make)


def bootstrap(settings: Settings) -> list[str]:
    """``kafka://h1:9092;kafka://h2:9092`` -> ``["h1:9092", "h2:9092"]``."""
    parts = [p.strip() for p in settings.broker.replace(";", ",").split(",") if p.strip()]
    return [p.split("://", 1)[-1].rstrip("/") for p in parts]


def client_config(settings: Settings) -> dict[str, Any]:
    """Connection and security options for any kafka-python client."""
    cfg: dict[str, Any] = {"bootstrap_servers": bootstrap(settings),
                           "security_protocol": settings.security_protocol.upper(),
                           "bootstrap_timeout_ms": 15_000}
    if settings.sasl_mechanism:
        cfg["sasl_mechanism"] = settings.sasl_mechanism.upper()
    if settings.sasl_username:
        cfg["sasl_plain_username"] = settings.sasl_username
        cfg["sasl_plain_password"] = settings.sasl_password
    if settings.security_protocol.upper().startswith("SASL") and not settings.sasl_mechanism:
        cfg["sasl_mechanism"] = "PLAIN"
    for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        value = getattr(settings, key)
        if value:
            cfg[key] = value
    return cfg


def producer(settings: Settings, **overrides: Any) -> Any:
    """A KafkaProducer sending raw bytes (keys and values)."""
    from kafka import KafkaProducer

    cfg = {**client_config(settings), "linger_ms": 5, "batch_size": 256 * 1024,
           "max_request_size": 8 * 1024 * 1024, "acks": 1, "enable_idempotence": False,
           **overrides}
    return _connect_checked(settings, lambda: KafkaProducer(**cfg))


class Sends:
    """The outcome of a producer's sends: kafka-python's ``flush`` does not raise for a
    record the broker refused (larger than its ``message.max.bytes``, a topic it would
    not write, ...), so without this a refused message is reported sent, and lost.

    ``send`` sends and remembers a failure under a label that says which record it was,
    whether the broker refuses the message later or the client at once (over its
    ``max_request_size``, no metadata in time: kafka-python raises those from ``send``);
    ``failed`` is the first failure so far (a long run can stop early); ``flush`` flushes
    and raises :class:`KafkaClientError` naming the first refused message.
    """

    def __init__(self, prod: Any) -> None:
        self.prod = prod
        self.failures: list[tuple[str, BaseException]] = []
        self._at_once: set[int] = set()  # ids of the errors the client raised from send

    def send(self, topic: str, key: bytes | None, value: bytes, label: str) -> bool:
        """Send one message; ``False`` when the client refused it at once (remembered
        under ``label``, as the broker's refusals are)."""
        from kafka.errors import KafkaError

        try:
            future = self.prod.send(topic, key=key, value=value)
        except KafkaError as exc:
            self.failures.append((label, exc))
            self._at_once.add(id(exc))
            return False
        future.add_errback(lambda exc: self.failures.append((label, exc)))
        return True

    @property
    def failed(self) -> str | None:
        return self._reason(*self.failures[0]) if self.failures else None

    def flush(self, timeout: float = 60.0) -> None:
        try:
            self.prod.flush(timeout=timeout)
        except Exception as exc:  # kafka-python's KafkaTimeoutError and kin
            raise KafkaClientError(f"not every message was sent within {timeout:g} s: "
                                   f"{type(exc).__name__}: {exc}") from None
        if self.failures:
            more = len(self.failures) - 1
            raise KafkaClientError(self._reason(*self.failures[0])
                                   + (f" ({more} more messages refused)" if more else ""))

    def _reason(self, label: str, exc: BaseException) -> str:
        name = type(exc).__name__
        if "MessageSizeTooLarge" in name and id(exc) in self._at_once:
            return (f"{label}: refused by the client as too large ({exc}): over "
                    "its max_request_size; send fewer records a message")
        if "MessageSizeTooLarge" in name:
            return (f"{label}: refused by the broker as too large ({name}): its "
                    "message.max.bytes (1 MiB on a stock broker) is below the message; "
                    "send fewer records a message")
        return f"{label}: not sent: {name}: {exc}"


def consumer(settings: Settings, *topics: str, **overrides: Any) -> Any:
    """A KafkaConsumer of raw bytes (no group unless ``group_id`` is given)."""
    from kafka import KafkaConsumer

    cfg = {**client_config(settings), "auto_offset_reset": "earliest",
           "enable_auto_commit": False, "group_id": None, **overrides}
    return _connect_checked(settings, lambda: KafkaConsumer(*topics, **cfg))


def admin(settings: Settings, timeout: float = 30.0) -> Any:
    from kafka import KafkaAdminClient

    return _connect_checked(settings, lambda: KafkaAdminClient(
        **client_config(settings), request_timeout_ms=int(timeout * 1000), client_id="sift-cli"))


def ensure_topics(settings: Settings, names: Iterable[str], partitions: int | None = None,
                  timeout: float = 30.0, configs: dict[str, str] | None = None) -> None:
    """Create the topics that do not exist yet (``partitions`` defaults to the setting)."""
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    n = partitions or settings.partitions
    wanted = list(names)
    client = admin(settings, timeout)
    try:
        existing = set(client.list_topics())
        # checked even when every topic exists: Faust creates the tables' changelogs (a new
        # SIFT_APP_ID on existing wire topics) with the same factor
        brokers = (len(client.describe_cluster().get("brokers") or ())
                   if settings.replication_factor > 1 or set(wanted) - existing else 0)
        if brokers and settings.replication_factor > brokers:
            raise KafkaClientError(
                f"cannot create topics on {settings.broker}: SIFT_REPLICATION_FACTOR is "
                f"{settings.replication_factor}, more than the cluster's {brokers} broker(s)")
        dead = settings.topic("dead-letters")
        new = [NewTopic(t, n, settings.replication_factor, topic_configs={
                   **({"max.message.bytes": str(DEAD_LETTER_TOPIC_BYTES)} if t == dead else {}),
                   **(configs or {})})
               for t in wanted if t not in existing]
        if new:
            with contextlib.suppress(TopicAlreadyExistsError):
                client.create_topics(new, timeout_ms=int(timeout * 1000))
        wait_listed(client, wanted, present=True, timeout=timeout,
                    failure=f"topics {wanted} not created within {timeout:.0f}s")
    except KafkaError as exc:
        raise KafkaClientError(f"cannot create topics on {settings.broker}: {exc}") from None
    finally:
        client.close()


def message_limit(settings: Settings, topic: str, timeout: float = 30.0) -> int | None:
    """The topic's ``max.message.bytes`` as the broker applies it (the topic's own or the
    broker's default), or ``None`` when the broker does not say (an old broker, an ACL
    without DescribeConfigs)."""
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.errors import KafkaError

    client = admin(settings, timeout)
    try:
        got = client.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, {"max.message.bytes": None})],
            config_filter="all")
        value = got["topic"][topic]["max.message.bytes"]["value"]
        return int(value)
    except (KafkaError, KeyError, TypeError, ValueError, NotImplementedError):
        return None
    finally:
        client.close()


def topic_survey(settings: Settings, names: Iterable[str]) -> tuple[list[str], bool | None]:
    """The topics among ``names`` that do not exist, and whether the worker group
    (``settings.app_id``) has committed any offset (``None`` when the group coordinator
    cannot say yet): what ``sift web``, which creates no topic, checks at start. Creates
    nothing (kafka-python's admin client never asks for a topic to be auto-created)."""
    from kafka.errors import KafkaError

    wanted = list(names)
    client = admin(settings)
    try:
        try:
            existing = set(client.list_topics())
        except KafkaError as exc:
            raise KafkaClientError(f"cannot list the topics on {settings.broker}: "
                                   f"{exc}") from None
        try:
            committed = client.list_group_offsets({settings.app_id: None}).get(settings.app_id)
        except KafkaError:  # a coordinator still loading, say: the lag will tell later
            committed = None
    finally:
        client.close()
    return [t for t in wanted if t not in existing], (
        None if committed is None else bool(committed))


def partition_counts(settings: Settings, names: Iterable[str]) -> dict[str, int]:
    """Number of partitions of each existing topic among ``names``."""
    from kafka.errors import KafkaError

    client = admin(settings)
    try:
        return {t["name"]: len(t.get("partitions") or [])
                for t in client.describe_topics(list(names)) if not t.get("error_code")}
    except KafkaError as exc:
        raise KafkaClientError(f"cannot describe topics on {settings.broker}: {exc}") from None
    finally:
        client.close()


def group_lag_by_partition(settings: Settings, names: Iterable[str]) -> dict[tuple[str, int], int]:
    """Messages not yet committed by the worker group (``settings.app_id``), per
    (topic, partition) of the logical topics ``names``."""
    from kafka import TopicPartition

    topics = [settings.topic(n) for n in names]
    cli = admin(settings)
    try:
        committed = cli.list_group_offsets({settings.app_id: None}).get(settings.app_id, {})
    finally:
        cli.close()
    cons = consumer(settings)
    try:
        tps = [TopicPartition(t, p) for t in topics for p in range(settings.partitions)]
        ends = cons.end_offsets(tps)
    finally:
        cons.close()
    out: dict[tuple[str, int], int] = {}
    for tp in tps:
        meta = committed.get(tp)
        start = meta.offset if meta is not None and meta.offset >= 0 else 0
        out[(tp.topic, tp.partition)] = int(ends.get(tp, 0) - start)
    return out


def group_lag(settings: Settings, names: Iterable[str]) -> int:
    """Messages not yet committed by the worker group (``settings.app_id``) over the
    logical topics ``names`` (all ``settings.partitions`` partitions of each)."""
    return sum(group_lag_by_partition(settings, names).values())


def wait_listed(client: Any, names: list[str], *, present: bool, timeout: float,
                failure: str) -> None:
    """Wait until the broker lists every one of ``names`` (``present``) or none of them;
    :class:`KafkaClientError` with ``failure`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (set(names) - set(client.list_topics())) if present \
            else (set(names) & set(client.list_topics())):
        if time.monotonic() > deadline:
            raise KafkaClientError(failure)
        time.sleep(0.1)


#: how long :func:`start_offsets` keeps asking a group coordinator that is not there yet
#: (a fresh broker creates ``__consumer_offsets`` at the first request; a restarted one
#: loads it), and the pauses between the attempts (doubling, at most the last)
COORDINATOR_RETRY_SECONDS = 12.0
COORDINATOR_BACKOFF = (0.25, 2.0)


def _retriable(exc: BaseException) -> bool:
    """A broker error that goes away by itself: no coordinator yet, a coordinator still
    loading or moved, a leader being elected, a connection or request that timed out."""
    from kafka.errors import RetriableError

    return isinstance(exc, RetriableError)


def _committed(settings: Settings, retry_for: float) -> dict[Any, Any]:
    """The worker group's committed offsets, asking again for up to ``retry_for`` seconds
    while the broker answers with a retriable error (``CoordinatorNotAvailable`` on a
    fresh or restarted broker); the last error is raised after that."""
    from kafka.errors import KafkaError

    deadline = time.monotonic() + retry_for
    pause, most = COORDINATOR_BACKOFF
    while True:
        try:
            cli = admin(settings)
            try:
                found: dict[Any, Any] = cli.list_group_offsets(
                    {settings.app_id: None}).get(settings.app_id, {})
                return found
            finally:
                cli.close()
        except KafkaError as exc:
            left = deadline - time.monotonic()
            if not _retriable(exc) or left <= 0:
                raise
            time.sleep(min(pause, left))
            pause = min(pause * 2, most)


def start_offsets(settings: Settings, partitions: Iterable[tuple[str, int]], *,
                  retry_for: float | None = None) -> dict[tuple[str, int], int]:
    """Where the worker group (``settings.app_id``) starts on each ``(topic, partition)``:
    its committed offset or, for a partition it never committed, the partition's first
    offset still in the log (where a consumer with ``auto_offset_reset="earliest"``
    starts). Both asked of the broker, so a commit not yet known locally still counts.

    An empty partition (its first offset is its end) starts at its end whatever the
    group committed, so the group coordinator is asked only when a partition holds
    messages, and asked again for up to ``retry_for`` seconds
    (:data:`COORDINATOR_RETRY_SECONDS`) while it is not available: on a fresh broker it
    did not exist yet at a first worker's start, which then skipped the read-back of the
    documents (forty-fifth session).
    """
    from kafka import TopicPartition
    from kafka.errors import KafkaError

    tps = [TopicPartition(t, p) for t, p in sorted(set(partitions))]
    if not tps:
        return {}
    try:
        cons = consumer(settings)
        try:
            firsts = cons.beginning_offsets(tps)
            ends = cons.end_offsets(tps)
        finally:
            cons.close()
        out: dict[tuple[str, int], int] = {}
        held = []
        for tp in tps:
            first, end = int(firsts.get(tp, 0)), int(ends.get(tp, 0))
            if end > first:
                held.append(tp)
            else:
                out[(tp.topic, tp.partition)] = end
        if held:
            committed = _committed(settings, COORDINATOR_RETRY_SECONDS if retry_for is None
                                   else retry_for)
            for tp in held:
                meta = committed.get(tp)
                out[(tp.topic, tp.partition)] = (int(meta.offset) if meta is not None
                                                 and meta.offset >= 0 else int(firsts[tp]))
    except KafkaError as exc:
        raise KafkaClientError(f"cannot read the start offsets of {sorted(set(partitions))}: "
                               f"{exc}") from None
    return out


def first_offsets(settings: Settings, partitions: Iterable[tuple[str, int]]
                  ) -> dict[tuple[str, int], int]:
    """The first offset each ``(topic, partition)`` still holds (retention may have
    deleted the ones before)."""
    return _offsets(settings, partitions, "first")


def end_offsets(settings: Settings, partitions: Iterable[tuple[str, int]]
                ) -> dict[tuple[str, int], int]:
    """The offset the next message of each ``(topic, partition)`` will get."""
    return _offsets(settings, partitions, "end")


def _offsets(settings: Settings, partitions: Iterable[tuple[str, int]], which: str
             ) -> dict[tuple[str, int], int]:
    from kafka import TopicPartition
    from kafka.errors import KafkaError

    tps = [TopicPartition(t, p) for t, p in sorted(set(partitions))]
    if not tps:
        return {}
    cons = consumer(settings)
    try:
        found = cons.beginning_offsets(tps) if which == "first" else cons.end_offsets(tps)
    except KafkaError as exc:
        raise KafkaClientError(f"cannot read the {which} offsets of {sorted(set(partitions))}: "
                               f"{exc}") from None
    finally:
        cons.close()
    return {(tp.topic, tp.partition): int(off) for tp, off in found.items()}


@contextlib.contextmanager
def consumer_at_ends(settings: Settings, topics: list[str]) -> Iterator[Any]:
    """A consumer assigned to every partition of ``topics``, at their ends: it reads what
    comes after now (a worker's answer to a spec about to be sent), records up to 16 MiB."""
    from kafka.structs import TopicPartition

    cons = consumer(settings, check_crcs=False, max_partition_fetch_bytes=16 * 1024 * 1024)
    try:
        tps = [TopicPartition(t, p) for t in topics for p in sorted(cons.partitions_for_topic(t) or ())]
        cons.assign(tps)
        for tp, end in cons.end_offsets(tps).items():
            cons.seek(tp, end)
        yield cons
    finally:
        cons.close()


def read_offsets(settings: Settings, ranges: Iterable[tuple[str, int, int, int]],
                 timeout: float = 10.0) -> list[tuple[str, int, int, bytes | None, bytes | None]]:
    """The messages at offsets ``[start, stop)`` of each ``(topic, partition, start, stop)``.

    A worker uses it to fetch messages its stream consumer skipped (see
    ``Service.gaps``). Returns ``(topic, partition, offset, key, value)`` in offset order
    per partition; offsets no longer in the log (retention) are simply absent. Raises
    :class:`KafkaClientError` when a range has not been read to its end within
    ``timeout`` seconds, so that an offset missing from the result is one the log does not
    hold, never one not read yet.
    """
    from kafka import TopicPartition
    from kafka.errors import KafkaError

    want = {(t, p): (a, b) for t, p, a, b in ranges if b > a}
    if not want:
        return []
    cons = consumer(settings, check_crcs=False)
    out: list[tuple[str, int, int, bytes | None, bytes | None]] = []
    try:
        tps = {TopicPartition(t, p): ab for (t, p), ab in want.items()}
        cons.assign(list(tps))
        for tp, (a, _) in tps.items():
            cons.seek(tp, a)
        pending = set(tps)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for tp, records in cons.poll(timeout_ms=500).items():
                a, b = tps[tp]
                for r in records:
                    if a <= r.offset < b:
                        out.append((tp.topic, tp.partition, r.offset, r.key, r.value))
                    if r.offset >= b - 1:
                        pending.discard(tp)
                if tp in pending and records and records[-1].offset >= b - 1:
                    pending.discard(tp)
    except KafkaError as exc:
        raise KafkaClientError(f"cannot read back {sorted(want)}: {exc}") from None
    finally:
        cons.close()
    if pending:
        raise KafkaClientError(
            f"cannot read back {sorted((tp.topic, tp.partition, *tps[tp]) for tp in pending)}: "
            f"not read to the end in {timeout:g} s")
    out.sort(key=lambda m: (m[0], m[1], m[2]))
    return out


class EndWatch:
    """Whether a kafka-python consumer has read up to the end offsets its partitions had
    when it first had partitions (a consumer at ``latest`` is there as soon as it has
    them): what "caught up" means for :func:`read_all` and ``sift tail --timeout``, whose
    waits must not count a consumer's slow start (connecting, seeking) as quiet."""

    def __init__(self, cons: Any) -> None:
        self.cons = cons
        self.ends: dict[Any, int] | None = None

    def reached(self) -> bool:
        if self.ends is None:
            assigned = list(self.cons.assignment())
            if not assigned:
                return False
            self.ends = {tp: int(n) for tp, n in self.cons.end_offsets(assigned).items()}
        return all(self.cons.position(tp) >= end for tp, end in self.ends.items())


#: how long :func:`read_all` goes on without a record while it has not yet reached the end
#: offsets it took at its start (a consumer slow to connect, fetch or seek), before it
#: gives up waiting for them and returns what it read
READ_ALL_STALL = 15.0


def read_all(settings: Settings, topic: str, *, idle: float = 2.0,
             timeout: float = 60.0) -> list[tuple[bytes | None, bytes, int, int]]:
    """Every message now in ``topic`` (key, value, partition, offset): read from the
    beginning up to the end offsets its partitions had when the read began, then on
    until ``idle`` seconds pass without a message (for what is still arriving).

    The idle window counts only once the read has caught up with those ends: it counted
    from the consumer's construction, so a consumer slower than ``idle`` to connect
    (TLS, SASL), find its partitions, seek and fetch (a loaded machine) returned nothing,
    or a prefix, for a topic that held messages. A topic that does not exist is read as
    before (subscribed, until ``idle`` passes without a message). ``timeout`` bounds the
    whole read; so does :data:`READ_ALL_STALL` seconds without a record short of the ends.
    """
    from kafka import TopicPartition

    # kafka-python checks CRC32C in pure Python (a few MB/s): reading a table changelog of
    # hundreds of MB took longer than the tests that wrote it. The broker checked them.
    cons = consumer(settings, auto_offset_reset="earliest", check_crcs=False,
                    max_partition_fetch_bytes=16 * 1024 * 1024)
    out: list[tuple[bytes | None, bytes, int, int]] = []
    start = last = time.monotonic()
    try:
        tps = [TopicPartition(topic, p) for p in sorted(cons.partitions_for_topic(topic))]
        watch: EndWatch | None = None
        if tps:
            cons.assign(tps)
            cons.seek_to_beginning(*tps)
            watch = EndWatch(cons)
        else:
            cons.subscribe([topic])
        while True:
            batch = cons.poll(timeout_ms=200)
            for records in batch.values():
                for r in records:
                    out.append((r.key, r.value, r.partition, r.offset))
                last = time.monotonic()
            if watch is not None and watch.reached():
                watch = None
            now = time.monotonic()
            quiet = now - last
            if (quiet >= idle and watch is None) or quiet >= idle + READ_ALL_STALL \
                    or now - start >= timeout:
                break
    finally:
        cons.close()
    return out
