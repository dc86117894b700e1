"""`sift produce` and `sift tail` against fake clients (forty-third session audit):
a message the broker refuses fails the command, naming its file and lines (finding 1);
`tail --max N` prints N lines (2) and an empty message does not crash it (3); `--raw`
lines are keyed as the wire contract says (5); a gzip file is known by its magic bytes
(9); a `{"documents": [...]}` line, what `sift tail documents` prints, is produced again,
re-batched (10)."""

from __future__ import annotations

import gzip
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from kafka.errors import KafkaTimeoutError

from sift.cli import build_parser, main
from sift.commands.produce import lines, messages, numbered_messages, raw_key
from sift.errors import SiftError
from tests.unit.fake_kafka import FakeProducer

PREFIX = "audit43."


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIFT_BROKER", "kafka://127.0.0.1:1")  # never reached: clients are fakes
    monkeypatch.setenv("SIFT_TOPIC_PREFIX", PREFIX)
    monkeypatch.setattr("sift.kafkaclient.ensure_topics", lambda *a, **k: None)


def use_producer(monkeypatch: pytest.MonkeyPatch, prod: FakeProducer) -> FakeProducer:
    monkeypatch.setattr("sift.kafkaclient.producer", lambda settings, **kw: prod)
    return prod


def write_docs(path: Path, n: int, big: frozenset[int] = frozenset(), size: int = 3000) -> Path:
    """``n`` documents ``d1``... one a line; those numbered in ``big`` hold ``size`` bytes."""
    path.write_text("".join(
        orjson.dumps({"id": f"d{i}", "text": "word " * (size // 5 if i in big else 2),
                      "topics": ["earn"]}).decode() + "\n" for i in range(1, n + 1)))
    return path


# -- finding 1: refused messages -------------------------------------------------------

@pytest.mark.parametrize("late", [False, True])
def test_a_refused_message_fails_the_command_naming_its_file_and_lines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        env: None, late: bool) -> None:
    # lines 150 and 151 make the second batch of 100 (lines 101-200) too large
    file = write_docs(tmp_path / "test.jsonl", 250, big=frozenset({150, 151}), size=3000)
    prod = use_producer(monkeypatch, FakeProducer(limit=4000, late=late))
    assert main(["produce", str(file)]) == 1
    out, err = capsys.readouterr()
    assert "sent" not in out  # nothing claimed sent
    err_lines = err.strip().splitlines()
    assert len(err_lines) == 1
    assert err_lines[0].startswith(f"sift produce: error: {file}:101-200 (100 documents, ")
    assert "refused by the broker as too large (MessageSizeTooLargeError)" in err_lines[0]
    assert err_lines[0].endswith("try a smaller --batch than 100")
    # refused at once: the command stops there; refused at the flush: all three went out
    assert len(prod.sent) == (3 if late else 2)
    assert prod.closed


