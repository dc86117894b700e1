"""Observability as an operator consumes it (forty-ninth session's audit, /tmp/s49/metrics.md).

Both ``/metrics`` pages (the worker's and ``sift web``'s) are checked strictly against the
text exposition format 0.0.4 by a checker of our own (so the suite checks the core
properties without any client library) and by ``prometheus_client``'s parser (a test
dependency) too. Then the findings, one test each (F1..F8): labels whose values grow
without bound, known label values absent until their first event, a counter stuck at
+Inf, the docs' tables against the registries, and the logs (JSON lines that a record
could break, fields it could overwrite, plain-text lines user text could forge).
"""

from __future__ import annotations

import io
import logging
import math
import re
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from sift import observability
from sift.agents import metrics
from sift.agents.metrics import COUNTERS, WorkerMetrics
from sift.observability import Counter, JsonFormatter, configure_logging
from sift.web.state import WebState
from tests.web.conftest import fill, review_fill

ROOT = Path(__file__).resolve().parents[2]
#: the parts of the main thread's CPU time the service counts (``cpu_<part>_us``)
PARTS = ("route", "score_here", "copies", "score_copies")

# ------------------------------------------------------------------ a strict 0.0.4 checker
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL_VALUE = r'"(?:[^"\\\n]|\\[\\"n])*"'  # the only escapes are \\, \" and \n
_LABELS = rf"\{{(?:[a-zA-Z_][a-zA-Z0-9_]*={_LABEL_VALUE}(?:,[a-zA-Z_][a-zA-Z0-9_]*={_LABEL_VALUE})*)?\}}"
_VALUE = r"(?:[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]Inf|NaN)"
SAMPLE = re.compile(rf"^({_NAME})({_LABELS})? ({_VALUE})$")
PAIR = re.compile(rf'([a-zA-Z_][a-zA-Z0-9_]*)=({_LABEL_VALUE})')
KINDS = {"counter", "gauge", "histogram"}


def _unescape(quoted: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), quoted[1:-1])


def strict_parse(text: str) -> dict[str, tuple[str, list[tuple[str, dict[str, str], float]]]]:
    """``{family: (type, [(sample name, labels, value)])}``, asserting the format's rules:
    one trailing newline; HELP then TYPE once per family, before its samples; every sample
    of the family just typed (``_bucket``/``_sum``/``_count`` for a histogram); counters
    named ``*_total``; no series twice; histograms' buckets cumulative, in ascending
    ``le``, ending in ``+Inf`` equal to ``_count``, with a ``_sum``."""
    assert text.endswith("\n") and not text.endswith("\n\n"), "one trailing newline"
    families: dict[str, tuple[str, list[tuple[str, dict[str, str], float]]]] = {}
    helped: set[str] = set()
    current: str | None = None
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for line in text[:-1].split("\n"):  # LF only: the format's line separator
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            assert re.fullmatch(_NAME, name) and name not in helped, line
            assert "\\" not in re.sub(r"\\[\\n]", "", line), f"bad HELP escape: {line!r}"
            helped.add(name)
            current = None
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in KINDS and name in helped and name not in families, line
            assert kind != "counter" or name.endswith("_total"), f"counter {name} not *_total"
            families[name] = (kind, [])
            current = name
        else:
            m = SAMPLE.match(line)
            assert m, f"bad sample line {line!r}"
            assert current is not None, f"sample before its TYPE: {line!r}"
            name, labels_text, value = m.group(1), m.group(2) or "", m.group(3)
            kind = families[current][0]
            allowed = ({f"{current}_bucket", f"{current}_sum", f"{current}_count"}
                       if kind == "histogram" else {current})
            assert name in allowed, f"{name} under family {current}"
            labels = {k: _unescape(v) for k, v in PAIR.findall(labels_text)}
            key = (name, tuple(sorted(labels.items())))
            assert key not in seen, f"series twice: {line!r}"
            seen.add(key)
            families[current][1].append((name, labels, float(value)))
    assert set(families) == helped, "a HELP without its TYPE"
    for family, (kind, samples) in families.items():
        if kind != "histogram":
            continue
        buckets = [(s[1]["le"], s[2]) for s in samples if s[0].endswith("_bucket")]
        bounds = [float(le) for le, _ in buckets]
        counts = [n for _, n in buckets]
        assert bounds == sorted(bounds) and buckets[-1][0] == "+Inf", family
        assert counts == sorted(counts), f"{family}: buckets not cumulative"
        [count] = [s[2] for s in samples if s[0] == f"{family}_count"]
        assert counts[-1] == count, f"{family}: +Inf bucket != _count"
        assert [s for s in samples if s[0] == f"{family}_sum"], f"{family}: no _sum"
    return families


