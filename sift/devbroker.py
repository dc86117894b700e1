"""A local single-node Apache Kafka broker (KRaft combined mode) for development and tests.

No Docker: the broker's jars come from Maven Central through ``kafka/pom.xml`` into
``.cache/kafka/libs`` and the broker runs as a plain ``java`` process::

    python -m sift.devbroker start            # 127.0.0.1:9092, controller on 9093
    python -m sift.devbroker status
    python -m sift.devbroker restart          # same data dir: messages survive
    python -m sift.devbroker stop
    python -m sift.devbroker logs -n 100
    python -m sift.devbroker clean            # stop, then delete the data dir

``scripts/kafka-local.sh`` wraps this module; the integration tests use
:class:`DevBroker` directly on free ports and a temporary data dir. Every step is
idempotent: ``fetch`` does nothing when the cached jars match the pom, ``start``
does nothing when the broker already runs, ``stop`` does nothing when it does not.

Per broker, ``<data_dir>`` (default ``.cache/kafka/data-<port>``) holds
``server.properties``, ``log4j.properties``, ``broker.pid``, ``server.log`` (log4j),
``broker.out`` (the JVM's own output) and ``kafka-logs/`` (the partitions and the
KRaft metadata log).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sift.errors import SiftError

KAFKA_VERSION = "3.9.1"
REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_POM = REPO_ROOT / "kafka" / "pom.xml"


def default_cache(root: Path = REPO_ROOT) -> Path:
    """Where the jars and the default data dirs live: ``<root>/.cache/kafka`` in a source
    checkout (``root`` holds ``kafka/pom.xml``), else ``.cache/kafka`` in the working
    directory, as the worker's ``.cache/sift-worker``. ``root`` of an installed package
    is site-packages: the folder was made there (forty-ninth session's packaging audit).

    >>> default_cache(Path("/nowhere"))
    PosixPath('.cache/kafka')
    """
    return root / ".cache" / "kafka" if (root / "kafka" / "pom.xml").is_file() else Path(".cache") / "kafka"


DEFAULT_CACHE = default_cache()
HOST = "127.0.0.1"

_LOG4J = """\
log4j.rootLogger={level}, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File={log}
log4j.appender.file.MaxFileSize=20MB
log4j.appender.file.MaxBackupIndex=2
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.org.apache.kafka.storage.internals.log.LogConfig=WARN
log4j.logger.org.apache.kafka.clients.admin.AdminClientConfig=WARN
"""


class BrokerError(SiftError):
    """The local broker cannot be fetched, started, reached or stopped."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = HOST, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def bootstrap_servers(url: str) -> str:
    """``kafka://h1:9092;kafka://h2:9092`` (Faust style) -> ``h1:9092,h2:9092``."""
    parts = [p.strip() for p in url.replace(";", ",").split(",") if p.strip()]
    return ",".join(p.split("://", 1)[-1].rstrip("/") for p in parts)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (created if missing), across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        data = path.read_bytes()[-200_000:]
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


#: a Java exception line, possibly a cause: ``Caused by: java.net.BindException: ...``
_EXCEPTION = re.compile(r"^(?:Caused by: )?(?:[\w$]+\.)+[\w$]*(?:Exception|Error)\b")
#: a log4j line's ``[timestamp] LEVEL`` head
_LOG_HEAD = re.compile(r"^\[[^\]]*\]\s+")


def startup_failure(log: str) -> str:
    """The line that says why a broker stopped during start-up, from its output and log.

    Kafka logs one ``ERROR`` line and then the exception with its stack trace, whose last
    ``Caused by:`` is the root cause; shutdown lines follow and may say ``ERROR`` too. So:
    the first ``ERROR`` line, with the root cause of the first exception after it.
    Without an ``ERROR`` line, the last exception line, or else the last line.
    """
    lines = [ln.rstrip() for ln in log.splitlines() if ln.strip()]
    if not lines:
        return "no log"
    first = next((i for i, ln in enumerate(lines) if " ERROR " in f" {_LOG_HEAD.sub('', ln)}"), None)
    if first is None:
        exc = [ln.strip() for ln in lines if _EXCEPTION.match(ln.strip())]
        return (exc or lines)[-1].strip()
    head = _LOG_HEAD.sub("", lines[first]).strip()
    cause = None
    for ln in lines[first + 1:]:
        text = ln.strip()
        if _EXCEPTION.match(text):
            if cause is not None and not text.startswith("Caused by: "):
                break  # a second, unrelated exception: keep the first one's chain
            cause = text.removeprefix("Caused by: ")
        elif cause is not None and not (text.startswith("at ") or text.startswith("...")):
            break  # the end of the trace
    return f"{head}: {cause}" if cause and cause not in head else head


def _manifest(libs: Path) -> list[str]:
    """``"<sha256>  <name>"`` of every jar in ``libs``, sorted by name (as sha256sum)."""
    return [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}"
            for p in sorted(libs.glob("*.jar"))]


