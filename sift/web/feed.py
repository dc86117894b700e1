"""The web process's Kafka side: one consumer feeding :class:`WebState`, one producer.

The consumer belongs to no group (it commits nothing and disturbs no worker):
it reads documents, decisions, judgments, profiles, dead letters, review status and requests
and the profile table's and journal table's changelogs from the start (or only new messages), and
the consumer group of the workers (``SIFT_APP_ID``) is polled for its lag.

The web creates no topic (the workers do): the consumer subscribes by a pattern naming
exactly its topics, so those that do not exist yet are read once they appear and are
never asked for by name (a broker with ``auto.create.topics.enable`` creates a topic a
client asks metadata of, with its own partition count), and the producer refuses to
publish to a topic that does not exist.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
from typing import Any

from sift.agents.app import JOURNAL_TABLE, TABLE
from sift.errors import ConfigError
from sift.kafkaclient import bootstrap
from sift.settings import Settings
from sift.web.state import WebState

log = logging.getLogger("sift.web.feed")

#: Logical topics the web reads, and the worker topics whose lag it reports.
READ_TOPICS = ("documents", "decisions", "judgments", "profiles", "dead-letters", "review-status",
               "requests")
LAG_TOPICS = ("documents", "judgments", "profiles", "shard-documents")
MAX_RECORD = 17 * 1024 * 1024
LAG_INTERVAL = 3.0


def aiokafka_config(settings: Settings) -> dict[str, Any]:
    """Connection and security options for aiokafka clients."""
    proto = settings.security_protocol.upper()
    cfg: dict[str, Any] = {"bootstrap_servers": bootstrap(settings), "security_protocol": proto}
    if proto in ("SSL", "SASL_SSL"):
        context = ssl.create_default_context(cafile=settings.ssl_cafile or None)
        if settings.ssl_certfile:
            context.load_cert_chain(settings.ssl_certfile, settings.ssl_keyfile or None)
        cfg["ssl_context"] = context
    if proto.startswith("SASL"):
        cfg["sasl_mechanism"] = (settings.sasl_mechanism or "PLAIN").upper()
        if settings.sasl_username:
            cfg["sasl_plain_username"] = settings.sasl_username
            cfg["sasl_plain_password"] = settings.sasl_password
    return cfg


class KafkaPublisher:
    """Publishes the web's writes with an aiokafka producer (default murmur2 partitioner)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.producer: Any = None
        #: topics seen to exist (they are not deleted under a running service)
        self.existing: set[str] = set()

    async def start(self) -> None:
        from aiokafka import AIOKafkaProducer

        self.producer = AIOKafkaProducer(**aiokafka_config(self.settings), acks="all",
                                         request_timeout_ms=15_000)
        await self.producer.start()

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        if self.producer is None:
            raise RuntimeError("the producer is not started")
        if topic not in self.existing:
            # sending asks the broker for the topic by name, which creates it where
            # auto-creation is on (with the broker's partition count, not SIFT_PARTITIONS)
            # and waits out the time-out where it is off
            cluster = await asyncio.wait_for(self.producer.client.fetch_all_metadata(), 20.0)
            if topic not in cluster.topics():
                raise RuntimeError(
                    f"topic {topic} does not exist (sift web creates no topic): is a worker "
                    f"running with SIFT_TOPIC_PREFIX={self.settings.topic_prefix!r}?")
            self.existing.add(topic)
        await asyncio.wait_for(self.producer.send_and_wait(topic, value=value, key=key), 20.0)

    async def stop(self) -> None:
        if self.producer is not None:
            await self.producer.stop()