def test_a_single_refused_record_is_named_by_its_line_without_the_batch_hint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        env: None) -> None:
    file = tmp_path / "j.jsonl"
    file.write_text('{"doc_id": "r1", "profile": "trade", "relevant": true}\n\n'
                    '{"doc_id": "r2", "profile": "trade", "relevant": true, "text": "'
                    + "x" * 5000 + '"}\n')
    use_producer(monkeypatch, FakeProducer(limit=4000))
    assert main(["produce", str(file), "--topic", "judgments"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"sift produce: error: {file}:3 (1 judgment, ")
    assert "--batch" not in err


def test_a_send_that_raises_is_a_one_line_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        env: None) -> None:
    file = write_docs(tmp_path / "d.jsonl", 3)
    use_producer(monkeypatch, FakeProducer(fail_send=KafkaTimeoutError("no metadata in 60 s")))
    assert main(["produce", str(file), "--batch", "1"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    size = len(orjson.dumps({"id": "d1", "text": "word word "}))
    err_lines = err.strip().splitlines()
    assert len(err_lines) == 1
    assert err_lines[0].startswith(f"sift produce: error: {file}:1 (1 document, {size} bytes): "
                                   "not sent: KafkaTimeoutError: ")
    assert err_lines[0].endswith("no metadata in 60 s")


def test_accepted_messages_are_counted_once_flushed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        env: None) -> None:
    file = write_docs(tmp_path / "d.jsonl", 5)
    prod = use_producer(monkeypatch, FakeProducer(late=True))
    assert main(["produce", str(file), "--batch", "2"]) == 0
    assert capsys.readouterr().out == f"sent 5 documents to {PREFIX}documents\n"
    assert [(t, k) for t, k, _ in prod.sent] == [(f"{PREFIX}documents", b"d1"),
                                                 (f"{PREFIX}documents", b"d3"),
                                                 (f"{PREFIX}documents", b"d5")]


def test_each_message_carries_the_lines_it_came_from(tmp_path: Path) -> None:
    file = write_docs(tmp_path / "d.jsonl", 5)
    got = list(numbered_messages(file, "documents", 2, False, None))
    assert [(m.key, m.records, m.first, m.last) for m in got] == [
        (b"d1", 2, 1, 2), (b"d3", 2, 3, 4), (b"d5", 1, 5, 5)]
    assert got[0].where("d.jsonl", ("document", "documents")) == \
        f"d.jsonl:1-2 (2 documents, {len(got[0].value):,} bytes)"
    # the three-field view is unchanged
    assert list(messages(file, "documents", 2, False, None)) == [(m.key, m.value, m.records)
                                                                for m in got]


# -- findings 2 and 3: tail ------------------------------------------------------------

class FakeConsumer:
    """Polls return the given batches (partition -> records), then nothing; its one
    partition is assigned from the ``assign_at``-th poll on (0: from the start), at
    position ``end`` (nothing left to read up to the end offset)."""

    def __init__(self, polls: list[dict[str, list[Any]]], assign_at: int = 0) -> None:
        self.polls = list(polls)
        self.closed = False
        self.n_polls = 0
        self.assign_at = assign_at

    def poll(self, timeout_ms: int = 0, **kw: Any) -> dict[str, list[Any]]:
        self.n_polls += 1
        time.sleep(0.001)  # a poll takes time (up to timeout_ms in kafka-python)
        return self.polls.pop(0) if self.polls else {}

    def assignment(self) -> set[str]:
        return {"p0"} if self.n_polls >= self.assign_at else set()

    def end_offsets(self, tps: list[str]) -> dict[str, int]:
        return dict.fromkeys(tps, 7)

    def position(self, tp: str) -> int:
        return 7

    def close(self) -> None:
        self.closed = True


def record(value: bytes | None, key: bytes | None = None) -> SimpleNamespace:
    return SimpleNamespace(key=key, value=value)


def tail(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
         polls: list[dict[str, list[Any]]], *argv: str) -> list[str]:
    cons = FakeConsumer(polls)
    monkeypatch.setattr("sift.kafkaclient.consumer", lambda settings, *topics, **kw: cons)
    monkeypatch.setattr("sift.kafkaclient.partition_counts",
                        lambda settings, names: dict.fromkeys(names, 4))
    assert main(["tail", "dead-letters", "--timeout", "0.01", *argv]) == 0
    assert cons.closed
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6])
def test_tail_max_stops_at_exactly_n_across_partitions(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: None,
        n: int) -> None:
    poll = {f"p{p}": [record(orjson.dumps({"p": p, "i": i})) for i in range(2)] for p in range(3)}
    out = tail(monkeypatch, capsys, [poll, dict(poll)], "--max", str(n))
    assert len(out) == n
    assert [orjson.loads(x) for x in out[:2]] == [{"p": 0, "i": 0}, {"p": 0, "i": 1}][:n]


def test_tail_prints_an_empty_message_and_goes_on(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: None) -> None:
    polls = [{"p0": [record(b'{"a":1}'), record(None, b"empty-1"), record(b""),
                     record(b"\xffnot json"), record(b'{"b": 2}')]}]
    out = tail(monkeypatch, capsys, polls)
    assert out == ['{"a":1}', '{"empty":true}', '{"empty":true}',
                   '{"undecodable":"\ufffdnot json"}', '{"b":2}']


# -- finding 5: --raw keys ---------------------------------------------------------------

