"""Consume throughput on a real local Kafka broker: raw aiokafka against pass-through Faust agents.

    .venv/bin/python benchmarks/kafka_throughput.py                 # 200k x 600 B, all variants
    .venv/bin/python benchmarks/kafka_throughput.py --messages 50000 --variants faust-default
    .venv/bin/python benchmarks/kafka_throughput.py --broker kafka://127.0.0.1:9092

Starts its own broker (:class:`sift.devbroker.DevBroker`, free ports, a temporary data dir)
unless ``--broker`` is given, creates one topic, produces the messages once, then runs
every variant in a fresh subprocess (its own consumer group, reading from the earliest
offset) and writes ``benchmarks/results/kafka_throughput.json``.

Each variant reports wall-clock messages/s *and* CPU microseconds per message (the
process's CPU time, every thread, over the same window). On a shared 2-core machine the
wall-clock rate moves with whatever else runs; the CPU cost per message does not much,
so compare variants on ``cpu_us_per_msg`` and read ``msgs_per_s`` with the load average.

Variants:

- ``aiokafka-getmany``: ``AIOKafkaConsumer.getmany()`` batches, counting records.
- ``aiokafka-iter``: ``async for msg in consumer`` (one await per message).
- ``faust-default``: a Faust agent ``async for value in stream: n += 1`` with default settings.
- ``faust-tuned``: the same agent with the settings of :data:`TUNED` (bigger stream buffer
  and fetches, a monitor whose per-message hooks do nothing).
- ``faust-take``: tuned, reading ``stream.take(1000, within=0.1)`` batches.
- ``faust-direct``: tuned, plus an experiment: the consumer's drain loop awaits the
  per-message callback directly instead of through ``Service.wait_first`` (which creates
  four tasks per message). Not safe for production as is (see docs/faust-notes.md); it
  shows how much of Faust's cost that one call is.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from sift.devbroker import DevBroker, bootstrap_servers, free_port  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "kafka_throughput.json"
RAW_VARIANTS = ("aiokafka-getmany", "aiokafka-iter")
FAUST_VARIANTS = ("faust-default", "faust-tuned", "faust-take", "faust-direct")
VARIANTS = RAW_VARIANTS + FAUST_VARIANTS

#: Faust settings that cost nothing in safety and help (or at least do not hurt) throughput.
TUNED: dict[str, Any] = {
    "stream_buffer_maxsize": 65536,  # default 4096: the agent's prefetch queue
    "broker_max_poll_records": 10000,  # default None (aiokafka: everything buffered)
    "consumer_max_fetch_size": 8 * 1024 * 1024,  # per partition; default 1 MiB
    "broker_commit_every": 50000,  # default 10000 acks between commits
    # and Monitor=QuietMonitor (below): no per-message latency/rate bookkeeping
}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# ------------------------------------------------------------------------------ produce
async def _produce(bootstrap: str, topic: str, n: int, size: int) -> dict[str, Any]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=20,
                                max_batch_size=512 * 1024)
    await producer.start()
    payload = (b"0123456789abcdef" * (size // 16 + 1))[:size]
    began = time.monotonic()
    try:
        pending: list[asyncio.Future[Any]] = []
        for i in range(n):
            pending.append(await producer.send(topic, payload, key=str(i).encode()))
            if len(pending) >= 20000:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    took = time.monotonic() - began
    return {"messages": n, "seconds": round(took, 3), "msgs_per_s": round(n / took)}


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="sift-bench")
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=30000)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            meta = admin.describe_topics([topic])[0]
            parts = meta.get("partitions") or []
            if len(parts) == partitions and all(p.get("leader_id", -1) >= 0 for p in parts):
                return
            time.sleep(0.1)
        raise TimeoutError(f"topic {topic} not ready")
    finally:
        admin.close()


# -------------------------------------------------------------------------- raw aiokafka
async def _raw(variant: str, bootstrap: str, topic: str, n: int, limit: float,
               partitions: int) -> dict[str, Any]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    if variant == "aiokafka-getmany":
        # partitions assigned, no group: the clock starts before the first fetch, which
        # a group consumer would already have made (and buffered) while joining, so a
        # topic that fits in one fetch (20,000 documents) measured nothing but a poll
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False,
            max_partition_fetch_bytes=8 * 1024 * 1024, fetch_max_bytes=64 * 1024 * 1024,
        )
        await consumer.start()
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        await consumer.seek_to_beginning()
    else:
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=f"bench-{uuid.uuid4().hex[:8]}",
            auto_offset_reset="earliest", enable_auto_commit=False,
            max_partition_fetch_bytes=8 * 1024 * 1024, fetch_max_bytes=64 * 1024 * 1024,
        )
        await consumer.start()
    count = 0
    t0 = c0 = 0.0
    deadline = time.monotonic() + limit
    try:
        if variant == "aiokafka-getmany":
            t0, c0 = time.monotonic(), time.process_time()
            while count < n and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=1000, max_records=10000)
                count += sum(len(records) for records in batches.values())
        else:
            async for _msg in consumer:
                if not t0:
                    t0, c0 = time.monotonic(), time.process_time()
                    continue
                count += 1
                if count >= n - 1 or time.monotonic() > deadline:
                    break
        t1, c1 = time.monotonic(), time.process_time()
    finally:
        await consumer.stop()
    return _figures(count, t1 - t0, c1 - c0, settings={"max_records": 10000})


# --------------------------------------------------------------------------------- faust
try:
    from faust.sensors.monitor import Monitor as _Monitor
except ImportError:  # pragma: no cover - faust is a dependency of sift
    _Monitor = object  # type: ignore[assignment,misc]


class QuietMonitor(_Monitor):  # type: ignore[misc,valid-type]
    """Faust's Monitor without its per-message bookkeeping (no latency/rate stats)."""

    def on_message_in(self, tp: Any, offset: int, message: Any) -> None:
        pass

    def on_stream_event_in(self, tp: Any, offset: int, stream: Any, event: Any) -> None:
        return None

    def on_stream_event_out(self, tp: Any, offset: int, stream: Any, event: Any,
                            state: Any = None) -> None:
        pass

    def on_message_out(self, tp: Any, offset: int, message: Any) -> None:
        pass

    def track_tp_end_offset(self, tp: Any, offset: int) -> None:
        pass


