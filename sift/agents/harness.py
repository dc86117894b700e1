"""Run and observe workers from outside: for integration tests, benchmarks and ``sift demo``.

A :class:`WorkerProcess` is a ``sift worker`` subprocess with its own data dir
(where it writes ``stats.json`` every ``SIFT_STATS_INTERVAL`` seconds, 0.25 by default,
and at shutdown) and log file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from sift.errors import SiftError

# read_all lives in sift.kafkaclient (the command line's `profiles list` and `review
# status` read with it); importable from here for the tests
from sift.kafkaclient import read_all
from sift.settings import Settings


class HarnessError(SiftError):
    """A worker did not start, stop or reach the expected state in time."""


def settings_env(settings: Settings) -> dict[str, str]:
    """``SIFT_*`` variables that reproduce ``settings`` in a child process."""
    from dataclasses import fields

    return {f"SIFT_{f.name.upper()}": str(getattr(settings, f.name)).lower()
            if isinstance(getattr(settings, f.name), bool) else str(getattr(settings, f.name))
            for f in fields(settings)}


class WorkerProcess:
    """A ``sift worker`` child process."""

    def __init__(self, settings: Settings, name: str = "worker", *, log_dir: Path | None = None,
                 extra_env: dict[str, str] | None = None, args: Sequence[str] = ()) -> None:
        self.settings = settings
        self.name = name
        self.args = list(args)  # more ``sift worker`` arguments, e.g. ["--web"]
        self.data_dir = Path(settings.data_dir)
        self.log_path = (log_dir or self.data_dir) / f"{name}.log"
        self.extra_env = dict(extra_env or {})
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def stats_path(self) -> Path:
        return self.data_dir / "stats.json"

    def start(self) -> WorkerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.stats_path.unlink()
        env = {**os.environ, **settings_env(self.settings), **self.extra_env}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "sift.cli", "worker", *self.args],
                                         env=env,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stats(self) -> dict[str, Any]:
        try:
            return dict(orjson.loads(self.stats_path.read_bytes()))
        except (OSError, orjson.JSONDecodeError):
            return {}

    def ready(self) -> bool:
        """Started, assigned partitions and wrote its stats."""
        if not self.alive():
            raise HarnessError(f"{self.name} exited with {self.proc and self.proc.returncode}: "
                               f"{self.log_tail()}")
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return False
        return "Worker]: Ready" in text and bool(self.stats())

    def wait_ready(self, timeout: float = 90.0) -> WorkerProcess:
        wait_for(self.ready, timeout, f"{self.name} ready")
        return self

    def stop(self, timeout: float = 30.0) -> int | None:
        """Graceful stop (SIGTERM: Faust commits and leaves the group); SIGKILL after timeout."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def kill(self) -> None:
        """Crash (SIGKILL): nothing committed after the last auto-commit."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def log_tail(self, n: int = 15) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])


class WebProcess:
    """A ``sift web`` child process."""

    def __init__(self, settings: Settings, log_path: Path) -> None:
        self.settings = settings
        self.log_path = log_path
        self.url = f"http://{settings.web_host}:{settings.web_port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WebProcess:
        env = {**os.environ, **settings_env(self.settings)}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "sift.cli", "web"], env=env,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        return self

    def get(self, path: str) -> Any:
        """``GET path`` decoded from JSON."""
        import urllib.request

        with urllib.request.urlopen(self.url + path, timeout=10) as resp:
            return orjson.loads(resp.read())

    def ready(self) -> bool:
        """Answering ``/api/stats`` and caught up with what the topics held when it
        started; raises :class:`HarnessError` if the process exited."""
        if self.proc is None or self.proc.poll() is not None:
            raise HarnessError(f"sift web exited: {self.log_path.read_text()[-2000:]}")
        try:
            return bool(self.get("/api/stats").get("caught_up"))
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux), so a killed test
    or benchmark leaves no orphaned worker behind."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def wait_for(predicate: Callable[[], Any], timeout: float, what: str,
             interval: float = 0.2) -> Any:
    """Poll ``predicate`` until it returns something true; HarnessError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise HarnessError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def total(workers: Iterable[WorkerProcess], key: str) -> int:
    """Sum of a ``stats`` counter over workers."""
    return sum(int(w.stats().get("stats", {}).get(key, 0)) for w in workers)




def changelog_tables(settings: Settings, *, idle: float = 1.5
                     ) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The profile state table and the judgment journal table as their changelog topics
    hold them now (the last value of each key; a deleted key left out)."""
    from sift.agents.app import JOURNAL_TABLE, TABLE
    from sift.agents.service import shard_of

    out: tuple[dict[str, bytes], dict[str, bytes]] = ({}, {})
    for name_of_table, latest in zip((TABLE, JOURNAL_TABLE), out, strict=True):
        for key, value, partition, _ in read_all(
                settings, f"{settings.app_id}-{name_of_table}-changelog", idle=idle):
            name = (key or b"").decode()
            if partition != shard_of(name, settings.partitions):
                raise HarnessError(f"{name_of_table}: {name!r} on partition {partition}, "
                                   "not its shard")
            if value:
                latest[name] = value
            else:
                latest.pop(name, None)
    return out


def recovered_profiles(settings: Settings, service: Any, *, idle: float = 1.5) -> dict[str, Any]:
    """The profiles a worker recovering now would hold: the changelogs read back
    (:func:`changelog_tables`) by a fresh ``Service`` on ``service``'s training set.
    Raises :class:`HarnessError` if a record or journal cannot be used."""
    from sift.agents.service import Service

    records, journals = changelog_tables(settings, idle=idle)
    fresh = Service(service.training, n_shards=settings.partitions, journal=journals)
    out = {name: fresh.entry(name, records) for name in records}
    if fresh.stats["bad_state"] or fresh.stats["bad_journal"]:
        raise HarnessError(f"unusable changelog values: {dict(fresh.stats)}")
    return out


def send_all(settings: Settings, topic: str,
             messages: Iterable[tuple[bytes | None, bytes]]) -> int:
    """Send (key, value) pairs and flush; the count sent (a message the broker refused
    raises :class:`~sift.kafkaclient.KafkaClientError`)."""
    from sift.kafkaclient import Sends, producer

    prod = producer(settings)
    sends = Sends(prod)
    n = 0
    try:
        for key, value in messages:
            n += 1
            sends.send(topic, key, value, f"message {n} to {topic} ({len(value):,} bytes)")
        sends.flush(timeout=60)
    finally:
        prod.close(timeout=10)
    return n