def test_raw_lines_are_keyed_as_the_wire_contract_says(tmp_path: Path) -> None:
    specs = tmp_path / "ord.jsonl"
    specs.write_text('{"profile":"ord1","query":"oil prices"}\n{"profile":"ord1","delete":true}\n'
                     '{"profile": 7}\nnot json\n[1, 2]\n')
    assert [(k, v, n) for k, v, n in messages(specs, "profiles", 100, True, None)] == [
        (b"ord1", b'{"profile":"ord1","query":"oil prices"}', 1),
        (b"ord1", b'{"profile":"ord1","delete":true}', 1),
        (None, b'{"profile": 7}', 1), (None, b"not json", 1), (None, b"[1, 2]", 1)]
    docs = tmp_path / "d.jsonl"
    docs.write_text('{"id": "a1", "text": "x"}\n{"documents": [{"id": "b1"}, {"id": "b2"}]}\n'
                    '{"documents": []}\n{"id": 5}\n{"profile": "p"}\n')
    assert [k for k, _, _ in messages(docs, "documents", 100, True, None)] == [
        b"a1", b"b1", None, None, None]
    assert raw_key(b'{"doc_id": "r1", "profile": "trade", "relevant": "maybe"}', "judgments") \
        == b"trade"
    assert raw_key(b'{"id": "r1"}', "judgments") is None


def test_raw_help_says_how_lines_are_keyed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["produce", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "still keyed by its document 'id'" in text and "other lines are unkeyed" in text


def test_raw_produce_sends_keyed_lines_unvalidated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        env: None) -> None:
    file = tmp_path / "p.jsonl"
    file.write_text('{"profile":"ord1","query":"oil"}\n{"profile":"ord1","delete":"yes"}\n')
    prod = use_producer(monkeypatch, FakeProducer())
    assert main(["produce", str(file), "--topic", "profiles", "--raw"]) == 0
    assert [k for _, k, _ in prod.sent] == [b"ord1", b"ord1"]
    assert capsys.readouterr().out == f"sent 2 profiles to {PREFIX}profiles\n"


# -- finding 9: gzip by its magic bytes ------------------------------------------------

def test_a_gzip_file_is_read_whatever_its_name(tmp_path: Path) -> None:
    plain = write_docs(tmp_path / "d.jsonl", 3)
    packed = tmp_path / "gz_nosuffix.jsonl"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert list(lines(packed)) == list(lines(plain))
    assert list(messages(packed, "documents", 2, False, None)) == \
        list(messages(plain, "documents", 2, False, None))
    # a .gz name still means gzip: one that is not is refused as before
    fake = tmp_path / "fake.jsonl.gz"
    fake.write_bytes(plain.read_bytes())
    with pytest.raises(SiftError, match=r"fake\.jsonl\.gz: cannot read: Not a gzipped file"):
        list(lines(fake))


# -- finding 10: batch lines -----------------------------------------------------------

def batch_line(*ids: str) -> str:
    return orjson.dumps({"documents": [{"id": i, "text": f"text {i}", "topics": ["earn"]}
                                       for i in ids]}).decode() + "\n"


def test_a_batch_line_is_accepted_and_rebatched(tmp_path: Path) -> None:
    file = tmp_path / "one.jsonl"
    file.write_text(batch_line("a1", "a2", "a3") + '{"id": "b1", "text": "single"}\n'
                    + batch_line("c1"))
    got = list(numbered_messages(file, "documents", 2, False, None))
    assert [(m.key, m.records, m.first, m.last) for m in got] == [
        (b"a1", 2, 1, 1), (b"a3", 2, 1, 2), (b"c1", 1, 3, 3)]
    assert [[d["id"] for d in orjson.loads(m.value)["documents"]] for m in got] == [
        ["a1", "a2"], ["a3", "b1"], ["c1"]]
    assert all("topics" not in d for m in got for d in orjson.loads(m.value)["documents"])
    # one a message, and --limit counts documents, not lines
    singles = list(numbered_messages(file, "documents", 1, False, 4))
    assert [(m.key, orjson.loads(m.value)["id"], m.first) for m in singles] == [
        (b"a1", "a1", 1), (b"a2", "a2", 1), (b"a3", "a3", 1), (b"b1", "b1", 2)]


@pytest.mark.parametrize(("line", "error"), [
    ('{"documents": [{"id": "x1", "text": "ok"}, {"text": "no id"}]}',
     r"^b\.jsonl:2: documents\[1\]: document has no 'id'$"),
    ('{"documents": [{"id": "x1", "text": "ok"}, 3]}', r"^b\.jsonl:2: documents\[1\]: "),
    ('{"documents": {"id": "x1"}}', r"^b\.jsonl:2: field 'documents' must be a list$"),
])
def test_a_bad_batch_line_names_its_line_and_item(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, error: str) -> None:
    monkeypatch.chdir(tmp_path)
    Path("b.jsonl").write_text('{"id": "a", "text": "fine"}\n' + line + "\n")
    with pytest.raises(SiftError, match=error):
        list(messages(Path("b.jsonl"), "documents", 100, False, None))


