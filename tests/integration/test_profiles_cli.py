"""The command line against a real broker and a real worker: `sift profiles` (add, list,
remove, and the worker's answer with `--wait`, accepted or dead-lettered), `sift produce`
(a file with a bad line sends nothing) and `sift tail`."""

from __future__ import annotations

import dataclasses
import io
import uuid
from pathlib import Path

import orjson
import pytest

from sift.agents.harness import WorkerProcess, wait_for
from sift.cli import main
from sift.settings import Settings
from tests.integration.test_service import make_corpus

PARTITIONS = 2


def test_profiles_add_list_rm_with_the_workers_answer(
    broker_url: str, topic_prefix: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    path, train, _ = make_corpus(tmp_path_factory)
    app_id = f"sift-{uuid.uuid4().hex[:8]}"
    for key, value in (("SIFT_BROKER", broker_url), ("SIFT_TOPIC_PREFIX", topic_prefix),
                       ("SIFT_APP_ID", app_id), ("SIFT_PARTITIONS", str(PARTITIONS))):
        monkeypatch.setenv(key, value)
    settings = Settings(broker=broker_url, topic_prefix=topic_prefix, app_id=app_id,
                        partitions=PARTITIONS, data_dir=str(tmp_path / "w1"), idf_corpus=str(path))
    wheat = [d.id for d in train if "wheat" in d.topics][:2]
    worker = WorkerProcess(settings, "w1").start()
    try:
        worker.wait_ready()
        capsys.readouterr()

        # accepted: the record reaches the table's changelog (a bagged profile: three
        # members from consecutive pseudolabel seeds)
        assert main(["profiles", "add", "wheat", "--query", "wheat grain", "--positive", wheat[0],
                     "--positive", wheat[1], "--bags", "3", "--wait", "60"]) == 0
        out = capsys.readouterr().out
        assert "'wheat'" in out and "created (rocchio, 3 bagged, threshold 0.0000" in out

        # a positive that is neither a known document id nor a text: dead-lettered, said
        assert main(["profiles", "add", "typo", "--query", "wheat", "--positive", "r-no-such-doc",
                     "--wait", "60"]) == 1
        err = capsys.readouterr().err
        assert "unknown_positive" in err and "'r-no-such-doc'" in err

        # a bad parameter: refused before anything is sent (since the forty-eighth
        # session; the command said "sent" and the worker dead-lettered it) ...
        assert main(["profiles", "add", "bad", "--query", "gold", "--param", "top_k=-3",
                     "--wait", "60"]) == 1
        assert "profile 'bad': top_k must be" in capsys.readouterr().err
        # ... and sent anyway (another client), dead-lettered with the parameter named
        from sift.commands.profiles import send_and_wait

        ok, why = send_and_wait(settings, {"profile": "bad", "query": "gold",
                                           "params": {"top_k": -3}}, 60)
        assert not ok and "bad_params" in why and "top_k" in why

        assert main(["profiles", "list", "--json"]) == 0
        listed = capsys.readouterr().out
        assert '"profile":"wheat"' in listed and "typo" not in listed and '"bad"' not in listed
        assert [orjson.loads(line)["bags"] for line in listed.splitlines()] == [3]

        assert main(["profiles", "rm", "wheat", "--wait", "60"]) == 0
        assert "deleted" in capsys.readouterr().out
        assert main(["profiles", "rm", "ghost", "--wait", "60"]) == 1
        assert "unknown_profile" in capsys.readouterr().err

        # without --wait the spec is only sent
        assert main(["profiles", "add", "gold", "--query", "gold"]) == 0
        assert "sent profile 'gold'" in capsys.readouterr().out
        wait_for(lambda: worker.stats()["stats"].get("profiles_created", 0) == 2, 60, "gold")
        # sent again: said to be a replacement (it said "created")
        assert main(["profiles", "add", "gold", "--query", "gold", "--wait", "60"]) == 0
        assert "'gold': replaced (rocchio, threshold" in capsys.readouterr().out

        # documents through `sift produce` (batched, then one a message), decisions
        # through `sift tail`; a file with a bad line is refused whole, with its line
        docs = [{"id": f"p{i}", "text": t} for i, t in enumerate(
            ["gold prices rose as bullion demand grew", "gold mine output up sharply",
             "gold futures and gold bullion steady", "gold reserves of the central bank"])]
        good = tmp_path / "docs.jsonl"
        good.write_text("".join(orjson.dumps(d).decode() + "\n" for d in docs))
        bad = tmp_path / "bad.jsonl"
        bad.write_text(orjson.dumps({"id": "q0", "text": "gold"}).decode() + "\n"
                       + '{"id": "q1"}\n')
        assert main(["produce", str(bad)]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{bad}:2:" in err[0] and "no text" in err[0]
        assert main(["produce", str(good), "--batch", "2"]) == 0
        assert main(["produce", str(good), "--batch", "1", "--limit", "1"]) == 0
        assert "sent 4 documents" in capsys.readouterr().out
        wait_for(lambda: worker.stats()["stats"].get("documents", 0) >= 5, 60, "documents")
        assert main(["tail", "documents", "--from-beginning", "--timeout", "3"]) == 0
        seen = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
        ids = [d["id"] for m in seen for d in m.get("documents", [m])]
        assert sorted(ids) == ["p0", "p0", "p1", "p2", "p3"]  # never q0: nothing of bad.jsonl
        assert main(["tail", "decisions", "--from-beginning", "--max", "1", "--timeout", "30"]) == 0
        decision = orjson.loads(capsys.readouterr().out.splitlines()[0])
        assert decision["profile"] == "gold" and decision["doc_id"].startswith("p")
        assert decision["score"] >= decision["threshold"]
    finally:
        worker.stop()

    # a replacement worker (a data directory of its own, nothing in memory) reads the
    # recent documents back before it joins, so a judgment of a document the first
    # worker scored, sent without its text (from standard input), is learned
    second = WorkerProcess(dataclasses.replace(settings, data_dir=str(tmp_path / "w2")),
                           "w2").start()
    try:
        second.wait_ready()
        # p0-p3 in 3 messages (p0 twice: kept once)
        log = second.log_path.read_text()
        assert "restored 4 recent documents from 3 messages" in log
        assert "INFO kafka." not in log  # kafka-python's connection chatter is left out
        line = orjson.dumps({"id": "late-1", "doc_id": decision["doc_id"], "profile": "gold",
                             "relevant": True})
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(line + b"\n")))
        assert main(["produce", "-", "--topic", "judgments"]) == 0
        wait_for(lambda: second.stats()["stats"].get("judgments", 0) == 1, 60, "the judgment")
        assert second.stats()["stats"].get("dead_letters.unknown_document", 0) == 0
        # the judge changes their mind: the other label corrects the judgment (one label
        # per document and profile), learned by the profile in place of the first
        fix = orjson.dumps({"id": "late-2", "doc_id": decision["doc_id"], "profile": "gold",
                            "relevant": False})
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(fix + b"\n")))
        assert main(["produce", "-", "--topic", "judgments"]) == 0
        wait_for(lambda: second.stats()["stats"].get("judgments_corrected", 0) == 1, 60,
                 "the correction")
        assert second.stats()["stats"].get("judgments", 0) == 1
    finally:
        second.stop()

    # a third worker recovers the label from the profile's record: the same label again is
    # a repeat (skipped), the first label again a second correction
    third = WorkerProcess(dataclasses.replace(settings, data_dir=str(tmp_path / "w3")),
                          "w3").start()
    try:
        third.wait_ready()
        lines = b"".join(orjson.dumps({"id": f"late-{i}", "doc_id": decision["doc_id"],
                                       "profile": "gold", "relevant": rel}) + b"\n"
                         for i, rel in ((3, False), (4, True)))
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(lines)))
        assert main(["produce", "-", "--topic", "judgments"]) == 0
        wait_for(lambda: third.stats()["stats"].get("judgments_corrected", 0) == 1, 60,
                 "the second correction")
        stats = third.stats()["stats"]
        assert (stats.get("judgments_repeated", 0), stats.get("judgments", 0)) == (1, 0)
    finally:
        third.stop()


def test_profiles_wait_without_a_worker_is_a_one_line_error(
    broker_url: str, topic_prefix: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for key, value in (("SIFT_BROKER", broker_url), ("SIFT_TOPIC_PREFIX", topic_prefix),
                       ("SIFT_APP_ID", f"sift-{uuid.uuid4().hex[:8]}"),
                       ("SIFT_PARTITIONS", str(PARTITIONS))):
        monkeypatch.setenv(key, value)
    assert main(["profiles", "add", "wheat", "--query", "wheat", "--wait", "2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no answer for profile 'wheat' within 2 s" in err[0]
