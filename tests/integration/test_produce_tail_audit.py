"""`sift produce` and `sift tail` against a real broker (forty-third session audit): a
document over the broker's message.max.bytes fails the command, naming its line, and
nothing is written (kafka-python's flush does not raise for it: the check is on the
send's future); `tail --max` stops at N across partitions and prints an empty message."""

from __future__ import annotations

import uuid
from pathlib import Path

import orjson
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from sift.cli import main

PARTITIONS = 4


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    cons = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return {tp.partition: off for tp, off in cons.end_offsets(tps).items()}
    finally:
        cons.close()


def test_a_refused_document_is_an_error_and_tail_max_is_exact(
        broker_url: str, bootstrap: str, topic_prefix: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for key, value in (("SIFT_BROKER", broker_url), ("SIFT_TOPIC_PREFIX", topic_prefix),
                       ("SIFT_APP_ID", f"sift-{uuid.uuid4().hex[:8]}"),
                       ("SIFT_PARTITIONS", str(PARTITIONS))):
        monkeypatch.setenv(key, value)
    topic = f"{topic_prefix}documents"
    small = tmp_path / "small.jsonl"
    small.write_text("".join(orjson.dumps({"id": f"s{i}", "text": f"word {i}"}).decode() + "\n"
                             for i in range(12)))
    assert main(["produce", str(small), "--batch", "1"]) == 0
    assert capsys.readouterr().out == f"sent 12 documents to {topic}\n"
    before = end_offsets(bootstrap, topic)
    assert sum(before.values()) == 12

    # 2.5 MB: over the local broker's 2 MiB (and a stock broker's 1 MiB) message.max.bytes
    huge = tmp_path / "huge.jsonl"
    huge.write_text(orjson.dumps({"id": "huge-d", "text": "word " * 500_000}).decode() + "\n")
    # produce refuses it itself at the worker's limit (SIFT_MAX_DOCUMENT_BYTES, 1 MB by
    # default; forty-fifth session), naming the setting and sending nothing
    assert main(["produce", str(huge), "--batch", "1"]) == 1
    _, err = capsys.readouterr()
    assert err.strip().endswith("over the limit of 1000000 (SIFT_MAX_DOCUMENT_BYTES)")
    assert end_offsets(bootstrap, topic) == before
    # with a worker limit above the broker's, the broker's refusal is the error
    monkeypatch.setenv("SIFT_MAX_DOCUMENT_BYTES", str(8 * 2**20))
    assert main(["produce", str(huge), "--batch", "1"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"sift produce: error: {huge}:1 (1 document, 2,500,025 bytes): refused by the broker "
        "as too large (MessageSizeTooLargeError)")
    assert end_offsets(bootstrap, topic) == before

    # an empty message, then tail: exactly --max lines over the four partitions
    prod = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        prod.send(topic, key=b"empty-1", value=None).get(timeout=10)
    finally:
        prod.close()
    for n in (1, 2, 5):
        assert main(["tail", "documents", "--from-beginning", "--max", str(n),
                     "--timeout", "10"]) == 0
        assert len(capsys.readouterr().out.splitlines()) == n
    assert main(["tail", "documents", "--from-beginning", "--timeout", "3"]) == 0
    printed = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed.count({"empty": True}) == 1
    assert sorted(d["id"] for d in printed if "id" in d) == sorted(f"s{i}" for i in range(12))