def _patch_direct_drain() -> None:
    """Experiment: await each message's callback directly while the flow is active."""
    from faust.transport import consumer as fc

    async def _drain_messages(self: Any, fetcher: Any) -> None:
        callback = self.callback
        getmany = self.getmany
        read_offset = self._read_offset
        while not (self._stopped.is_set() or fetcher._stopped.is_set()):
            await self.sleep(0)
            if self.should_stop:
                break
            async for tp, message in getmany(timeout=1.0):
                offset = message.offset
                r_offset = read_offset.get(tp)
                if r_offset is None or offset >= r_offset:
                    if r_offset and offset - r_offset > 1 and \
                            self.app.topics.acks_enabled_for(message.topic):
                        await self._add_gap(tp, r_offset + 1, offset)
                    if self._commit_every is not None and self._n_acked >= self._commit_every:
                        self._n_acked = 0
                        await self.commit()
                    if self.suspend_flow.is_set():
                        await self.wait_first(callback(message), self.suspend_flow.wait())
                    else:
                        await callback(message)
                    read_offset[tp] = offset

    fc.Consumer._drain_messages = _drain_messages  # type: ignore[method-assign]


async def _faust(variant: str, broker_url: str, topic: str, n: int, partitions: int,
                 limit: float) -> dict[str, Any]:
    import faust

    settings: dict[str, Any] = {}
    if variant != "faust-default":
        settings = {**TUNED, "Monitor": QuietMonitor}
    if variant == "faust-direct":
        _patch_direct_drain()
    datadir = tempfile.TemporaryDirectory(prefix="sift-bench-faust-")
    app = faust.App(
        f"bench-{variant}-{uuid.uuid4().hex[:8]}",
        broker=broker_url,
        store="memory://",
        datadir=datadir.name,  # Faust makes an (empty) table folder; not in the cwd
        web_enabled=False,
        topic_partitions=partitions,
        topic_disable_leader=True,
        consumer_auto_offset_reset="earliest",
        value_serializer="raw",
        key_serializer="raw",
        **settings,
    )
    source = app.topic(topic, value_serializer="raw", key_serializer="raw")
    state: dict[str, float] = {"count": 0, "t0": 0.0, "c0": 0.0, "t1": 0.0, "c1": 0.0}
    done = asyncio.Event()

    def seen(k: int) -> None:
        if not state["t0"]:
            state["t0"], state["c0"] = time.monotonic(), time.process_time()
            k -= 1  # the clock starts at the first message
        state["count"] += k
        if state["count"] >= n - 1:
            state["t1"], state["c1"] = time.monotonic(), time.process_time()
            done.set()

    if variant == "faust-take":
        @app.agent(source)
        async def passthrough_take(stream: Any) -> None:
            async for batch in stream.take(1000, within=0.1):
                seen(len(batch))
    else:
        @app.agent(source)
        async def passthrough(stream: Any) -> None:
            async for _value in stream:
                seen(1)

    await app.start()
    try:
        await asyncio.wait_for(done.wait(), timeout=limit)
    except TimeoutError:
        state["t1"], state["c1"] = time.monotonic(), time.process_time()
    finally:
        await app.stop()
        datadir.cleanup()
    if not state["t0"]:
        raise RuntimeError(f"{variant}: no message consumed within {limit:.0f}s")
    shown = {k: v for k, v in settings.items() if k != "Monitor"}
    if "Monitor" in settings:
        shown["Monitor"] = "QuietMonitor (no per-message stats)"
    if variant == "faust-take":
        shown["take"] = "stream.take(1000, within=0.1)"
    if variant == "faust-direct":
        shown["patch"] = "Consumer._drain_messages awaits callback directly"
    return _figures(int(state["count"]), state["t1"] - state["t0"], state["c1"] - state["c0"],
                    settings=shown)


