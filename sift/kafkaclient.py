"""kafka-python clients configured from :class:`~sift.settings.Settings` (security included).

Every producer, consumer and admin client the command line creates comes from
here, so the SASL/SSL settings reach all of them, as they reach the Faust app
(:func:`sift.agents.app.faust_credentials`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from typing import Any

from sift.errors import SiftError
from sift.settings import Settings


class KafkaClientError(SiftError):
    """The broker cannot be reached or refused a request."""


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
    from kafka.errors import KafkaError

    cfg = {**client_config(settings), "linger_ms": 5, "batch_size": 256 * 1024,
           "max_request_size": 8 * 1024 * 1024, "acks": 1, "enable_idempotence": False,
           **overrides}
    try:
        return KafkaProducer(**cfg)
    except (KafkaError, OSError, ValueError) as exc:
        raise KafkaClientError(f"cannot connect to {settings.broker}: {exc}") from None


def consumer(settings: Settings, *topics: str, **overrides: Any) -> Any:
    """A KafkaConsumer of raw bytes (no group unless ``group_id`` is given)."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    cfg = {**client_config(settings), "auto_offset_reset": "earliest",
           "enable_auto_commit": False, "group_id": None, **overrides}
    try:
        return KafkaConsumer(*topics, **cfg)
    except (KafkaError, OSError, ValueError) as exc:
        raise KafkaClientError(f"cannot connect to {settings.broker}: {exc}") from None


def admin(settings: Settings, timeout: float = 30.0) -> Any:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    try:
        return KafkaAdminClient(**client_config(settings), request_timeout_ms=int(timeout * 1000),
                                client_id="sift-cli")
    except (KafkaError, OSError, ValueError) as exc:
        raise KafkaClientError(f"cannot connect to {settings.broker}: {exc}") from None


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
        new = [NewTopic(t, n, 1, topic_configs=dict(configs or {}))
               for t in wanted if t not in existing]
        if new:
            with contextlib.suppress(TopicAlreadyExistsError):
                client.create_topics(new, timeout_ms=int(timeout * 1000))
        deadline = time.monotonic() + timeout
        while set(wanted) - set(client.list_topics()):
            if time.monotonic() > deadline:
                raise KafkaClientError(f"topics {wanted} not created within {timeout:.0f}s")
            time.sleep(0.1)
    except KafkaError as exc:
        raise KafkaClientError(f"cannot create topics on {settings.broker}: {exc}") from None
    finally:
        client.close()


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


def start_offsets(settings: Settings, partitions: Iterable[tuple[str, int]]
                  ) -> dict[tuple[str, int], int]:
    """Where the worker group (``settings.app_id``) starts on each ``(topic, partition)``:
    its committed offset or, for a partition it never committed, the partition's first
    offset still in the log (where a consumer with ``auto_offset_reset="earliest"``
    starts). Both asked of the broker, so a commit not yet known locally still counts.
    """
    from kafka import TopicPartition
    from kafka.errors import KafkaError

    tps = [TopicPartition(t, p) for t, p in sorted(set(partitions))]
    if not tps:
        return {}
    try:
        cli = admin(settings)
        try:
            committed = cli.list_group_offsets({settings.app_id: None}).get(settings.app_id, {})
        finally:
            cli.close()
        out: dict[tuple[str, int], int] = {}
        rest = []
        for tp in tps:
            meta = committed.get(tp)
            if meta is not None and meta.offset >= 0:
                out[(tp.topic, tp.partition)] = int(meta.offset)
            else:
                rest.append(tp)
        if rest:
            cons = consumer(settings)
            try:
                for tp, off in cons.beginning_offsets(rest).items():
                    out[(tp.topic, tp.partition)] = int(off)
            finally:
                cons.close()
    except KafkaError as exc:
        raise KafkaClientError(f"cannot read the start offsets of {sorted(set(partitions))}: "
                               f"{exc}") from None
    return out


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
