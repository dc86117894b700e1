"""``sift review`` without a broker: its records and its one-line errors."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import orjson
import pytest

from sift.cli import main
from sift.commands.review import collection, gold_labels, review_spec
from sift.errors import SiftError

DATA = Path(__file__).resolve().parents[2] / "data" / "screening" / "Donners_2021.jsonl.gz"


def test_a_screening_file_becomes_documents_naming_the_review_without_labels() -> None:
    docs = list(collection(DATA, "donners", limit=5))
    with gzip.open(DATA) as fh:
        rows = [orjson.loads(line) for line in fh][:5]
    assert [d.id for d in docs] == [str(r["id"]) for r in rows]
    for d, r in zip(docs, rows, strict=True):
        assert d.metadata == {"review": "donners"} and d.title == (r["title"] or "")
        assert d.text == " ".join(x.strip() for x in (r["title"], r["abstract"]) if x and x.strip())
        assert "label" not in orjson.dumps(d.to_obj()).decode()
    assert len(list(collection(DATA, "donners"))) == 258
    labels = gold_labels(DATA)
    assert len(labels) == 258 and sum(labels.values()) == 15


def test_a_documents_file_keeps_its_text(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b'{"id": "a", "text": "copper", "title": "T"}\n\n{"id": 7, "text": "x"}\n')
    docs = list(collection(path, "r"))
    assert [(d.id, d.text, d.title) for d in docs] == [("a", "copper", "T"), ("7", "x", "")]


@pytest.mark.parametrize(("content", "where"), [
    (b'{"id": "a", "title": "", "abstract": ""}\n', ":1:"),
    (b'{"id": "a", "text": "x"}\n{not json\n', ":2:"),
    (b'[1, 2]\n', ":1:"),
])
def test_a_bad_record_names_its_file_and_line(tmp_path: Path, content: bytes, where: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(SiftError, match=re.escape(f"bad.jsonl{where}")):
        list(collection(path, "r"))


def test_gold_labels_need_an_id_and_a_label(tmp_path: Path) -> None:
    path = tmp_path / "gold.jsonl"
    path.write_bytes(b'{"id": "a", "label": 1}\n{"id": "b", "label": 2}\n')
    with pytest.raises(SiftError, match=r"gold\.jsonl:2: a gold record needs"):
        gold_labels(path)
    path.write_bytes(b"\n")
    with pytest.raises(SiftError, match="no gold labels"):
        gold_labels(path)


def test_a_bad_spec_is_refused_before_anything_is_sent() -> None:
    assert review_spec("r", "q", {"draws": 5})["mode"] == "review"
    with pytest.raises(SiftError, match="NUL"):
        review_spec("a\x00b", "q", {})
    with pytest.raises(SiftError, match="query"):
        review_spec("r", "  ", {})


@pytest.mark.parametrize("argv", [
    ["review", "load", "r", "/nonexistent/file.jsonl"],
    ["review", "start", "r", "--query", " "],
    ["review", "answer", "r", "--gold", "/nonexistent/gold.jsonl"],
])
def test_cli_errors_are_one_line(argv: list[str], capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIFT_BROKER", "kafka://127.0.0.1:1")  # never reached
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sift review: "), err


@pytest.mark.parametrize("argv", [
    ["profiles", "--broker", "kafka://h:1", "list"], ["profiles", "list", "--broker", "kafka://h:1"],
    ["profiles", "rm", "x", "--broker", "kafka://h:1"],
    ["profiles", "--broker", "kafka://other:2", "add", "x", "--broker", "kafka://h:1"],
    ["review", "status", "--broker", "kafka://h:1"], ["review", "--broker", "kafka://h:1", "rm", "r"],
])
def test_broker_is_taken_before_or_after_the_verb(argv: list[str]) -> None:
    from sift.cli import build_parser

    assert build_parser().parse_args(argv).broker == "kafka://h:1"


def test_without_broker_the_verbs_read_the_environment() -> None:
    from sift.cli import build_parser

    assert build_parser().parse_args(["profiles", "list"]).broker is None
    assert build_parser().parse_args(["review", "status"]).broker is None


def test_status_leaves_out_reviews_deleted_since(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A deleted review's last status stays on its topic; ``status`` no longer shows it,
    and names it deleted, until a spec creates it again."""
    import sift.kafkaclient as kafkaclient

    def status(name: str, ts: float) -> bytes:
        return orjson.dumps({"review": name, "documents": 5, "screened": 2, "found": 1,
                             "pending": 0, "batches": 1, "r_hat": 1.0, "r_hat_var": 0.0,
                             "recall_estimate": 1.0, "recall_lower": 1.0, "estimator": "bound",
                             "target_recall": 0.95, "stop": False, "complete": False, "ts": ts})

    def spec(name: str, delete: bool = False) -> bytes:
        return orjson.dumps({"profile": name, "mode": "review", "query": "q", "delete": delete})

    topics = {
        "sift.review-status": [status("a", 1.0), status("b", 2.0), status("c", 3.0)],
        "sift.profiles": [spec("a"), spec("b"), spec("c"), spec("b", delete=True),
                          orjson.dumps({"profile": "trade", "query": "trade"}), b"{bad", None,
                          spec("c", delete=True), spec("c")],
    }
    monkeypatch.setattr(kafkaclient, "ensure_topics", lambda settings, names: None)
    monkeypatch.setattr(kafkaclient, "read_all", lambda settings, topic, **kw: [
        (None, v, 0, i) for i, v in enumerate(topics[topic])])
    monkeypatch.setenv("SIFT_BROKER", "kafka://127.0.0.1:1")
    assert main(["review", "status"]) == 0
    assert [line.split(":")[0] for line in capsys.readouterr().out.splitlines()] == ["a", "c"]
    assert main(["review", "status", "b"]) == 1
    assert capsys.readouterr().err.strip() == "sift review: error: review 'b' was deleted"
    assert main(["review", "status", "zz"]) == 1
    assert "no status for review 'zz'" in capsys.readouterr().err
    # documents or answers for a review that is not there are refused before anything is
    # sent (the worker dead-lettered the documents; answering waited for nothing)
    import sift.commands.review as review_cmd

    sent: list[str] = []
    monkeypatch.setattr(review_cmd, "_send", lambda settings, topic, messages: sent.append(topic))
    for name, why in (("b", "review 'b' was deleted"), ("zz", "start it with 'sift review start zz")):
        assert main(["review", "load", name, str(DATA), "--limit", "3"]) == 1
        assert why in capsys.readouterr().err
        assert main(["review", "answer", name, "--gold", str(DATA), "--until-stop", "1"]) == 1
        assert why in capsys.readouterr().err
    assert sent == []
    assert main(["review", "load", "a", str(DATA), "--limit", "3"]) == 0
    assert sent == ["sift.documents"] and "sent 3 documents" in capsys.readouterr().out