def _jar_damage(libs: Path, manifest: list[str]) -> str | None:
    """What is wrong with the jars in ``libs`` against the manifest written when they were
    fetched, or ``None``. Without a manifest (a cache from before it), every jar must at
    least open as a zip archive."""
    jars = sorted(libs.glob("*.jar"))
    if not jars:
        return "no jars"
    if not manifest:
        for jar in jars:
            try:
                with zipfile.ZipFile(jar):
                    pass
            except (OSError, zipfile.BadZipFile) as exc:
                return f"{jar.name}: {exc}"
        return None
    try:
        now = _manifest(libs)
    except OSError as exc:
        return str(exc)
    if now == manifest:
        return None
    expected = {line.split("  ", 1)[-1]: line for line in manifest}
    found = {line.split("  ", 1)[-1]: line for line in now}
    for name in sorted(expected.keys() | found.keys()):
        if name not in found:
            return f"{name} is missing"
        if name not in expected:
            return f"{name} was not fetched"
        if found[name] != expected[name]:
            return f"{name} has changed since it was fetched"
    return "the manifest is unreadable"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _since(path: Path, offset: int, limit: int = 400_000) -> str:
    """The text of ``path`` from byte ``offset`` (its last ``limit`` bytes at most)."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(offset if offset <= size else 0)  # a file made again: from its start
            if size - fh.tell() > limit:
                fh.seek(size - limit)
            data = fh.read()
    except OSError:
        return ""
    return data.decode("utf-8", "replace")


def _cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (22 chars).

    Never starting with ``-`` (as Kafka's own ``Uuid.randomUuid`` does): ``kafka-storage
    format -t -abc...`` reads such an id as an option and fails ("expected one
    argument"), which made one broker start in 64 fail.
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not cid.startswith("-"):
            return cid


@dataclass
class DevBroker:
    """One local broker: its ports, its data dir and the java process serving them."""

    port: int = 9092
    controller_port: int = 9093
    cache_dir: Path = DEFAULT_CACHE
    data_dir: Path | None = None
    pom: Path = DEFAULT_POM
    heap: str = "512m"
    java: str = "java"
    auto_create_topics: bool = False
    num_partitions: int = 1
    log_level: str = "INFO"
    die_with_parent: bool = False
    extra_config: dict[str, str] = field(default_factory=dict)
    #: more arguments of the storage format (``kafka-storage format``), e.g.
    #: ``("--add-scram", "SCRAM-SHA-512=[name=alice,password=...]")`` for SCRAM users
    format_args: tuple[str, ...] = ()
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    #: where this start's part of the output and of the log begins (earlier starts' lines,
    #: errors among them, stay in both files)
    _log_starts: tuple[int, int] = field(default=(0, 0), init=False, repr=False)

    def __post_init__(self) -> None:
        # absolute: Java runs in the data directory, so relative paths would point elsewhere
        self.cache_dir = Path(self.cache_dir).resolve()
        default = self.cache_dir / f"data-{self.port}"
        self.data_dir = Path(self.data_dir).resolve() if self.data_dir else default
        if self.port == self.controller_port:
            raise BrokerError(f"broker port and controller port are both {self.port}")
        for name in ("port", "controller_port"):
            if not 1 <= getattr(self, name) <= 65535:
                raise BrokerError(f"{name} must be in [1, 65535], got {getattr(self, name)!r}")

    # ----------------------------------------------------------------- paths and names
    @property
    def data(self) -> Path:
        assert self.data_dir is not None
        return self.data_dir

    @property
    def libs_dir(self) -> Path:
        return self.cache_dir / "libs"

    @property
    def config_path(self) -> Path:
        return self.data / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.data / "server.log"

    @property
    def out_path(self) -> Path:
        return self.data / "broker.out"

    @property
    def pid_path(self) -> Path:
        return self.data / "broker.pid"

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:<port>``, for kafka-python and aiokafka."""
        return f"{HOST}:{self.port}"

    @property
    def url(self) -> str:
        """``kafka://127.0.0.1:<port>``, for Faust and ``SIFT_BROKER``."""
        return f"kafka://{self.bootstrap}"

    # ----------------------------------------------------------------------- fetch
    def fetch(self, *, force: bool = False) -> Path:
        """Download the broker's jars into ``libs_dir`` unless the cached ones match the pom."""
        self._check_pom()
        digest = hashlib.sha256(self.pom.read_bytes()).hexdigest()
        stamp = self.libs_dir / ".pom-sha256"
        with _locked(self.cache_dir / "fetch.lock"):
            if not force and stamp.is_file():
                stamped = stamp.read_text().splitlines()
                if stamped[:1] == [digest]:
                    damage = _jar_damage(self.libs_dir, stamped[1:])
                    if damage is None:
                        if len(stamped) == 1:  # a stamp from before the manifest: add it
                            stamp.write_text("\n".join([digest, *_manifest(self.libs_dir)]) + "\n")
                        return self.libs_dir
                    print(f"sift devbroker: the Kafka jars in {self.libs_dir} are damaged "
                          f"({damage}); fetching them again", file=sys.stderr)
            mvn = shutil.which("mvn")
            if mvn is None:
                raise BrokerError("Maven (mvn) is not installed: apt-get install maven")
            tmp = self.cache_dir / f"libs.tmp-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            cmd = [mvn, "-q", "-B", "-f", str(self.pom), "dependency:copy-dependencies",
                   f"-DoutputDirectory={tmp}"]
            res = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if res.returncode != 0 or not list(tmp.glob("kafka_2.13-*.jar")):
                shutil.rmtree(tmp, ignore_errors=True)
                last = (res.stdout + res.stderr).strip().splitlines()[-1:] or ["no output"]
                raise BrokerError(f"mvn could not fetch the Kafka jars: {last[0]}")
            shutil.rmtree(self.libs_dir, ignore_errors=True)
            tmp.rename(self.libs_dir)
            stamp.write_text("\n".join([digest, *_manifest(self.libs_dir)]) + "\n")
        return self.libs_dir

    # ------------------------------------------------------------------- configure
    def properties(self) -> dict[str, str]:
        """The broker's ``server.properties`` as a dict."""
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{HOST}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data / "kafka-logs"),
            "num.partitions": str(self.num_partitions),
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "auto.create.topics.enable": "true" if self.auto_create_topics else "false",
            "delete.topic.enable": "true",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "8",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "num.recovery.threads.per.data.dir": "1",
            "log.retention.hours": "168",
            "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
            "log.cleaner.threads": "1",
            "socket.request.max.bytes": str(100 * 1024 * 1024),
            "message.max.bytes": str(2 * 1024 * 1024),
            "replica.fetch.max.bytes": str(2 * 1024 * 1024),
        }
        props.update(self.extra_config)
        return props

    def configure(self) -> Path:
        """Write ``server.properties`` and ``log4j.properties`` into the data dir."""
        self.data.mkdir(parents=True, exist_ok=True)
        text = "".join(f"{k}={v}\n" for k, v in self.properties().items())
        self.config_path.write_text("# written by sift.devbroker; edits are overwritten\n" + text)
        (self.data / "log4j.properties").write_text(
            _LOG4J.format(level=self.log_level, log=self.log_path)
        )
        return self.config_path

    def _java(self) -> str:
        java = shutil.which(self.java)
        home = os.environ.get("JAVA_HOME", "")
        if java is None and self.java == "java" and home:  # not on PATH: JAVA_HOME's
            java = shutil.which(str(Path(home) / "bin" / "java"))
        if java is None:
            raise BrokerError(f"{self.java!r} not found (nor in JAVA_HOME): install a Java 17 "
                              f"runtime")
        return java

    def _classpath(self) -> str:
        if not list(self.libs_dir.glob("kafka_2.13-*.jar")):
            raise BrokerError(f"no Kafka jars in {self.libs_dir}: run 'fetch' first")
        return str(self.libs_dir / "*")

    def format(self) -> None:
        """Format the KRaft storage once (kept across restarts: ``meta.properties`` exists)."""
        if (self.data / "kafka-logs" / "meta.properties").is_file():
            return
        log4j = f"-Dlog4j.configuration=file:{self.data / 'log4j.properties'}"
        cmd = [self._java(), "-Xmx256m", log4j, "-cp", self._classpath(),
               "kafka.tools.StorageTool", "format",
               "-t", _cluster_id(), "-c", str(self.config_path), "--ignore-formatted",
               *self.format_args]
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            last = (res.stdout + res.stderr).strip().splitlines()[-1:] or ["no output"]
            raise BrokerError(f"kafka storage format failed: {last[0]}")

    # ------------------------------------------------------------------- processes
    def pid(self) -> int | None:
        """The pid of this data dir's live broker, else None (stale pid files are ignored)."""
        if self._proc is not None and self._proc.poll() is None:
            return self._proc.pid
        try:
            pid = int(self.pid_path.read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return None
        ours = b"kafka.Kafka" in cmdline and str(self.config_path).encode() in cmdline
        if state == "Z" or not ours:
            return None
        return pid

    def is_running(self) -> bool:
        return self.pid() is not None

    def is_ready(self, timeout: float = 5.0) -> bool:
        """Whether the broker answers an admin request and has registered itself."""
        if not port_open(self.port):
            return False
        return admin_ready(self.bootstrap, timeout=timeout)

    @classmethod
    def throwaway(cls, prefix: str = "sift-bench-kafka-", *, heap: str = "1g",
                  timeout: float = 180.0, extra_config: dict[str, str] | None = None) -> DevBroker:
        """A broker for one benchmark run, started: free ports, a fresh data directory
        (``prefix`` in the temporary folder; the caller removes ``broker.data`` after
        :meth:`stop`), ended with this process if it dies; ``extra_config`` overrides
        properties."""
        import tempfile

        broker = cls(port=free_port(), controller_port=free_port(),
                     data_dir=Path(tempfile.mkdtemp(prefix=prefix)), die_with_parent=True,
                     heap=heap, extra_config=dict(extra_config or {}))
        print(f"starting a broker on {broker.bootstrap}", flush=True)
        return broker.start(timeout=timeout)

    def _check_pom(self) -> None:
        """A one-line error unless the pom exists: an installed package has none (it
        said only that the pom "ships with the sift repo", and ``start`` had made its
        data dir by then)."""
        if not self.pom.is_file():
            raise BrokerError(f"{self.pom}: no such file: the local broker needs a source checkout "
                              "of sift (its kafka/pom.xml names the broker's jars); with the "
                              "installed package, set SIFT_BROKER=kafka://HOST:PORT to a running "
                              "broker")

    def start(self, *, timeout: float = 90.0) -> DevBroker:
        """Fetch (if needed), configure, format (once) and start; wait until it answers."""
        if not self.is_running():
            self._check_pom()  # before anything is made on disk
        with _locked(self.data / ".lock"):
            if self.is_running():
                self.wait_ready(timeout=timeout)
                return self
            for p in (self.port, self.controller_port):
                if port_open(p):
                    raise BrokerError(f"port {p} on {HOST} is already in use by another process")
            self.fetch()
            java = self._java()
            self.configure()
            self.format()
            cmd = [
                java, f"-Xmx{self.heap}", "-Xms128m", "-server",
                "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExplicitGCInvokesConcurrent",
                "-Djava.awt.headless=true",
                f"-Dlog4j.configuration=file:{self.data / 'log4j.properties'}",
                f"-Dkafka.logs.dir={self.data}",
                "-cp", self._classpath(), "kafka.Kafka", str(self.config_path),
            ]
            self._log_starts = (_size(self.out_path), _size(self.log_path))
            with open(self.out_path, "ab") as out:
                out.write(f"\n=== start {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
                out.flush()
                self._proc = subprocess.Popen(
                    cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    cwd=self.data, start_new_session=True,
                    preexec_fn=_die_with_parent if self.die_with_parent else None,
                )
            self.pid_path.write_text(f"{self._proc.pid}\n")
            try:
                self.wait_ready(timeout=timeout)
            except (BrokerError, KeyboardInterrupt):  # Ctrl-C too: leave no broker behind
                self.stop()
                raise
        return self

    def wait_ready(self, *, timeout: float = 90.0) -> None:
        """Block until the broker answers; raise BrokerError if it dies or the time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.is_running():
                # this start's part of the output and of the log (a stack trace with its
                # causes runs to a hundred lines)
                why = startup_failure(_since(self.out_path, self._log_starts[0]) + "\n"
                                      + _since(self.log_path, self._log_starts[1]))
                raise BrokerError(f"broker on port {self.port} exited during start-up: {why} "
                                  f"(see {self.log_path})")
            if self.is_ready(timeout=3.0):
                return
            if time.monotonic() > deadline:
                raise BrokerError(f"broker on port {self.port} did not answer within {timeout:.0f}s"
                                  f" (see {self.log_path})")
            time.sleep(0.25)

    def stop(self, *, timeout: float = 30.0) -> bool:
        """SIGTERM the broker, wait up to ``timeout`` seconds, then SIGKILL. True if it ran."""
        pid = self.pid()
        if pid is None:
            self._reap()
            self.pid_path.unlink(missing_ok=True)
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not self._wait_exit(pid, timeout):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            self._wait_exit(pid, 10.0)
        self._reap()
        self.pid_path.unlink(missing_ok=True)
        return True

    def kill(self) -> bool:
        """SIGKILL the broker at once (a crash, for fault-injection tests). True if it ran."""
        pid = self.pid()
        if pid is None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        self._wait_exit(pid, 10.0)
        self._reap()
        return True

    def restart(self, *, timeout: float = 90.0) -> DevBroker:
        """Stop, then start on the same ports and data dir."""
        self.stop()
        # The listener sockets close with the process; wait until the ports are free again.
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            if not (port_open(self.port) or port_open(self.controller_port)):
                break
            time.sleep(0.1)
        return self.start(timeout=timeout)

    def clean(self) -> None:
        """Stop the broker and delete its data dir."""
        self.stop()
        shutil.rmtree(self.data, ignore_errors=True)

    def status(self) -> dict[str, Any]:
        pid = self.pid()
        return {
            "running": pid is not None,
            "ready": pid is not None and self.is_ready(timeout=3.0),
            "pid": pid,
            "bootstrap": self.bootstrap,
            "controller": f"{HOST}:{self.controller_port}",
            "data_dir": str(self.data),
            "log": str(self.log_path),
        }

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.pid == pid:
                try:
                    self._proc.wait(timeout=0.1)
                    return True
                except subprocess.TimeoutExpired:
                    continue
            if self.pid() is None:
                return True
            time.sleep(0.1)
        return False

    def _reap(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=1.0)
            self._proc = None


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when the parent (thread) dies (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def admin_ready(bootstrap: str, timeout: float = 5.0) -> bool:
    """Whether the cluster at ``bootstrap`` answers a kafka-python admin request with a broker."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    ms = int(timeout * 1000)
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=ms,
                                 bootstrap_timeout_ms=ms, client_id="sift-devbroker")
    except (KafkaError, OSError, ValueError):
        return False
    try:
        cluster = admin.describe_cluster()
        admin.list_topics()
        return bool(cluster.get("brokers"))
    except (KafkaError, OSError, ValueError):
        return False
    finally:
        admin.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kafka-local", description="A local single-node Kafka broker (KRaft) for sift."
    )
    parser.add_argument("command", choices=["fetch", "start", "stop", "restart", "status", "logs",
                                            "clean", "config"])
    parser.add_argument("--port", type=int, default=9092, help="client (PLAINTEXT) port")
    parser.add_argument("--controller-port", type=int, default=None,
                        help="KRaft controller port (default: port + 1)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="broker data dir (default: .cache/kafka/data-PORT)")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE,
                        help="where jars and default data dirs live")
    parser.add_argument("--heap", default="512m", help="JVM -Xmx (default 512m)")
    parser.add_argument("--auto-create-topics", action="store_true",
                        help="let the broker create topics on first use (off by default)")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for start-up")
    parser.add_argument("-n", "--lines", type=int, default=50, help="lines shown by 'logs'")
    args = parser.parse_args(argv)
    broker = DevBroker(
        port=args.port,
        controller_port=args.controller_port or args.port + 1,
        cache_dir=args.cache_dir,
        data_dir=args.data_dir,
        heap=args.heap,
        auto_create_topics=args.auto_create_topics,
    )
    try:
        return _run(broker, args)
    except BrokerError as exc:
        print(f"kafka-local {args.command}: error: {exc}", file=sys.stderr)
        return 1


