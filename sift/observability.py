"""Metrics in the Prometheus text exposition format, event rates and JSON logs.

No dependency beyond the standard library: :class:`Registry` holds counters,
gauges and histograms (with labels) and renders them as the text format 0.0.4
that Prometheus scrapes (``GET /metrics``); :class:`RateMeter` gives events per
second over a sliding window from event timestamps; :class:`JsonFormatter`
writes one JSON object per log line.

>>> reg = Registry()
>>> c = reg.counter("sift_documents_total", "Documents read.")
>>> c.inc(3)
>>> print(reg.render().strip())
# HELP sift_documents_total Documents read.
# TYPE sift_documents_total counter
sift_documents_total 3
"""

from __future__ import annotations

import bisect
import logging
import math
import re
import sys
import time
import traceback
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def escape_label_value(value: str) -> str:
    r"""Escape a label value: backslash, double quote and line feed.

    >>> escape_label_value('a"b\\c\nd')
    'a\\"b\\\\c\\nd'
    """
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """Escape a HELP text: backslash and line feed."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value as Prometheus writes it (``+Inf``, ``NaN``, integers without ``.0``).

    >>> format_value(3.0), format_value(0.25), format_value(math.inf)
    ('3', '0.25', '+Inf')
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{escape_label_value(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


class _Metric:
    kind = "untyped"

    def __init__(self, name: str, help: str, labels: Sequence[str] = ()) -> None:
        if not _NAME.match(name):
            raise ValueError(f"bad metric name {name!r}")
        for label in labels:
            if not _LABEL.match(label) or label.startswith("__"):
                raise ValueError(f"bad label name {label!r}")
        self.name = name
        self.help = help
        self.label_names = tuple(labels)

    def _key(self, labels: dict[str, str] | None) -> tuple[str, ...]:
        labels = labels or {}
        if set(labels) != set(self.label_names):
            raise ValueError(f"{self.name} takes labels {self.label_names}, got {sorted(labels)}")
        return tuple(str(labels[n]) for n in self.label_names)

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {escape_help(self.help)}", f"# TYPE {self.name} {self.kind}"]

    def lines(self) -> list[str]:  # pragma: no cover - overridden
        raise NotImplementedError


class Counter(_Metric):
    """A monotonically increasing count (name should end in ``_total``)."""

    kind = "counter"

    def __init__(self, name: str, help: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name, help, labels)
        self.values: dict[tuple[str, ...], float] = {}
        if not self.label_names:
            self.values[()] = 0.0

    def inc(self, amount: float = 1.0, labels: dict[str, str] | None = None) -> None:
        # NaN passed ``amount < 0`` and made the series NaN for the life of the process
        if not 0 <= amount < math.inf:
            raise ValueError(f"a counter goes up by a finite amount, not {amount!r}")
        key = self._key(labels)
        self.values[key] = self.values.get(key, 0.0) + amount

    def get(self, labels: dict[str, str] | None = None) -> float:
        return self.values.get(self._key(labels), 0.0)

    def lines(self) -> list[str]:
        return [f"{self.name}{_labels(self.label_names, k)} {format_value(v)}"
                for k, v in sorted(self.values.items())]


class Gauge(_Metric):
    """A value that goes up and down; :meth:`replace` swaps all labelled values at once."""

    kind = "gauge"

    def __init__(self, name: str, help: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name, help, labels)
        self.values: dict[tuple[str, ...], float] = {}

    def set(self, value: float, labels: dict[str, str] | None = None) -> None:
        self.values[self._key(labels)] = float(value)

    def replace(self, items: Iterable[tuple[dict[str, str], float]]) -> None:
        """Set exactly these labelled values (others, e.g. deleted profiles, disappear)."""
        self.values = {self._key(lab): float(v) for lab, v in items}

    def get(self, labels: dict[str, str] | None = None) -> float | None:
        return self.values.get(self._key(labels))

    def lines(self) -> list[str]:
        return [f"{self.name}{_labels(self.label_names, k)} {format_value(v)}"
                for k, v in sorted(self.values.items())]


class Histogram(_Metric):
    """Observations counted in cumulative ``le`` buckets, with ``_sum`` and ``_count``."""

    kind = "histogram"

    def __init__(self, name: str, help: str, buckets: Sequence[float] = DEFAULT_BUCKETS) -> None:
        super().__init__(name, help)
        bounds = sorted(float(b) for b in buckets)
        if not bounds or any(math.isnan(b) for b in bounds):
            raise ValueError("a histogram needs finite bucket bounds")
        if bounds[-1] != math.inf:
            bounds.append(math.inf)
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        if math.isnan(value):
            return
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def observe_many(self, values: Iterable[float]) -> None:
        """:meth:`observe` each value."""
        counts, bounds, find = self.counts, self.bounds, bisect.bisect_left
        total, n = self.sum, self.count  # added in the same order as observe would
        for v in values:
            if v == v:  # not NaN
                counts[find(bounds, v)] += 1
                total += v
                n += 1
        self.sum, self.count = total, n

    def lines(self) -> list[str]:
        out = []
        running = 0
        for bound, n in zip(self.bounds, self.counts, strict=True):
            running += n
            out.append(f'{self.name}_bucket{{le="{format_value(bound)}"}} {running}')
        out.append(f"{self.name}_sum {format_value(self.sum)}")
        out.append(f"{self.name}_count {self.count}")
        return out


class Registry:
    """The metrics of one process, rendered in registration order."""

    def __init__(self) -> None:
        self.metrics: dict[str, _Metric] = {}

    def _add(self, metric: Any) -> Any:
        if metric.name in self.metrics:
            raise ValueError(f"metric {metric.name!r} registered twice")
        self.metrics[metric.name] = metric
        return metric

    def counter(self, name: str, help: str, labels: Sequence[str] = ()) -> Counter:
        return self._add(Counter(name, help, labels))  # type: ignore[no-any-return]

    def gauge(self, name: str, help: str, labels: Sequence[str] = ()) -> Gauge:
        return self._add(Gauge(name, help, labels))  # type: ignore[no-any-return]

    def histogram(self, name: str, help: str,
                  buckets: Sequence[float] = DEFAULT_BUCKETS) -> Histogram:
        return self._add(Histogram(name, help, buckets))  # type: ignore[no-any-return]

    def render(self) -> str:
        """The text exposition format (one trailing newline)."""
        out: list[str] = []
        for metric in self.metrics.values():
            out.extend(metric.header())
            out.extend(metric.lines())
        return "\n".join(out) + "\n"


class RateMeter:
    """Events per second over the last ``window`` seconds, from the events' own timestamps.

    Counting by event time (not by arrival) keeps a backlog read at start-up from
    showing as a spike.

    >>> m = RateMeter(window=10.0)
    >>> for t in range(100, 110):
    ...     m.add(float(t), 5, now=110.0)
    >>> m.rate(now=110.0)
    5.0
    """

    def __init__(self, window: float = 10.0) -> None:
        self.window = float(window)
        self._buckets: deque[tuple[int, int]] = deque()  # (second, count), ascending

    def add(self, ts: float, n: int = 1, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if ts < now - self.window - 1:
            return
        sec = int(min(ts, now))
        if self._buckets and self._buckets[-1][0] == sec:
            self._buckets[-1] = (sec, self._buckets[-1][1] + n)
        elif not self._buckets or self._buckets[-1][0] < sec:
            self._buckets.append((sec, n))
        else:  # out of order: insert (rare, short deque)
            items = dict(self._buckets)
            items[sec] = items.get(sec, 0) + n
            self._buckets = deque(sorted(items.items()))
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self._buckets and self._buckets[0][0] < now - self.window - 1:
            self._buckets.popleft()

    def rate(self, now: float | None = None) -> float:
        now = time.time() if now is None else now
        self._trim(now)
        start = now - self.window
        total = sum(n for sec, n in self._buckets if sec >= start)
        return total / self.window


# ----------------------------------------------------------------------------- logging
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
#: the keys every JSON line may have; an ``extra`` of one of these names is written as
#: ``extra_<name>``, so that no call (ours or a library's) can rewrite a record's level
_FIXED = frozenset({"ts", "level", "logger", "message", "exc", "stack", "log_error"})
#: line separators JSON may leave raw (valid JSON) but ``str.splitlines`` and other line
#: splitters cut at: written as escapes, a record stays one line for every reader
_SEPARATORS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})
_JSON_OPTIONS = orjson.OPT_NON_STR_KEYS


def _text(value: object) -> str:
    r"""``str(value)``, writable as UTF-8 whatever it holds (a lone surrogate, as a path
    decoded with ``surrogateescape`` has, is escaped) and whatever ``__str__`` does.

    >>> _text("bad \udcff"), _text(3)
    ('bad \\udcff', '3')
    """
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception as exc:  # a broken __str__ must not lose the record
        text = f"<unprintable {type(value).__name__}: {type(exc).__name__}>"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _encodable(value: object) -> object:
    """``value`` if orjson writes it, else its :func:`_text` (an int past 64 bits, a
    string with a lone surrogate, a dict with a tuple key: orjson refuses those without
    asking ``default``)."""
    try:
        orjson.dumps(value, default=_text, option=_JSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError
        return _text(value)
    return value


def one_line(text: str) -> str:
    r"""``text`` with its non-printable characters escaped as ``repr`` writes them (line
    feeds, carriage returns, U+2028, terminal escapes): user text in a log message (a
    document id, a profile name) cannot start a line that looks like a record of its own.

    >>> one_line("d1\n[2025] ERROR forged"), one_line("ünï 日本")
    ('d1\\n[2025] ERROR forged', 'ünï 日本')
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def indented(text: str) -> str:
    r"""Each line of ``text`` (a traceback, a stack) indented by two spaces and escaped
    (:func:`one_line`), so that no line of it starts at column 0 as a record does.

    >>> indented("Traceback:\nValueError: d1\r[2025] ERROR forged")
    '  Traceback:\n  ValueError: d1\n  [2025] ERROR forged'
    """
    # splitlines: CR, U+2028 and the like end a line there too
    return "\n".join(f"  {one_line(line)}" for line in text.splitlines())


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``message``, extras, ``exc``
    (the traceback), ``stack`` (``stack_info``).

    It never raises: a record that cannot be written as it is (bad ``%`` arguments, a
    value orjson refuses) is written with the offending parts as text and ``log_error``,
    instead of logging's multi-line ``--- Logging error ---`` on standard error and no
    record at all.

    >>> rec = logging.makeLogRecord({"name": "sift.web", "levelname": "INFO",
    ...                              "msg": "hello %s", "args": ("you",), "created": 0.0,
    ...                              "profile": "earn"})
    >>> JsonFormatter().format(rec)
    '{"ts":0.0,"level":"INFO","logger":"sift.web","message":"hello you","profile":"earn"}'
    """

    def format(self, record: logging.LogRecord) -> str:
        error = None
        try:
            message = record.getMessage()
        except Exception as exc:  # bad %-arguments, a msg whose __str__ raises
            message = _text(record.msg)
            error = (f"cannot format the message with its arguments {_text(record.args)}: "
                     f"{type(exc).__name__}: {_text(exc)}")
        out: dict[str, Any] = {"ts": record.created, "level": record.levelname,
                               "logger": record.name, "message": message}
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[f"extra_{key}" if key in _FIXED else key] = value
        if record.exc_info:
            out["exc"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        if error is not None:
            out["log_error"] = error
        try:
            data = orjson.dumps(out, default=_text, option=_JSON_OPTIONS)
        except TypeError:  # orjson.JSONEncodeError: write what can be, the rest as text
            data = orjson.dumps({_text(k): _encodable(v) for k, v in out.items()},
                                default=_text, option=_JSON_OPTIONS)
        return data.decode().translate(_SEPARATORS)


def _message(record: logging.LogRecord) -> str:
    """The record's message; one that cannot be formatted with its arguments is its
    template with a note (as :class:`JsonFormatter` keeps the record, not logging's
    "--- Logging error ---")."""
    try:
        return record.getMessage()
    except Exception as exc:
        return (f"{_text(record.msg)} (cannot format the message with its "
                f"arguments: {type(exc).__name__})")


class PlainFormatter(logging.Formatter):
    r"""Plain text, a record's first line its only line that starts at column 0.

    The message's non-printable characters are escaped (:func:`one_line`): ``sift web``
    logs the profile and ``doc_id`` of each judgment posted, and a ``doc_id`` with a line
    feed wrote a second "record" of its choosing. A traceback or a stack follows, each of
    its lines indented by two spaces (an exception's message can hold line feeds too).

    >>> rec = logging.makeLogRecord({"name": "sift.web", "levelname": "INFO",
    ...                              "msg": "judgment %s", "args": ("d1\nERROR forged",)})
    >>> PlainFormatter("%(levelname)s %(name)s: %(message)s").format(rec)
    'INFO sift.web: judgment d1\\nERROR forged'
    """

    def format(self, record: logging.LogRecord) -> str:
        record.message = _message(record)
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        out = one_line(self.formatMessage(record))
        more = []
        if record.exc_info:
            more.append(self.formatException(record.exc_info))
        if record.stack_info:
            more.append(self.formatStack(record.stack_info))
        for text in more:
            lines = indented(text)
            if lines:
                out += "\n" + lines
        return out


class OneLineFilter(logging.Filter):
    r"""A handler filter that escapes each record's message (:func:`one_line`) before any
    formatter sees it: ``sift worker`` logs plain text through Faust's own formatter,
    which writes a message as it is, so user text in it (a document id, a profile name
    that some message quotes without ``repr``) could start a forged record on a line of
    its own. A message that cannot be formatted with its arguments is kept as its
    template with a note, and a traceback is indented and escaped line by line
    (:func:`indented`), as :class:`PlainFormatter` writes them.

    >>> rec = logging.makeLogRecord({"msg": "document %s", "args": ("d1\nERROR forged",)})
    >>> OneLineFilter().filter(rec), rec.getMessage()
    (True, 'document d1\\nERROR forged')
    """

    def filter(self, record: logging.LogRecord) -> bool:
        # no arguments is (), as logging makes it: mode's ExtensionFormatter (Faust's on
        # a stream, the worker's default) turns None into (None,), and every record
        # failed to format (fifty-first session)
        record.msg, record.args = one_line(_message(record)), ()
        if record.exc_info and not record.exc_text:
            # as PlainFormatter writes it: a formatter writes exc_text when it is set, and
            # an exception's message can quote user text too
            record.exc_text = indented(logging.Formatter().formatException(record.exc_info))
        return True


def one_line_handlers(logger: logging.Logger) -> None:
    """Add :class:`OneLineFilter` to each of ``logger``'s handlers (once)."""
    for handler in logger.handlers:
        if not any(isinstance(f, OneLineFilter) for f in handler.filters):
            handler.addFilter(OneLineFilter())


#: the plain-text line of ``sift web`` (and of any process set up here without JSON)
PLAIN_FORMAT = "[%(asctime)s] %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str = "INFO", json_lines: bool = False) -> None:
    """Root logging to standard error: JSON lines (``SIFT_LOG_JSON``) or plain text, one
    record a line either way (warnings included: ``warnings`` wrote its own two plain
    lines, among the JSON ones too)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else PlainFormatter(PLAIN_FORMAT))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.captureWarnings(True)