def test_what_tail_prints_can_be_produced_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        env: None) -> None:
    polls = [{"p0": [record(batch_line("t1", "t2").encode()),
                     record(orjson.dumps({"id": "t3", "text": "alone"}))]}]
    printed = tail(monkeypatch, capsys, polls)
    file = tmp_path / "one.jsonl"
    file.write_text("\n".join(printed) + "\n")
    prod = use_producer(monkeypatch, FakeProducer())
    assert main(["produce", str(file)]) == 0
    assert capsys.readouterr().out == f"sent 3 documents to {PREFIX}documents\n"
    assert [(k, [d["id"] for d in orjson.loads(v)["documents"]]) for _, k, v in prod.sent] == [
        (b"t1", ["t1", "t2", "t3"])]



@pytest.mark.parametrize("from_beginning", [False, True])
def test_tail_timeout_counts_from_when_the_consumer_has_its_partitions(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: None,
        from_beginning: bool) -> None:
    """``--timeout`` counted from the consumer's construction: one slower than the
    timeout to connect and get its partitions (TLS, a loaded machine) printed nothing
    for a topic that held messages (forty-sixth session, a helper's race audit)."""
    message = {"p0": [record(orjson.dumps({"reason": "bad_json"}))]}
    # assigned at the 40th poll (about 8 s of polls at 0.2 s), the message right after
    cons = FakeConsumer([{}] * 40 + [message], assign_at=40)
    monkeypatch.setattr("sift.kafkaclient.consumer", lambda settings, *topics, **kw: cons)
    monkeypatch.setattr("sift.kafkaclient.partition_counts",
                        lambda settings, names: dict.fromkeys(names, 1))
    argv = ["tail", "dead-letters", "--timeout", "0.01"]
    assert main(argv + (["--from-beginning"] if from_beginning else [])) == 0
    assert capsys.readouterr().out.splitlines() == ['{"reason":"bad_json"}']
    assert cons.closed


def test_tail_of_a_topic_that_does_not_exist_says_so_and_waits(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: None) -> None:
    """A misspelt SIFT_TOPIC_PREFIX printed nothing at all; waiting is right before the
    first worker creates the topics, so it waits, but says what it waits for."""
    cons = FakeConsumer([])
    monkeypatch.setattr("sift.kafkaclient.consumer", lambda settings, *topics, **kw: cons)
    monkeypatch.setattr("sift.kafkaclient.partition_counts", lambda settings, names: {})
    monkeypatch.setenv("SIFT_TOPIC_PREFIX", "zz9.")
    assert main(["tail", "decisions", "--timeout", "0.01"]) == 0
    err = capsys.readouterr().err
    assert "topic zz9.decisions does not exist yet; waiting for it" in err
    assert "SIFT_TOPIC_PREFIX='zz9.'" in err


def test_profiles_list_without_a_profile_table_is_an_error(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: None) -> None:
    """A misspelt SIFT_APP_ID printed "0 profiles"."""
    monkeypatch.setattr("sift.kafkaclient.partition_counts", lambda settings, names: {})
    monkeypatch.setenv("SIFT_APP_ID", "nosuchapp")
    assert main(["profiles", "list"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "topic nosuchapp-profile_to_state-changelog does not exist" in err[0]
    assert "is SIFT_APP_ID=nosuchapp the workers'" in err[0]


def test_profile_specs_are_checked_as_the_worker_reads_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec with a ``mode`` is a review spec to the worker, which dead-letters a
    misspelt mode (``bad_mode``); ``produce`` checked every spec as a standing profile's
    and sent it (forty-fourth session). A review spec and a standing spec both pass."""
    monkeypatch.chdir(tmp_path)
    good = ('{"profile": "r1", "mode": "review", "query": "wilson disease"}\n'
            '{"profile": "trade", "query": "trade"}\n')
    Path("p.jsonl").write_text(good)
    assert [m.records for m in numbered_messages(Path("p.jsonl"), "profiles", 100, False, None)] == [1, 1]
    Path("bad.jsonl").write_text(good + '{"profile": "r2", "mode": "Review", "query": "x"}\n')
    with pytest.raises(SiftError, match=r"^bad.jsonl:3: .*mode"):
        list(messages(Path("bad.jsonl"), "profiles", 100, False, None))
