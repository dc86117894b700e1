"""`sift produce -` reads standard input (plain or gzip), checked line by line as a file
is, before anything is sent."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import orjson
import pytest

from sift.cli import main
from sift.commands.produce import messages
from sift.errors import SiftError

STDIN = Path("-")
JUDGMENTS = (b'{"doc_id": "r1", "profile": "trade", "relevant": true}\n\n'
             b'{"doc_id": "r2", "profile": "oil", "relevant": false}\r\n')


@pytest.mark.parametrize("data", [JUDGMENTS, gzip.compress(JUDGMENTS, mtime=0)], ids=["plain", "gzip"])
def test_standard_input_gives_the_messages_a_file_would(data: bytes, tmp_path: Path) -> None:
    file = tmp_path / "j.jsonl"
    file.write_bytes(JUDGMENTS)
    got = list(messages(STDIN, "judgments", 100, False, None, data))
    assert got == list(messages(file, "judgments", 100, False, None))
    assert [(k, orjson.loads(v)["doc_id"], n) for k, v, n in got] == [(b"trade", "r1", 1),
                                                                       (b"oil", "r2", 1)]


def test_a_bad_line_on_standard_input_names_it_by_its_number_blank_lines_counted() -> None:
    with pytest.raises(SiftError, match=r"^<stdin>:4: judgment field 'relevant'"):
        list(messages(STDIN, "judgments", 100, False, None,
                      JUDGMENTS + b'{"doc_id": "r3", "profile": "trade"}\n'))
    with pytest.raises(SiftError, match=r"^<stdin>: cannot read"):
        list(messages(STDIN, "judgments", 100, False, None, b"\x1f\x8bnot gzip"))


def test_the_command_refuses_bad_standard_input_before_connecting(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # no broker listens on port 1: the error must come from the check, not the connection
    monkeypatch.setenv("SIFT_BROKER", "kafka://127.0.0.1:1")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b'{"doc_id": "r1"}\n')))
    assert main(["produce", "-", "--topic", "judgments"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sift produce: error: <stdin>:1: ")