class KafkaFeed:
    """Consume the wire topics into ``state`` until stopped.

    Parameters
    ----------
    settings
        Broker, prefix and the workers' ``app_id`` (for the changelog and the lag).
    state
        The view to feed.
    from_beginning
        Read each topic from its oldest message (default), else only new ones.
    """

    def __init__(self, settings: Settings, state: WebState, *,
                 from_beginning: bool = True) -> None:
        self.settings = settings
        self.state = state
        self.from_beginning = from_beginning
        self.changelog = f"{settings.app_id}-{TABLE}-changelog"
        self.topics = {settings.topic(t): t for t in READ_TOPICS}
        self.topics[self.changelog] = "changelog"
        # the judgment journals: a profile's threshold and model version between records
        self.topics[f"{settings.app_id}-{JOURNAL_TABLE}-changelog"] = "journal"
        self.consumer: Any = None
        self.tasks: list[asyncio.Task[None]] = []
        #: the end offsets, at start, of the partitions of the topics read that existed
        #: then: read up to them, the state has caught up (None: not taken yet)
        self.targets: dict[Any, int] | None = None
        self._lag_consumer: Any = None
        self._lag_error = ""

    async def start(self) -> None:
        from aiokafka import AIOKafkaConsumer

        self.consumer = AIOKafkaConsumer(
            **aiokafka_config(self.settings), group_id=None, enable_auto_commit=False,
            auto_offset_reset="earliest" if self.from_beginning else "latest",
            max_partition_fetch_bytes=MAX_RECORD, fetch_max_bytes=4 * MAX_RECORD,
            metadata_max_age_ms=3000)
        await self.consumer.start()
        self.consumer.subscribe(pattern=self.pattern())
        self.tasks = [asyncio.create_task(self._consume(), name="sift-web-consume"),
                      asyncio.create_task(self._lag_loop(), name="sift-web-lag")]

    def pattern(self) -> str:
        """A pattern matching exactly the topics read (see the module's docstring)."""
        return "^(?:" + "|".join(re.escape(t) for t in sorted(self.topics)) + r")\Z"

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.consumer is not None:
            await self.consumer.stop()
        if self._lag_consumer is not None:
            self._lag_consumer.close()
            self._lag_consumer = None

    def handle(self, topic: str, key: bytes | None, value: bytes | None, ts_ms: int) -> None:
        """Route one record to the state (never raises on bad input)."""
        kind = self.topics.get(topic)
        ts = ts_ms / 1000.0 if ts_ms and ts_ms > 0 else 0.0
        st = self.state
        if kind == "documents":
            st.on_documents(value, ts)
        elif kind == "decisions":
            st.on_decision(value)
        elif kind == "judgments":
            st.on_judgment(value, ts)
        elif kind == "profiles":
            st.on_profile_spec(value)
        elif kind == "dead-letters":
            st.on_dead_letter(value, ts, self.topics)
        elif kind == "review-status":
            st.on_review_status(value, ts)
        elif kind == "requests":
            st.on_request(value, ts)
        elif kind == "changelog" and key:
            st.on_profile_state(key.decode("utf-8", "replace"), value, ts)
        elif kind == "journal" and key:
            st.on_profile_journal(key.decode("utf-8", "replace"), value, ts)

    async def _consume(self) -> None:
        while True:
            try:
                batches = await self.consumer.getmany(timeout_ms=500, max_records=5000)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep serving pages while the broker is away
                log.warning("reading the topics failed: %s", exc)
                await asyncio.sleep(1.0)
                continue
            for tp, records in batches.items():
                for r in records:
                    try:
                        self.handle(tp.topic, r.key, r.value, r.timestamp)
                    except Exception:  # a bug must not stop the feed
                        log.exception("cannot use a record of %s", tp.topic)
            if not self.state.caught_up:
                try:
                    self.state.set_behind(await self.behind())
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the broker away: asked again on the next round
                    log.debug("cannot tell how far behind the feed is: %s", exc)
            await asyncio.sleep(0)

    async def behind(self) -> int | None:
        """Messages still to read of what the topics held when the feed started (``None``
        until the subscription has assigned every partition of the topics that existed).

        The targets are taken once: a worker's writes after that do not keep the web
        "catching up" for ever on a busy topic.
        """
        consumer = self.consumer
        if self.targets is None:
            # asked again while not all assigned: a topic deleted meanwhile is not waited for
            present = {t for t in await consumer.topics() if t in self.topics}
            assigned = [tp for tp in consumer.assignment() if tp.topic in present]
            if {tp.topic for tp in assigned} != present:
                return None
            self.targets = dict(await consumer.end_offsets(assigned)) if assigned else {}
        left = 0
        assignment = consumer.assignment()
        for tp, end in self.targets.items():
            if tp not in assignment:  # its topic deleted since
                continue
            left += max(int(end) - int(await consumer.position(tp)), 0)
        return left

    def _end_offsets(self, tps: list[Any]) -> dict[Any, int]:
        """End offsets of any partitions (kafka-python, blocking: run it in a thread).

        Its consumer needs no subscription to the topic, so the shard topic works too.
        """
        from kafka.structs import TopicPartition

        from sift.kafkaclient import consumer

        if self._lag_consumer is None:
            self._lag_consumer = consumer(self.settings)
        try:
            ends = self._lag_consumer.end_offsets([TopicPartition(tp.topic, tp.partition)
                                                   for tp in tps])
        except KeyError as exc:  # kafka-python: a partition whose leader is not known
            raise RuntimeError(f"no end offset for {exc.args[0] if exc.args else 'a partition'}: "
                               "its leader is not known (a broker restarting, or the topic "
                               "being created?)") from None
        return {(tp.topic, tp.partition): int(n) for tp, n in ends.items()}

    async def lag(self) -> dict[str, int]:
        """Messages not yet committed by the workers' consumer group, per topic."""
        from aiokafka.admin import AIOKafkaAdminClient

        settings = self.settings
        admin = AIOKafkaAdminClient(**aiokafka_config(settings), request_timeout_ms=10_000)
        await admin.start()
        try:
            committed = await admin.list_consumer_group_offsets(settings.app_id)
            topics = set(await admin.list_topics())  # all of them: nothing is created
        finally:
            await admin.close()
        # a misspelt SIFT_APP_ID or SIFT_TOPIC_PREFIX showed an empty dashboard and no
        # lag, as if the service had nothing to do (forty-fourth session)
        if self.changelog not in topics:
            raise ConfigError(f"topic {self.changelog} does not exist: no worker with "
                              f"SIFT_APP_ID={settings.app_id!r} has run on this broker (a "
                              "worker creates it when it starts)")
        wanted = {settings.topic(t): t for t in LAG_TOPICS}
        tps = [tp for tp, meta in committed.items()
               if tp.topic in wanted and meta is not None and meta.offset >= 0]
        if not tps:
            names = ", ".join(sorted(wanted))
            if committed:
                raise ConfigError(f"the workers' group {settings.app_id!r} (SIFT_APP_ID) has "
                                  f"committed offsets of other topics only, none of {names}: "
                                  f"is SIFT_TOPIC_PREFIX={settings.topic_prefix!r} the "
                                  "workers'?")
            raise RuntimeError(f"the workers' group {settings.app_id!r} (SIFT_APP_ID) has "
                               f"committed no offsets on {names}: no worker of it has "
                               "consumed a message here yet")
        loop = asyncio.get_running_loop()
        ends = await loop.run_in_executor(None, self._end_offsets, tps)
        out: dict[str, int] = {}
        for tp in tps:
            name = wanted[tp.topic]
            lag = ends.get((tp.topic, tp.partition), 0) - int(committed[tp].offset)
            out[name] = out.get(name, 0) + max(lag, 0)
        return out

    async def _lag_loop(self) -> None:
        while True:
            try:
                self.state.set_lag(await asyncio.wait_for(self.lag(), 30.0))
                self._lag_error = ""
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                reason = str(exc) or type(exc).__name__
                self.state.lag_unavailable(reason)
                if reason != self._lag_error:  # say it once, not every 3 s
                    log.warning("consumer lag unavailable: %s", reason)
                    self._lag_error = reason
            await asyncio.sleep(LAG_INTERVAL)