def _run(broker: DevBroker, args: argparse.Namespace) -> int:
    cmd = args.command
    if cmd == "fetch":
        libs = broker.fetch()
        print(f"Kafka {KAFKA_VERSION} jars in {libs}")
    elif cmd in ("start", "restart"):
        began = time.monotonic()
        was = broker.is_running()
        if cmd == "restart":
            broker.restart(timeout=args.timeout)
        else:
            broker.start(timeout=args.timeout)
        took = time.monotonic() - began
        what = "already running" if cmd == "start" and was else f"started in {took:.1f}s"
        print(f"broker {what}: pid {broker.pid()} on {broker.bootstrap} (SIFT_BROKER={broker.url})")
    elif cmd == "stop":
        print("broker stopped" if broker.stop() else "broker was not running")
    elif cmd == "status":
        st = broker.status()
        if not st["running"]:
            print(f"broker stopped (data dir {st['data_dir']})")
            return 3
        state = "ready" if st["ready"] else "not answering"
        print(f"broker running, {state}: pid {st['pid']} on {st['bootstrap']},"
              f" data dir {st['data_dir']}")
        return 0 if st["ready"] else 1
    elif cmd == "logs":
        text = _tail(broker.log_path, args.lines) or _tail(broker.out_path, args.lines)
        print(text or f"no log yet at {broker.log_path}")
    elif cmd == "clean":
        broker.clean()
        print(f"removed {broker.data}")
    elif cmd == "config":
        broker.configure()
        print(broker.config_path.read_text(), end="")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