def series(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every series of a page and its value (NaN as the string, to compare)."""
    return {(name, tuple(sorted(labels.items()))): value
            for _, samples in strict_parse(text).values() for name, labels, value in samples}


HOSTILE = ['we"ird\nname\\', "ünï©ødé", "cr\rx", "tab\tx", "a\u2028b", "# TYPE x counter",
           'x} 1\ny{z="', "\\n", "日本語"]


def worker_snapshots() -> Iterator[dict[str, Any]]:
    """Stats as ``Worker.stats`` gives them: empty, absent keys, zeros, every counter and
    every label huge, odd numbers where a bug could put them."""
    yield {}
    yield {"stats": {}}
    yield {"stats": {key: 0 for key, _, _ in COUNTERS}}
    huge: dict[str, Any] = {key: 10**20 for key, _, _ in COUNTERS}
    huge.update({f"dead_letters.{r}": 10**18 for r in ("bad_json", "unknown_profile")})
    huge.update({f"cpu_{p}_us": 10**17 for p in PARTS})
    yield {"stats": huge, "profiles": ["a", "b"], "partitions": [0, 1, 2],
           "documents_kept": 10**12, "memory": {"rss_bytes": 2**62}}
    for odd in (math.nan, math.inf, -math.inf, -1, 1e300, 0.5):
        yield {"stats": {"documents": odd, "dead_letters.bad_json": odd, "cpu_route_us": odd},
               "documents_kept": odd, "memory": {"rss_bytes": odd}}
    # reasons are codes from the source; the page must stay valid whatever they hold
    yield {"stats": {f"dead_letters.{r}": 1 for r in HOSTILE}}


def hostile_web_state() -> WebState:
    st = WebState()
    for name in HOSTILE:
        fill(st, profile=name, n=2)
    review_fill(st, name='rev"\n\\iew')
    st.on_review_status(orjson.dumps({"review": 'rev"\n\\iew', "screened": 10, "found": 2,
                                      "r_hat": 3.5, "stop": True}), 1.0)
    for reason in ["bad_json", 'q"uote', "nl\nx", "ü", "x" * 200, "<b>bad</b>"]:
        st.on_dead_letter(orjson.dumps({"reason": reason}), 1.0)
    st.on_dead_letter(b"garbage", 1.0)
    st.on_judgment(orjson.dumps({"doc_id": "d0", "profile": HOSTILE[0], "relevant": True}), 1.0)
    st.set_lag({"documents": 7, 'we"ird': 2})
    return st


def test_worker_page_follows_the_text_format_strictly() -> None:
    """Regression guard (held before the audit): every snapshot renders a page the strict
    checker accepts, with every mirrored counter present (0 when absent from the stats)."""
    m = WorkerMetrics()
    for snap in worker_snapshots():
        families = strict_parse(m.render(snap))
        names = {name for _, name, _ in COUNTERS}
        assert names <= set(families)
        assert len(families) == len(m.registry.metrics)


def test_web_page_follows_the_text_format_strictly() -> None:
    """Regression guard: hostile profile, review, reason and topic names are escaped so
    that the page keeps one series a line and each label value reads back intact."""
    st = hostile_web_state()
    got = series(st.metrics())
    for name in HOSTILE:
        assert got[("sift_profile_delivered", (("profile", name),))] == 2
    assert got[("sift_review_value", (("field", "stop"), ("review", 'rev"\n\\iew')))] == 1
    assert got[("sift_consumer_lag", (("topic", 'we"ird'),))] == 2


def test_prometheus_client_reads_both_pages_as_we_do() -> None:
    """The reference parser reads the same series and values."""
    from prometheus_client import parser
    pages = [WorkerMetrics().render(s) for s in worker_snapshots()]
    pages.append(hostile_web_state().metrics())
    for page in pages:
        theirs: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        for family in parser.text_string_to_metric_families(page):
            for s in family.samples:
                theirs[(s.name, tuple(sorted(s.labels.items())))] = s.value
        ours = series(page)
        assert set(theirs) == set(ours)
        for key, value in ours.items():
            assert (math.isnan(value) and math.isnan(theirs[key])) or theirs[key] == value, key


# ------------------------------------------------------------------------------ F1
def test_f1_web_dead_letter_reasons_cannot_grow_the_series_without_bound() -> None:
    """The web counted every distinct ``reason`` string read from the dead-letters topic
    as a series of its own (clipped to 64 characters, else anything)."""
    st = WebState()
    for i in range(1000):
        st.on_dead_letter(orjson.dumps({"reason": f"code_{i}"}), 1.0)
    for reason in ['q"uote', "nl\nx", "<b>bad</b>", "ü", "x" * 200, "", "UPPER"]:
        st.on_dead_letter(orjson.dumps({"reason": reason}), 1.0)
    st.on_dead_letter(b"garbage", 1.0)
    reasons = {dict(k[1])["reason"]: v for k, v in series(st.metrics()).items()
               if k[0] == "sift_dead_letters_total"}
    assert len(reasons) <= 130
    assert all(re.fullmatch(r"[a-z][a-z0-9_]{0,63}", r) for r in reasons), reasons
    assert reasons["code_0"] == 1 and reasons["unknown"] == 1
    assert reasons["other"] == 1000 - 128 + 7
    assert sum(reasons.values()) == 1008  # every letter still counted
    assert st.snapshot()["dead_letters_by_reason"] == reasons  # the JSON agrees


# ------------------------------------------------------------------------------ F2
def test_f2_known_label_values_are_there_at_zero_before_their_first_event() -> None:
    """A series born at 1 hides its first increment from ``increase()``: the label
    values known in advance are rendered at 0 from the start."""
    web = series(WebState().metrics())
    assert web[("sift_judgments_total", (("relevant", "true"),))] == 0
    assert web[("sift_judgments_total", (("relevant", "false"),))] == 0
    worker = series(WorkerMetrics().render({}))
    for part in PARTS:
        assert worker[("sift_worker_cpu_seconds_total", (("part", part),))] == 0
    # the parts are the service's cpu_timed keys, all of them
    source = (ROOT / "sift/agents/service.py").read_text(encoding="utf-8")
    assert set(re.findall(r'@cpu_timed\("cpu_(\w+)_us"\)', source)) == set(metrics.CPU_PARTS)


# ------------------------------------------------------------------------------ F3
def test_f3_a_non_finite_stat_does_not_stick_a_counter_at_inf() -> None:
    m = WorkerMetrics()
    for bad in (math.inf, math.nan, -math.inf):
        m.render({"stats": {"documents": bad, "cpu_route_us": bad, "dead_letters.x": bad}})
    got = series(m.render({"stats": {"documents": 5, "cpu_route_us": 2e6, "dead_letters.x": 1}}))
    assert got[("sift_worker_documents_total", ())] == 5
    assert got[("sift_worker_cpu_seconds_total", (("part", "route"),))] == 2
    assert got[("sift_worker_dead_letters_total", (("reason", "x"),))] == 1
    c = Counter("c_total", "c")
    with pytest.raises(ValueError):
        c.inc(math.nan)


# ------------------------------------------------------------------------------ F4
def documented() -> dict[str, dict[str, tuple[str, tuple[str, ...]]]]:
    """docs/web.md's two metric tables: ``{"web"|"worker": {name: (type, labels)}}``."""
    doc = (ROOT / "docs/web.md").read_text(encoding="utf-8")
    section = doc[doc.index("\n## Metrics\n"):doc.index("\n## Review status\n")]
    web, worker = section.split("**Each worker's own metrics.**")
    out: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {}
    for key, part in (("web", web), ("worker", worker)):
        rows = [line for line in part.splitlines() if line.startswith("| ")]
        assert rows[0] == "| metric | type | labels | meaning |", rows[0]
        table: dict[str, tuple[str, tuple[str, ...]]] = {}
        for row in rows[2:]:
            cells = [c.strip() for c in row.strip("|").split("|")]
            assert len(cells) == 4, row
            names = re.findall(r"`([^`]+)`", cells[0])
            assert names and all(re.fullmatch(r"sift_[a-z_]+", n) for n in names), row
            labels = tuple(sorted(re.findall(r"`([^`]+)`", cells[2])))
            for name in names:
                assert name not in table, f"{name} twice"
                table[name] = (cells[1].split()[0], labels)
        out[key] = table
    return out


def test_f4_the_docs_list_exactly_the_metrics_rendered_with_their_type_and_labels() -> None:
    """Each table row names its metrics in full (``_judged`` for ``sift_profile_judged``
    was found by no grep), with its type and its label names in a column of their own."""
    docs = documented()
    for key, registry in (("web", WebState().registry), ("worker", WorkerMetrics().registry)):
        rendered = {m.name: (m.kind, tuple(sorted(m.label_names)))
                    for m in registry.metrics.values()}
        assert docs[key] == rendered


# ------------------------------------------------------------------------------ logs
def emit(formatter: logging.Formatter, fn: Any) -> tuple[str, str]:
    """What ``fn(logger)`` writes through ``formatter``, and what logging itself wrote
    to standard error (``--- Logging error ---`` when the formatter raised)."""
    buf, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(formatter)
    logger = logging.getLogger("sift.test.audit_s49")
    logger.handlers, logger.propagate = [handler], False
    logger.setLevel(logging.DEBUG)
    old, sys.stderr = sys.stderr, err
    try:
        fn(logger)
    finally:
        sys.stderr = old
        logger.handlers = []
    return buf.getvalue(), err.getvalue()


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str")

    __repr__ = __str__


def raising(logger: logging.Logger) -> None:
    try:
        raise ValueError("multi\nline\n[2025-01-01 00:00:00,000] ERROR sift.web: forged")
    except ValueError:
        logger.exception("failed for %s", "doc\nid")


@pytest.mark.parametrize("fn", [
    lambda lg: lg.info("x", extra={"d": {1: 2}}),
    lambda lg: lg.info("x", extra={"n": 2**70}),
    lambda lg: lg.info("bad \udcff name %s", "\udcfe"),
    lambda lg: lg.info("x %s %s", 1),
    lambda lg: lg.info("x", extra={"o": Unprintable()}),
    lambda lg: lg.info(Unprintable()),
    raising,
], ids=["int-keys", "big-int", "surrogates", "bad-args", "extra-str-raises", "msg-str-raises",
        "traceback"])
def test_f5_every_json_record_is_one_json_object_on_one_line(fn: Any) -> None:
    """A record orjson could not encode was lost, and logging wrote a multi-line
    ``--- Logging error ---`` traceback in plain text among the JSON lines."""
    out, err = emit(JsonFormatter(), fn)
    assert err == ""
    lines = out.split("\n")
    assert len(lines) == 2 and lines[1] == "", out
    obj = orjson.loads(lines[0])
    assert {"ts", "level", "logger", "message"} <= set(obj)
    assert obj["logger"] == "sift.test.audit_s49" and obj["level"] in {"INFO", "ERROR"}


def test_f5_the_traceback_stays_inside_the_object() -> None:
    out, _ = emit(JsonFormatter(), raising)
    obj = orjson.loads(out)
    assert obj["message"] == "failed for doc\nid"
    assert obj["exc"].startswith("Traceback") and "forged" in obj["exc"]


def test_f6_extras_cannot_overwrite_the_fixed_fields() -> None:
    out, _ = emit(JsonFormatter(), lambda lg: lg.warning(
        "real", extra={"level": "DEBUG", "ts": 0, "logger": "other", "exc": "fake", "doc_id": "d"}))
    obj = orjson.loads(out)
    assert (obj["level"], obj["logger"], obj["message"], obj["doc_id"]) == (
        "WARNING", "sift.test.audit_s49", "real", "d")
    assert obj["ts"] > 0 and "exc" not in obj
    assert (obj["extra_level"], obj["extra_ts"], obj["extra_logger"], obj["extra_exc"]) == (
        "DEBUG", 0, "other", "fake")


def test_f7_stack_info_is_kept_and_unicode_line_separators_are_escaped() -> None:
    out, _ = emit(JsonFormatter(), lambda lg: lg.info("a\u2028b\u2029c\x85d", stack_info=True))
    assert len(out.splitlines()) == 1  # str.splitlines cuts at U+2028, U+2029, NEL too
    obj = orjson.loads(out)
    assert obj["message"] == "a\u2028b\u2029c\x85d"
    assert obj["stack"].startswith("Stack (most recent call last):")


FORGED = "d1\n[2025-01-01 00:00:00,000] ERROR sift.web: forged"


def test_f8_plain_text_user_text_cannot_forge_a_log_line() -> None:
    """``sift web`` logged ``judgment <profile> <doc_id> ...`` with ``%s``: a ``doc_id``
    with a line feed wrote a second record of its choosing."""
    fmt = observability.PlainFormatter("[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    for text in (FORGED, "a\rb", "a\u2028b", "a\x85b", "a\x1cb", "a\x0bb"):
        out, err = emit(fmt, lambda lg, t=text: lg.info("judgment %s %s %s", "earn", t, True))
        assert err == "" and len(out.splitlines()) == 1, repr(out)
    out, _ = emit(fmt, lambda lg: lg.info("judgment %s", FORGED))
    assert out.endswith(r"judgment d1\n[2025-01-01 00:00:00,000] ERROR sift.web: forged" + "\n")
    assert "ünï©ødé 日本語" in emit(fmt, lambda lg: lg.info("ünï©ødé 日本語"))[0]  # kept
    # a traceback stays readable on its lines, each one indented: a record begins exactly
    # at a line starting with "[", which no exception message can write
    out, _ = emit(fmt, raising)
    first, *rest = out.rstrip("\n").split("\n")
    assert first.endswith(r"failed for doc\nid")
    assert rest[0] == "  Traceback (most recent call last):"
    assert all(line.startswith("  ") for line in rest), rest
    assert "  [2025-01-01 00:00:00,000] ERROR sift.web: forged" in rest


@pytest.fixture
def root_logging() -> Iterator[None]:
    """configure_logging changes the root logger and the warnings hook: put them back."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    logging.captureWarnings(False)
    try:
        yield
    finally:
        logging.captureWarnings(False)
        root.handlers = handlers
        root.setLevel(level)


@pytest.mark.parametrize("json_lines", [False, True])
def test_f8_configure_logging_writes_one_line_per_record_warnings_included(
        json_lines: bool, root_logging: None, capsys: pytest.CaptureFixture[str]) -> None:
    """What ``sift web`` (both modes) and ``sift worker`` (JSON) set up: a forged line is
    escaped, and a Python warning (two plain lines from ``warnings``) is a record too."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        configure_logging("INFO", json_lines=json_lines)
        logging.getLogger("sift.web").info("judgment %s %s %s", "earn", FORGED, True)
        warnings.warn("careful\nnow", RuntimeWarning, stacklevel=1)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    if json_lines:
        objs = [orjson.loads(line) for line in lines]
        assert objs[0]["message"] == f"judgment earn {FORGED} True"
        assert objs[1]["logger"] == "py.warnings" and "careful\nnow" in objs[1]["message"]
    else:
        assert lines[0].endswith(r"sift.web: judgment earn d1\n[2025-01-01 00:00:00,000] "
                                 "ERROR sift.web: forged True")
        assert " WARNING py.warnings: " in lines[1] and r"careful\nnow" in lines[1]
