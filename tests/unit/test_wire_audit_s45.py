"""Forty-fifth session, audit of the wire contract and the file readers (findings 1-10).

Each test failed before its fix (RecursionError, a lost pipe prefix, a title counted
twice, unbounded or misleading messages, values taken silently, raw control characters).
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from sift.cli import main
from sift.commands.produce import lines, messages, numbered_messages
from sift.commands.screen import load_records
from sift.errors import SiftError
from sift.filters.screening.errors import ScreeningError
from sift.replay import read_specs
from sift.topics import codecs, review
from sift.topics.deadletter import DeadLetter
from sift.topics.errors import RecordError
from sift.topics.records import Document, ProfileSpec

DEEP = b"[" * 1000 + b"]" * 1000
LONG = "x" * 100_000
#: the longest a message quoting a received value may be
MAX_MESSAGE = 400


def _one_line(text: str) -> None:
    assert "\n" not in text and "\r" not in text and len(text) <= MAX_MESSAGE, text[:400]


def _refused(fn: object, reason: str) -> RecordError:
    with pytest.raises(RecordError) as info:
        fn()  # type: ignore[operator]
    assert info.value.reason == reason, (info.value.reason, str(info.value)[:200])
    _one_line(str(info.value))
    return info.value


def _docs(n: int, start: int = 0) -> list[dict[str, object]]:
    cats = {"wheat": "wheat grain harvest bushels", "oil": "crude oil barrels opec"}
    return [{"id": f"d{start + i}", "text": f"{list(cats.values())[i % 2]} w{i % 7}",
             "topics": [list(cats)[i % 2]]} for i in range(n)]


def _write(path: Path, rows: list[object]) -> Path:
    path.write_bytes(b"".join(r if isinstance(r, bytes) else orjson.dumps(r) + b"\n"
                              for r in rows))
    return path


@pytest.fixture()
def corpus(tmp_path: Path) -> tuple[Path, Path]:
    return _write(tmp_path / "train.jsonl", _docs(40)), _write(tmp_path / "test.jsonl", _docs(20, 100))


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    # no broker listens on port 1: an error must come from the checks, not the connection
    monkeypatch.setenv("SIFT_BROKER", "kafka://127.0.0.1:1")


# ------------------------------------------------------------------ 1. deep values
@pytest.mark.parametrize(("field", "reason"), [
    ("model", "bad_model"), ("update", "bad_update"), ("measure", "bad_measure"),
    ("bags", "bad_bags"), ("bag_rule", "bad_bags")])
def test_f1_a_deep_value_in_a_profile_spec_is_a_record_error(field: str, reason: str) -> None:
    data = b'{"profile":"p","query":"q","%s":' % field.encode() + DEEP + b"}"
    _refused(lambda: codecs.decode_profile_spec(data), reason)


@pytest.mark.parametrize(("field", "reason"), [("mode", "bad_mode"), ("params", "bad_params")])
def test_f1_a_deep_value_in_a_review_spec_is_a_record_error(field: str, reason: str) -> None:
    head = b'{"profile":"p","query":"q",' + (b'"mode":"review",' if field != "mode" else b"")
    _refused(lambda: review.decode_review_spec(head + b'"%s":' % field.encode() + DEEP + b"}"),
             reason)


def test_f1_a_deep_count_in_a_review_status_is_a_record_error() -> None:
    data = b'{"review":"r","documents":' + DEEP + b"}"
    _refused(lambda: review.decode_status(data), "bad_status")


@pytest.mark.parametrize("field", ["label", "id", "title"])
def test_f1_a_deep_value_in_a_screening_record_is_a_one_line_error(tmp_path: Path,
                                                                  field: str) -> None:
    rec = {"id": "a", "title": "t", "abstract": "x", "label": 1}
    line = orjson.dumps(rec)[:-1] + b',"%s":' % field.encode() + DEEP + b"}\n"
    path = _write(tmp_path / "s.jsonl", [line])
    with pytest.raises(ScreeningError) as info:
        load_records(path)
    _one_line(str(info.value))


def test_f1_produce_refuses_a_deep_spec_in_one_line(tmp_path: Path, no_broker: None,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "p.jsonl", [b'{"profile":"p","query":"q","model":' + DEEP + b"}\n"])
    code, _, err = _cli(["produce", str(path), "--topic", "profiles"], capsys)
    assert code == 1 and err.count("\n") == 1 and f"{path}:1:" in err
    assert "'model'" in err and len(err) < 400


def test_f1_replay_refuses_a_deep_spec_in_one_line(corpus: tuple[Path, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    train, test = corpus
    specs = _write(tmp_path / "p.jsonl", [b'{"profile":"p","query":"q","bags":' + DEEP + b"}\n"])
    code, _, err = _cli(["replay", "--train", str(train), "--test", str(test), "--profiles",
                         str(specs), "--out", str(tmp_path / "o"), "--no-plot"], capsys)
    assert code == 1 and err.count("\n") == 1 and f"{specs}:1:" in err and len(err) < 400


# ------------------------------------------------------------------ 2. pipes
def _pipe(data: bytes) -> Iterator[str]:
    r, w = os.pipe()

    def feed() -> None:
        with os.fdopen(w, "wb") as fh, contextlib.suppress(BrokenPipeError):
            fh.write(data)  # a reader that stops early closes the pipe

    t = threading.Thread(target=feed, daemon=True)
    t.start()
    try:
        yield f"/dev/fd/{r}"
    finally:
        t.join(5)
        os.close(r)


def _lines(n: int) -> bytes:
    return b"".join(b'{"id":"d%d","text":"some words here number %d"}\n' % (i, i) for i in range(n))


@pytest.mark.parametrize("gz", [False, True])
def test_f2_read_jsonl_reads_a_whole_pipe(gz: bool) -> None:
    data = _lines(2000)
    for path in _pipe(gzip.compress(data) if gz else data):
        got = list(codecs.read_jsonl(path, Document.from_obj))
    assert [d.id for d in got] == [f"d{i}" for i in range(2000)]


def test_f2_read_jsonl_reads_a_small_gzip_pipe_and_a_plain_file_as_before(tmp_path: Path) -> None:
    for path in _pipe(gzip.compress(_lines(3))):
        assert len(list(codecs.read_jsonl(path, Document.from_obj))) == 3
    plain = tmp_path / "a.jsonl"
    plain.write_bytes(_lines(3))
    assert len(list(codecs.read_jsonl(plain, Document.from_obj))) == 3
    gz = tmp_path / "b.data"  # gzip by its magic bytes, whatever its name
    gz.write_bytes(gzip.compress(_lines(4)))
    assert len(list(codecs.read_jsonl(gz, Document.from_obj))) == 4
    bad = tmp_path / "c.jsonl.gz"  # named .gz, not gzip: unreadable, as before
    bad.write_bytes(_lines(1))
    _refused(lambda: list(codecs.read_jsonl(bad, Document.from_obj)), "unreadable")


@pytest.mark.parametrize("gz", [False, True])
def test_f2_produce_lines_read_a_whole_pipe(gz: bool) -> None:
    data = _lines(2000)
    for path in _pipe(gzip.compress(data) if gz else data):
        got = list(lines(Path(path)))
    assert len(got) == 2000 and got[0] == (1, b'{"id":"d0","text":"some words here number 0"}')


def test_f2_produce_on_a_pipe_validates_it_instead_of_saying_no_such_file(
        no_broker: None, capsys: pytest.CaptureFixture[str]) -> None:
    data = _lines(2000) + b'{"id": "bad"}\n'
    for path in _pipe(data):
        code, _, err = _cli(["produce", path], capsys)
    assert code == 1 and "no such file" not in err
    assert f"{path}:2001:" in err and "no text" in err


# ------------------------------------------------------------------ 3. the size of a document
@pytest.mark.parametrize(("obj", "size"), [
    ({"id": "a", "text": "t" * 1000}, 1000),
    ({"id": "b", "title": "T" * 1000}, 1000),
    ({"id": "c", "title": "\u00e9" * 500}, 1000),
    ({"id": "d", "title": "T" * 300, "text": "w" * 700}, 1000),
    ({"id": "e", "title": "T" * 300, "abstract": "A" * 699}, 1000),  # joined by a newline
])
def test_f3_a_document_counts_its_title_once(obj: dict[str, str], size: int) -> None:
    from sift.topics.records import document_bytes

    doc = Document.from_obj(obj)
    assert document_bytes(doc) == size
    # the same count after a producer re-encodes it (sift produce sends to_obj())
    assert document_bytes(Document.from_obj(doc.to_obj())) == size


# ------------------------------------------------------------------ 4. message lengths
@pytest.mark.parametrize(("obj", "reason"), [
    ({"profile": "p", "query": "q", "model": LONG}, "bad_model"),
    ({"profile": "p", "query": "q", "measure": LONG}, "bad_measure"),
    ({"profile": "p", "query": "q", "update": LONG}, "bad_update"),
    ({"profile": "p", "query": "q", "bags": 2, "bag_rule": LONG}, "bad_bags"),
    ({"profile": "p", "query": "q", "bag_rule": LONG}, "bad_bags"),
    ({"profile": "p", "query": "q", "params": {LONG: {}}}, "bad_params"),
    ({"profile": "p" * 512}, "empty_profile"),
])
def test_f4_profile_spec_messages_are_bounded(obj: dict[str, object], reason: str) -> None:
    _refused(lambda: ProfileSpec.from_obj(obj), reason)


@pytest.mark.parametrize(("obj", "reason"), [
    ({"profile": "p", "query": "q", "mode": LONG}, "bad_mode"),
    ({"profile": "p", "query": "q", "mode": "review", "params": {LONG: 1}}, "bad_params"),
    ({"profile": "p" * 512, "mode": "review"}, "missing_query"),
])
def test_f4_review_spec_messages_are_bounded(obj: dict[str, object], reason: str) -> None:
    _refused(lambda: review.ReviewSpec.from_obj(obj), reason)


def test_f4_document_messages_quoting_an_id_are_bounded() -> None:
    _refused(lambda: Document.from_obj({"id": "i" * 512}), "missing_text")
    doc = Document("i" * 512, "text", metadata={"review": 3})
    _refused(lambda: review.review_names(doc), "bad_review")


# ------------------------------------------------------------------ 5. dead letters read back
@pytest.mark.parametrize("obj", [
    {}, [], None, "x", {"reason": "x", "partition": "a"}, {"reason": "x", "offset": 1.5},
    {"reason": "x", "original_b64": "abc"}, {"reason": "x", "original_b64": 3},
    {"reason": "x", "ts": {}}, {"reason": "x", "ts": "1"}, {"reason": None},
    {"reason": "x", "message": [[1]]}, {"reason": "x", "topic": 3},
    {"reason": "x", "partition": True},
])
def test_f5_a_malformed_dead_letter_is_a_record_error(obj: object) -> None:
    with pytest.raises(RecordError) as info:
        DeadLetter.from_obj(obj)  # type: ignore[arg-type]
    _one_line(str(info.value))


def test_f5_a_dead_letter_reads_back_as_before() -> None:
    letter = DeadLetter("bad_json", "not JSON", "sift.documents", 2, 41, b"{x", 1700000000.5)
    assert DeadLetter.from_obj(orjson.loads(orjson.dumps(letter.to_obj()))) == letter
    assert DeadLetter.from_obj({"reason": "empty"}) == DeadLetter("empty", "", "", -1, -1, b"")
    assert DeadLetter.from_obj({"reason": "empty", "ts": 5}).ts == 5.0
    assert DeadLetter.from_obj({"reason": "x", "original_b64": base64.b64encode(b"\x00").decode()
                                }).original == b"\x00"


# ------------------------------------------------------------------ 6. params and positives
@pytest.mark.parametrize("value", [[], False, 0, "", None, [["a"]]])
def test_f6_a_profile_spec_refuses_params_that_are_not_an_object(value: object) -> None:
    _refused(lambda: ProfileSpec.from_obj({"profile": "p", "query": "q", "params": value}),
             "bad_params")
    # as the review spec does
    _refused(lambda: review.ReviewSpec.from_obj({"profile": "p", "query": "q", "mode": "review",
                                                 "params": value}), "bad_params")


@pytest.mark.parametrize("value", ["", 0, False, {}, None, "r1"])
def test_f6_a_profile_spec_refuses_positives_that_are_not_a_list(value: object) -> None:
    _refused(lambda: ProfileSpec.from_obj({"profile": "p", "query": "q", "positives": value}),
             "bad_positives")


def test_f6_absent_or_empty_params_and_positives_are_still_taken() -> None:
    for obj in ({}, {"params": {}}, {"positives": []}, {"params": {}, "positives": []}):
        spec = ProfileSpec.from_obj({"profile": "p", "query": "q", **obj})
        assert spec.params == {} and spec.positives == ()
    assert ProfileSpec.from_obj({"profile": "p", "positives": ["r1"]}).positives == ("r1",)


# ------------------------------------------------------------------ 7. replay and mode
@pytest.mark.parametrize("mode", ["Review", "review", None, "profile"])
def test_f7_a_profile_spec_with_a_mode_is_refused(mode: object, tmp_path: Path) -> None:
    obj = {"profile": "x", "mode": mode, "query": "hello world"}
    _refused(lambda: ProfileSpec.from_obj(obj), "bad_mode")
    path = _write(tmp_path / "p.jsonl", [{"profile": "ok", "query": "q"}, obj])
    err = _refused(lambda: read_specs(path), "bad_mode")
    assert str(err).startswith(f"{path}:2: ")


def test_f7_replay_refuses_a_spec_with_a_mode(corpus: tuple[Path, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    train, test = corpus
    specs = _write(tmp_path / "p.jsonl", [{"profile": "x", "mode": "Review", "query": "wheat"}])
    code, _, err = _cli(["replay", "--train", str(train), "--test", str(test), "--profiles",
                         str(specs), "--out", str(tmp_path / "o"), "--no-plot"], capsys)
    assert code == 1 and err.count("\n") == 1 and f"{specs}:1:" in err and "mode" in err


# ------------------------------------------------------------------ 8. produce checks more
def test_f8_produce_refuses_a_document_over_the_size_limit() -> None:
    data = b'{"id":"a","text":"fits"}\n' + orjson.dumps({"id": "big", "text": "w" * 1001}) + b"\n"
    with pytest.raises(SiftError, match=r"^<stdin>:2: .*'big'.* 1001 bytes.* 1000"):
        list(messages(Path("-"), "documents", 100, False, None, data, max_document_bytes=1000))
    # at the limit, a title-only document too, it passes
    ok = b"".join(orjson.dumps(o) + b"\n" for o in (
        {"id": "a", "text": "w" * 1000}, {"id": "b", "title": "T" * 1000}))
    assert len(list(messages(Path("-"), "documents", 1, False, None, ok,
                             max_document_bytes=1000))) == 2
    over = orjson.dumps({"id": "c", "title": "T" * 1001}) + b"\n"
    with pytest.raises(SiftError, match=r"^<stdin>:1: "):
        list(messages(Path("-"), "documents", 1, False, None, over, max_document_bytes=1000))
    # in a batch line: the item is named
    batch = orjson.dumps({"documents": [{"id": "a", "text": "x"}, {"id": "b", "text": "w" * 1001}]})
    with pytest.raises(SiftError, match=r"^<stdin>:1: documents\[1\]: "):
        list(messages(Path("-"), "documents", 1, False, None, batch, max_document_bytes=1000))


def test_f8_produce_refuses_an_id_repeated_in_its_input() -> None:
    data = b'{"id":"d1","text":"one"}\n{"id":"d2","text":"two"}\n\n{"id":"d1","text":"three"}\n'
    with pytest.raises(SiftError, match=r"^<stdin>:4: .*'d1'.*line 1"):
        list(messages(Path("-"), "documents", 100, False, None, data))
    batch = orjson.dumps({"documents": [{"id": 7, "text": "x"}, {"id": "7", "text": "y"}]})
    with pytest.raises(SiftError, match=r"^<stdin>:1: documents\[1\]: .*'7'"):
        list(messages(Path("-"), "documents", 100, False, None, batch))
    # --raw sends lines unchecked, as before; judgments may repeat a document id
    assert len(list(messages(Path("-"), "documents", 100, True, None, data))) == 3
    js = b'{"doc_id":"d1","profile":"a","relevant":true}\n{"doc_id":"d1","profile":"b","relevant":false}\n'
    assert len(list(messages(Path("-"), "judgments", 100, False, None, js))) == 2


def test_f8_the_command_uses_the_worker_setting(tmp_path: Path, no_broker: None,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SIFT_MAX_DOCUMENT_BYTES", "1000")
    path = _write(tmp_path / "d.jsonl", [{"id": "a", "text": "w" * 1001}])
    code, _, err = _cli(["produce", str(path)], capsys)
    assert code == 1 and err.count("\n") == 1 and f"{path}:1:" in err and "1000" in err


def test_f8_numbered_messages_defaults_keep_their_behaviour() -> None:
    data = orjson.dumps({"id": "big", "text": "w" * 2_000_000}) + b"\n"
    assert len(list(numbered_messages(Path("-"), "documents", 1, False, None, data))) == 1


# ------------------------------------------------------------------ 9. messages
def test_f9_an_empty_profiles_file_says_so(corpus: tuple[Path, Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    train, test = corpus
    specs = _write(tmp_path / "p.jsonl", [b"\n"])
    code, _, err = _cli(["replay", "--train", str(train), "--test", str(test), "--profiles",
                         str(specs), "--out", str(tmp_path / "o"), "--no-plot"], capsys)
    assert code == 1 and err.count("\n") == 1
    assert f"{specs}: no profile specs" in err and "no category" not in err


def test_f9_skip_bad_gives_the_count_when_every_line_is_bad(corpus: tuple[Path, Path],
                                                           tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    _, test = corpus
    train = tmp_path / "utf16.jsonl"
    train.write_bytes(_lines(4).decode().encode("utf-16"))
    code, _, err = _cli(["replay", "--train", str(train), "--test", str(test), "--skip-bad",
                         "--out", str(tmp_path / "o"), "--no-plot"], capsys)
    assert code == 1 and err.count("\n") == 1 and "no training documents" in err
    # four documents and the last newline's second byte, each line not UTF-8
    assert "skipped 5 bad lines (the first, line 1: not_utf8)" in err


def test_f9_screen_names_a_repeated_id_and_its_line(tmp_path: Path) -> None:
    rows = [{"id": "a", "title": "x", "label": 1}, {"id": 1, "title": "y", "label": 0},
            {"id": "b", "title": "z", "label": 0}, {"id": "1", "title": "w", "label": 0}]
    path = _write(tmp_path / "s.jsonl", rows)
    with pytest.raises(ScreeningError) as info:
        load_records(path)
    msg = str(info.value)
    _one_line(msg)
    assert msg.startswith(f"{path}:4: ") and "'1'" in msg and "line 2" in msg


def test_f9_produce_on_a_directory_says_it_is_one(tmp_path: Path, no_broker: None,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(["produce", str(tmp_path)], capsys)
    assert code == 1 and err.count("\n") == 1
    assert "no such file" not in err and "directory" in err
    code, _, err = _cli(["produce", str(tmp_path / "missing.jsonl")], capsys)
    assert code == 1 and "no such file" in err


# ------------------------------------------------------------------ 10. control characters
def test_f10_replay_escapes_control_characters_in_profile_names(
        corpus: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    train, test = corpus
    specs = _write(tmp_path / "p.jsonl", [{"profile": "evil\nname\u001b[7m", "query": "wheat grain"},
                                          {"profile": "x\u2028y", "query": "crude oil"}])
    code, out, err = _cli(["replay", "--train", str(train), "--test", str(test), "--profiles",
                           str(specs), "--out", str(tmp_path / "o"), "--no-plot"], capsys)
    assert code == 0, err
    assert "\x1b" not in out and "\u2028" not in out
    assert "evil\\nname\\x1b[7m" in out and "x\\u2028y" in out
    m = orjson.loads((tmp_path / "o" / "metrics.json").read_bytes())
    assert "evil\nname\u001b[7m" in m["per_profile"]  # the files keep the names
