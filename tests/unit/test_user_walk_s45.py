"""Defects found by following the README as a new user (forty-fifth session, findings 2, 3, 5
and 13 of /tmp/s45/fresh/FINDINGS.md): the demo's leftovers on the broker and in the
temporary folder, ``--out`` checked only after a whole run, misspelt options reported by the
top-level parser, and silent or undocumented commands."""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from sift.cli import build_parser, main
from sift.errors import SiftError
from tests.unit.test_replay_cli import _docs, _write
from tests.unit.test_screening import _corpus
from tests.unit.test_screening import _write as _write_gz

# ------------------------------------------------------------ finding 5: usage errors


@pytest.mark.parametrize(("argv", "prog", "bad"), [
    (["replay", "--limit", "10"], "sift replay", "--limit 10"),
    (["produce", "data/reuters21578/test.jsonl.gz", "--topics", "judgments"], "sift produce",
     "--topics judgments"),
    (["profiles", "add", "wheat", "--querry", "x"], "sift profiles add", "--querry x"),
    (["screen", "--all", "data/screening", "--seed-count", "3"], "sift screen", "--seed-count 3"),
])
def test_a_misspelt_option_is_reported_by_its_subcommand(
        argv: list[str], prog: str, bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``sift replay --limit 10`` said ``sift: error: unrecognized arguments: --limit 10
    (see sift --help)``: neither the subcommand nor its help."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 1
    assert capsys.readouterr().err == (
        f"{prog}: error: unrecognized arguments: {bad} (see {prog} --help)\n")


def test_an_unknown_option_before_the_subcommand_is_still_the_top_levels(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--bogus", "replay"])
    assert exc.value.code == 1
    assert capsys.readouterr().err == (
        "sift: error: unrecognized arguments: --bogus (see sift --help)\n")


def test_valid_command_lines_still_parse() -> None:
    parser = build_parser()
    args = parser.parse_args(["profiles", "--broker", "kafka://h:1", "add", "w", "--query", "x"])
    assert (args.verb, args.name, args.query, args.broker) == ("add", "w", "x", "kafka://h:1")
    assert parser.parse_args(["replay", "--out", "o", "--bags", "2"]).bags == 2


# ------------------------------------------------------------ finding 3: --out first


def _files(tmp_path: Path) -> tuple[Path, Path]:
    return (_write(tmp_path / "train.jsonl.gz", _docs(60, 0), gz=True),
            _write(tmp_path / "test.jsonl", _docs(30, 1000)))


def _not_a_folder(tmp_path: Path, how: str) -> Path:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file\n")
    return blocker if how == "file" else blocker / "x"


@pytest.mark.parametrize("how", ["file", "under a file"])
def test_replay_refuses_a_bad_out_before_it_runs(
        tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``sift replay --out /etc/passwd/x`` ran the whole replay (3.5 minutes with
    ``--full-training --model knn``), then failed with a raw ``[Errno 20]``."""
    import sift.commands.replay as cmd

    ran: list[bool] = []
    monkeypatch.setattr(cmd, "replay", lambda *a, **k: ran.append(True))
    train, test = _files(tmp_path)
    out = _not_a_folder(tmp_path, how)
    assert main(["replay", "--train", str(train), "--test", str(test), "--out", str(out)]) == 1
    assert not ran
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sift replay: error: --out ")
    assert str(out) in err and "Errno" not in err


def test_replay_prints_its_table_before_it_writes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A write that fails after the run (here metrics.json is a folder) no longer loses the
    measures: the table is on stdout first."""
    train, test = _files(tmp_path)
    out = tmp_path / "out"
    (out / "metrics.json").mkdir(parents=True)
    assert main(["replay", "--train", str(train), "--test", str(test), "--out", str(out),
                 "--no-plot"]) == 1
    captured = capsys.readouterr()
    assert "macro_t11su" in captured.out and "largest profiles" in captured.out
    assert captured.err.startswith("sift replay: error:")


def test_replay_output_is_unchanged_for_a_good_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    train, test = _files(tmp_path)
    out = tmp_path / "new" / "folder"
    assert main(["replay", "--train", str(train), "--test", str(test), "--out", str(out),
                 "--no-plot"]) == 0
    assert (out / "metrics.json").is_file() and (out / "decisions.jsonl").is_file()
    text = capsys.readouterr().out
    assert text.index("macro_t11su") < text.index("wrote ")


@pytest.mark.parametrize("how", ["file", "under a file"])
@pytest.mark.parametrize("mode", ["rdpg", "text"])
def test_nominate_refuses_a_bad_out_before_it_runs(
        tmp_path: Path, how: str, mode: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import sift.commands.nominate as cmd

    ran: list[bool] = []
    monkeypatch.setattr(cmd, "simulate_rdpg", lambda *a, **k: ran.append(True))
    monkeypatch.setattr(cmd, "load_texts", lambda *a, **k: ran.append(True))
    out = _not_a_folder(tmp_path, how)
    source = (["--simulate", "rdpg"] if mode == "rdpg"
              else ["--data", str(_write(tmp_path / "d.jsonl", _docs(30, 0))), "--category", "oil"])
    assert main(["nominate", *source, "--out", str(out)]) == 1
    assert not ran
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sift nominate: error: --out ")
    assert str(out) in err and "Errno" not in err


def test_nominate_prints_its_table_before_it_writes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rdpg"
    (out / "rdpg.json").mkdir(parents=True)
    assert main(["nominate", "--simulate", "rdpg", "--runs", "2", "--k", "5",
                 "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert "observed: P" in captured.out and "alpha" in captured.out
    assert captured.err.startswith("sift nominate: error:")


# ------------------------------------------------------------ finding 13: housekeeping


def test_screen_all_reports_each_dataset_when_not_on_a_terminal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Redirected, ``sift screen --all`` printed nothing for its whole run (ten minutes on
    the bundled sets with ten seeds): the progress bar is drawn only on a terminal."""
    ids, texts, labels = _corpus(48)
    for name in ("a", "b"):
        _write_gz(tmp_path / f"{name}.jsonl.gz", [
            {"id": i, "title": t, "label": y} for i, t, y in zip(ids, texts, labels, strict=True)
        ])
    (tmp_path / "reviews.json").write_text(json.dumps({"a": "wilson disease copper",
                                                       "b": "wilson disease copper"}))
    assert main(["screen", "--all", str(tmp_path), "--seeds", "2", "--estimator", "hh",
                 "--draws", "6", "--n-top", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = next(i for i, line in enumerate(lines) if line.startswith("rule "))
    done = [line for line in lines[:table] if line.startswith("screen: ")]
    assert len(done) == 2
    assert "a:" in done[0] and "1/2" in done[0] and "b:" in done[1] and "2/2" in done[1]


def _subparser(parser: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    for name in names:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


@pytest.mark.parametrize("verb", ["add", "list", "rm"])
def test_profiles_verbs_have_a_description(verb: str) -> None:
    """``sift profiles add --help`` went from the usage straight to the arguments."""
    sub = _subparser(build_parser(), "profiles", verb)
    assert sub.description and sub.description.strip()
    paragraphs = sub.format_help().split("\n\n")
    assert not paragraphs[1].startswith(("positional arguments", "options"))


# ------------------------------------------------------------ finding 2: demo leftovers


class FakeAdmin:
    """The topics of a broker, for the admin calls the demo makes."""

    def __init__(self, topics: list[str], fail: bool = False) -> None:
        self.topics = list(topics)
        self.deleted: list[list[str]] = []
        self.fail = fail
        self.closed = False

    def list_topics(self) -> list[str]:
        return list(self.topics)

    def delete_topics(self, names: list[str], timeout_ms: int | None = None) -> None:
        if self.fail:
            from kafka.errors import KafkaTimeoutError

            raise KafkaTimeoutError("the broker did not answer")
        self.deleted.append(sorted(names))
        self.topics = [t for t in self.topics if t not in names]

    def delete_groups(self, group_ids: list[str]) -> dict[str, str]:
        """kafka-python 3's answer (the forty-sixth session deletes the run's group)."""
        self.deleted_groups = [*getattr(self, "deleted_groups", []), *group_ids]
        return {g: "OK" for g in group_ids}

    def close(self) -> None:
        self.closed = True


OTHERS = ["sift.documents", "sift.judgments", "sift-profile_to_state-changelog",
          "__consumer_offsets", "demo999999.documents", "sift-demo-999999-profile_to_state-changelog"]


def _run_topics(prefix: str, app_id: str) -> list[str]:
    return sorted([f"{prefix}documents", f"{prefix}judgments", f"{prefix}decisions",
                   f"{app_id}-profile_to_state-changelog", f"{app_id}-__assignor-__leader",
                   f"{app_id}-profile_to_journal-changelog",
                   f"{app_id}-sift.agents.app.route-documents-repartition"])


@pytest.fixture
def demo_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``sift demo`` with its broker, its stream and the admin client replaced: the topics
    the run "creates" are added to a fake broker holding other runs' and users' topics."""
    import sift.commands.demo as demo
    import sift.kafkaclient as kc

    env: dict[str, Any] = {"admin": FakeAdmin(list(OTHERS)), "settings": None, "outcome": None,
                           "stream_calls": 0}
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    env["temp"] = temp

    @contextmanager
    def fake_broker(settings: Any, port: int, keep: bool, **kw: Any) -> Iterator[str]:
        yield "kafka://127.0.0.1:1"

    def fake_stream(settings: Any, corpus: Any, chunk: int, bags: int = 1) -> dict[str, Any]:
        env["settings"] = settings
        env["stream_calls"] += 1
        env["admin"].topics += _run_topics(settings.topic_prefix, settings.app_id)
        Path(settings.data_dir).mkdir(parents=True)
        (Path(settings.data_dir) / "worker.log").write_text("log\n")
        if env["outcome"] is not None:
            raise env["outcome"]
        m = {"profiles": 3, "macro_t11su": 0.5, "macro_t11f": 0.4, "micro_precision": 0.6,
             "micro_recall": 0.7}
        return {"stream": m, "documents": 30, "bags": bags, "truncate": None, "chars": None,
                "decisions": 10, "judgments": 10, "stream_seconds": 1.0, "total_seconds": 2.0,
                "chunk": chunk, "dead_letters": 0, "specs_obj": []}

    monkeypatch.setattr(demo, "broker_for", fake_broker)
    monkeypatch.setattr(demo, "stream", fake_stream)
    monkeypatch.setattr(kc, "admin", lambda settings, timeout=30.0: env["admin"])
    train, test = _files(tmp_path)
    env["argv"] = ["demo", "--train", str(train), "--test", str(test), "--no-compare",
                   "--out", str(tmp_path / "result.json")]
    return env


def test_demo_deletes_the_topics_it_created_and_its_folder(
        demo_env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """Every run left its topics (its prefix's, and its app's compacted changelogs) on the
    reused local broker: 321 MB a ``make demo``, 1.5 GB a ``--bags 5`` run; and a
    /tmp/sift-demo-* folder."""
    assert main(demo_env["argv"]) == 0
    s = demo_env["settings"]
    assert demo_env["admin"].deleted == [_run_topics(s.topic_prefix, s.app_id)]
    assert sorted(demo_env["admin"].topics) == sorted(OTHERS)  # nothing else touched
    assert demo_env["admin"].closed
    assert list(demo_env["temp"].iterdir()) == []
    out = capsys.readouterr().out
    removed = [line for line in out.splitlines() if "removed" in line]
    assert len(removed) == 1 and "7 topics" in removed[0] and s.topic_prefix in removed[0]
    assert demo_env["admin"].deleted_groups == [s.app_id]
    assert f"and its consumer group {s.app_id} from" in removed[0]


@pytest.mark.parametrize("outcome", [SiftError("only 3 of 5 decisions arrived"),
                                     KeyboardInterrupt()])
def test_a_failed_demo_deletes_its_topics_and_keeps_its_worker_log(
        demo_env: dict[str, Any], outcome: BaseException,
        capsys: pytest.CaptureFixture[str]) -> None:
    demo_env["outcome"] = outcome
    assert main(demo_env["argv"]) == (130 if isinstance(outcome, KeyboardInterrupt) else 1)
    s = demo_env["settings"]
    assert demo_env["admin"].deleted == [_run_topics(s.topic_prefix, s.app_id)]
    kept = list(demo_env["temp"].iterdir())
    assert len(kept) == 1 and (kept[0] / "worker" / "worker.log").is_file()
    captured = capsys.readouterr()
    assert str(kept[0]) in captured.out + captured.err


def test_keep_broker_keeps_the_topics(demo_env: dict[str, Any],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*demo_env["argv"], "--keep-broker"]) == 0
    s = demo_env["settings"]
    assert demo_env["admin"].deleted == []
    assert set(_run_topics(s.topic_prefix, s.app_id)) <= set(demo_env["admin"].topics)
    out = capsys.readouterr().out
    assert "kept" in out and s.topic_prefix in out


def test_a_cleanup_that_fails_does_not_fail_the_demo(
        demo_env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    demo_env["admin"].fail = True
    assert main(demo_env["argv"]) == 0
    assert orjson.loads(Path(demo_env["argv"][-1]).read_bytes())["documents"] == 30
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "could not delete" in err


def test_run_topics_are_only_this_runs() -> None:
    from sift.commands.demo import run_topics
    from sift.settings import Settings

    s = Settings(topic_prefix="demoabc123.", app_id="sift-demo-abc123")
    names = ["demoabc123.documents", "sift-demo-abc123-x-changelog", "demoabc1234.documents",
             "sift-demo-abc1234-x-changelog", "sift.documents", "demoabc123",
             "sift-demo-abc123"]
    assert run_topics(names, s) == ["demoabc123.documents", "sift-demo-abc123-x-changelog"]
    with pytest.raises(ValueError):
        run_topics(names, Settings(topic_prefix="", app_id="sift-demo-abc123"))


def test_leftover_partition_folders_of_deleted_topics_go_once_the_broker_stopped(
        tmp_path: Path) -> None:
    """A deleted topic's partitions are only renamed ``...-delete`` at once; the broker
    removes them a minute later, or at its next run: a broker the demo stops right after
    the deletion kept them. Only the named topics' folders are removed."""
    from sift.commands.demo import remove_partition_dirs

    logs = tmp_path / "kafka-logs"
    gone = ["demoab.documents", "sift-demo-ab-profile_to_state-changelog"]
    for name in ("demoab.documents-0.0123456789abcdef0123456789abcdef-delete",
                 "demoab.documents-3",
                 "sift-demo-ab-profile_to_state-changelog-1.fedcba9876543210fedcba9876543210-delete",
                 "sift-demo-ab-profile_to_state-changelog-0.fedcba9876543210fedcba9876543210-stray",
                 "demoab.documents2-0.0123456789abcdef0123456789abcdef-delete",
                 "sift.documents-0", "__consumer_offsets-3", "demoab.judgments-0"):
        (logs / name).mkdir(parents=True)
        (logs / name / "00000000000000000000.log").write_bytes(b"x")
    (logs / "meta.properties").write_text("x\n")
    assert remove_partition_dirs(logs, gone) == 4
    assert sorted(p.name for p in logs.iterdir()) == sorted([
        "demoab.documents2-0.0123456789abcdef0123456789abcdef-delete", "sift.documents-0",
        "__consumer_offsets-3", "demoab.judgments-0", "meta.properties"])


def test_sigterm_ends_a_demo_as_ctrl_c_does() -> None:
    # a demo killed with SIGTERM left its topics and folder: the signal now raises
    # KeyboardInterrupt, which runs the same clean-up as Ctrl-C; the handlers are restored
    import os
    import signal
    import time

    from sift.commands.demo import terminate_as_interrupt

    def ignore(signum: int, frame: object) -> None:  # (without the demo's handler, the
        pass                                         # signal must not end the test run)

    saved = {sig: signal.signal(sig, ignore) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            with pytest.raises(KeyboardInterrupt, match=sig.name), terminate_as_interrupt():
                os.kill(os.getpid(), sig)
                for _ in range(100):  # the handler runs between two bytecodes of this loop
                    time.sleep(0.05)
            assert signal.getsignal(signal.SIGTERM) is ignore
            assert signal.getsignal(signal.SIGHUP) is ignore
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@pytest.fixture
def watchdog_exits(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The demo's watchdog with graces of 0.5 s, its ``os._exit`` recorded instead of
    called, and SIGTERM caught (without the demo's handler it must not end the test run)."""
    import signal

    import sift.commands.demo as demo

    exits: list[int] = []
    monkeypatch.setattr(demo, "TERMINATE_GRACE", (0.5, 0.5))
    monkeypatch.setattr(demo.os, "_exit", exits.append)
    saved = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        yield exits
    finally:
        signal.signal(signal.SIGTERM, saved)


def _terminate_and_wait(swallow: bool) -> None:
    """SIGTERM this process, then wait for the handler's interrupt, swallowed (as the Kafka
    client's network loop does) or not."""
    import os
    import signal
    import time

    try:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100):  # the handler runs between two bytecodes of this loop
            time.sleep(0.05)
    except KeyboardInterrupt:
        if not swallow:
            raise


@pytest.mark.parametrize("cleanup_begins", [False, True])
def test_a_lost_interrupt_still_ends_a_terminated_demo(watchdog_exits: list[int],
                                                       cleanup_begins: bool) -> None:
    # kafka-python's network loop catches every exception: a KeyboardInterrupt raised
    # there by SIGTERM is lost and the demo went on; the watchdog then ends the process
    import time

    import sift.commands.demo as demo

    with demo.terminate_as_interrupt():
        _terminate_and_wait(swallow=True)
        if cleanup_begins:
            demo._CLEANING.set()
        time.sleep(0.1)
        assert watchdog_exits == []  # the grace has not run out
        for _ in range(200):
            if watchdog_exits:
                break
            time.sleep(0.05)
    # lost: ended after the first grace; begun: after the clean-up's grace
    assert watchdog_exits == [143]


def test_the_watchdog_ends_with_its_demo(watchdog_exits: list[int]) -> None:
    # an interrupt that was not lost ends the demo: its watchdog must not end the process
    # later (in a test run, or a program that called the demo, it would kill them)
    import time

    import sift.commands.demo as demo

    with pytest.raises(KeyboardInterrupt), demo.terminate_as_interrupt():
        _terminate_and_wait(swallow=False)
    time.sleep(1.5)  # past both graces
    assert watchdog_exits == []