def _figures(count: int, wall: float, cpu: float, *, settings: dict[str, Any]) -> dict[str, Any]:
    wall = max(wall, 1e-9)
    return {
        "messages": count,
        "seconds": round(wall, 3),
        "msgs_per_s": round(count / wall),
        "cpu_seconds": round(cpu, 3),
        "cpu_percent": round(100 * cpu / wall),
        "cpu_us_per_msg": round(1e6 * cpu / max(count, 1), 1),
        "msgs_per_cpu_s": round(count / max(cpu, 1e-9)),
        "settings": settings,
    }


def child(args: argparse.Namespace) -> int:
    """One variant in this process; prints one JSON line."""
    if args.variant in RAW_VARIANTS:
        result = asyncio.run(_raw(args.variant, bootstrap_servers(args.broker), args.topic,
                                  args.messages, args.limit, args.partitions))
    else:
        result = asyncio.run(_faust(args.variant, args.broker, args.topic, args.messages,
                                    args.partitions, args.limit))
    print("RESULT " + json.dumps({"variant": args.variant, **result}), flush=True)
    return 0


def _run_child(variant: str, broker_url: str, topic: str, args: argparse.Namespace
               ) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--variant", variant,
           "--broker", broker_url, "--topic", topic, "--messages", str(args.messages),
           "--partitions", str(args.partitions), "--limit", str(args.limit)]
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    load = _load()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=args.limit + 120,
                         env=env, check=False)
    for line in res.stdout.splitlines():
        if line.startswith("RESULT "):
            out: dict[str, Any] = json.loads(line[len("RESULT "):])
            out["load_before"] = load
            return out
    tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
    raise RuntimeError(f"{variant} failed (exit {res.returncode}): {tail[0]}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--messages", type=int, default=200_000)
    p.add_argument("--size", type=int, default=600, help="message value size in bytes")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--broker", default="", help="kafka://host:port (default: start a local one)")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--repeat", type=int, default=1, help="runs per variant (best CPU cost kept)")
    p.add_argument("--limit", type=float, default=180.0, help="seconds allowed per variant")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--variant", default="", help=argparse.SUPPRESS)
    p.add_argument("--topic", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args)

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        p.error(f"unknown variants {unknown}; choose from {', '.join(VARIANTS)}")

    broker: DevBroker | None = None
    tmp = tempfile.TemporaryDirectory(prefix="sift-bench-kafka-")
    try:
        if args.broker:
            broker_url = args.broker
        else:
            broker = DevBroker(port=free_port(), controller_port=free_port(),
                               data_dir=Path(tmp.name), heap="1g", die_with_parent=True)
            print(f"starting a local broker on {broker.bootstrap} ...", file=sys.stderr)
            broker.start()
            broker_url = broker.url
        bootstrap = bootstrap_servers(broker_url)
        topic = f"bench.{uuid.uuid4().hex[:8]}"
        _create_topic(bootstrap, topic, args.partitions)
        produced = asyncio.run(_produce(bootstrap, topic, args.messages, args.size))
        print(f"produced {args.messages} x {args.size} B: {produced['msgs_per_s']:,} msg/s",
              file=sys.stderr)
        results: list[dict[str, Any]] = []
        for variant in variants:
            runs = [_run_child(variant, broker_url, topic, args) for _ in range(args.repeat)]
            best = min(runs, key=lambda r: r["cpu_us_per_msg"])
            if len(runs) > 1:
                best["runs_msgs_per_s"] = [r["msgs_per_s"] for r in runs]
                best["runs_cpu_us_per_msg"] = [r["cpu_us_per_msg"] for r in runs]
            results.append(best)
            print(f"{variant:18s} {best['msgs_per_s']:>9,} msg/s"
                  f"  {best['cpu_us_per_msg']:>7} us CPU/msg"
                  f"  ({best['cpu_percent']}% CPU, load {best['load_before']})", file=sys.stderr)
    finally:
        if broker is not None:
            broker.stop()
        tmp.cleanup()

    import aiokafka
    import faust

    report = {
        "benchmark": "kafka_throughput",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join(["python benchmarks/kafka_throughput.py", *(argv or sys.argv[1:])]),
        "broker": f"external {broker_url}" if args.broker
        else "local Kafka 3.9.1 KRaft (sift.devbroker)",
        "messages": args.messages,
        "message_bytes": args.size,
        "partitions": args.partitions,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "faust": faust.__version__, "aiokafka": aiokafka.__version__,
                    "load_after": _load()},
        "produce": produced,
        "results": results,
        "note": "msgs_per_s is wall clock and moves with machine load; cpu_us_per_msg is the "
                "consumer process's CPU time (all threads) per message over the same window.",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
