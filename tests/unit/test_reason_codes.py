"""Every dead-letter reason the worker can emit is documented for the people reading them.

A dead letter's ``reason`` is the ``reason`` of the :class:`RecordError` that rejected the
message. The codes are collected from the source (literal codes, and the ``bad_<field>``
/ ``missing_<field>`` codes of the field readers) and each must appear, in backticks, in
the wire contract's list (docs/streaming.md) or review mode's (docs/screening.md).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the modules whose errors can become dead letters
SOURCES = ("sift/topics", "sift/agents")
DOCS = ("docs/streaming.md", "docs/screening.md")
#: the field readers and whether a missing field is an error when ``required`` is not given
FIELD_READERS = {"_str": None, "_float": True, "_name": True}
#: codes of the JSONL file reader, which command-line tools print as one-line errors;
#: the worker never reads files
FILE_ONLY = {"no_file", "unreadable"}
#: records the worker writes and others read (``sift tail``, the dashboard): their
#: codes are errors of the reader, never dead letters
OUTPUT_RECORDS = {"Decision", "ReviewStatus"}


def _constant(node: ast.AST | None) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _call_name(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def emitted_codes() -> dict[str, str]:
    """``{code: "file:line"}`` of every reason a message can be rejected with."""
    found: dict[str, str] = {}
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            skipped = {id(n) for c in ast.walk(tree)
                       if isinstance(c, ast.ClassDef) and c.name in OUTPUT_RECORDS
                       for n in ast.walk(c)}
            for node in ast.walk(tree):
                if id(node) in skipped:
                    continue
                if not isinstance(node, ast.Call):
                    continue
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                name = _call_name(node)
                if name == "RecordError" and node.args:
                    code = _constant(node.args[0])
                    if isinstance(code, str):
                        found.setdefault(code, where)
                elif name in FIELD_READERS and len(node.args) >= 2:
                    key = _constant(node.args[1])
                    if not isinstance(key, str):
                        continue
                    found.setdefault(f"bad_{key}", where)
                    required = {k.arg: _constant(k.value) for k in node.keywords}.get(
                        "required", FIELD_READERS[name])
                    if required is not False:
                        found.setdefault(f"missing_{key}", where)
    return {c: w for c, w in found.items() if c not in FILE_ONLY}


def test_the_scan_finds_the_known_codes() -> None:
    """The scan itself works: it sees literal codes and the field readers' codes."""
    codes = emitted_codes()
    for code in ("bad_json", "not_utf8", "unknown_profile", "state_too_large",  # literal
                 "missing_doc_id", "bad_title", "bad_ts", "missing_query"):  # field readers
        assert code in codes, code
    assert "missing_title" not in codes  # a title is optional
    assert not FILE_ONLY & set(codes)
    assert "bad_score" not in codes  # only a decision has a score: read, never dead-lettered


def test_every_reason_is_documented() -> None:
    text = "\n".join((ROOT / d).read_text(encoding="utf-8") for d in DOCS)
    missing = {c: w for c, w in emitted_codes().items() if f"`{c}`" not in text}
    assert not missing, f"reason codes not listed in {' or '.join(DOCS)}: {missing}"
