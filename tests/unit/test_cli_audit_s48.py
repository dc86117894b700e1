"""The command line as a demanding user meets it: a helper's audit (forty-eighth
session). Each of these went on to the broker, or through a whole run, before it said
what was wrong; the broker here is a closed port, so reaching it would be another error."""

from __future__ import annotations

from pathlib import Path

import pytest

from sift.cli import main

CLOSED = "kafka://127.0.0.1:1"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "cannot connect" not in err, err  # refused before connecting
    return code, err


@pytest.fixture(autouse=True)
def closed_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIFT_BROKER", CLOSED)


def test_demo_checks_its_out_file_before_the_run(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "afile").write_text("")
    code, err = _run(["demo", "--out", str(tmp_path)], capsys)
    assert code == 1 and "is a folder, not a file" in err
    code, err = _run(["demo", "--out", str(tmp_path / "afile" / "x.json")], capsys)
    assert code == 1 and "is not a folder" in err


@pytest.mark.parametrize("raw", [[], ["--raw"]])
def test_produce_refuses_an_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       raw: list[str]) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    code, err = _run(["produce", str(empty), *raw], capsys)
    assert code == 1 and err.endswith(f"{empty}: no records (every line is blank)")


def test_review_load_names_a_folder_and_an_empty_file(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["review", "load", "r", str(tmp_path)], capsys)
    assert code == 1 and "is a directory, not a JSONL file" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, err = _run(["review", "load", "r", str(empty)], capsys)
    assert code == 1 and "no records" in err


@pytest.mark.parametrize(("argv", "said"), [
    (["profiles", "add", "wheat", "--query", "w", "--param", "bogus=1"],
     "profile 'wheat': model_params for 'rocchio': unknown 'bogus'"),
    (["profiles", "add", "wheat", "--query", "w", "--model", "knn", "--param", "k=-5"],
     "profile 'wheat': k must be a positive integer, got -5"),
    (["profiles", "add", "wheat", "--query", "w", "--bags", "3", "--param", "alpha=-1"],
     "profile 'wheat': alpha must be"),
    (["review", "start", "r", "--query", "q", "--param", "target_recall=2"],
     "review 'r': target_recall must be in (0, 1], got 2"),
])
def test_a_spec_parameter_the_worker_would_refuse_is_refused_before_sending(
        argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(argv, capsys)
    assert code == 1 and said in err


@pytest.mark.parametrize(("argv", "said"), [
    (["demo", "--review", "Donners_2021", "--chunk", "5"], "--chunk is for the Reuters run, not --review"),
    (["demo", "--review", "Donners_2021", "--no-compare"], "--no-compare is for the Reuters run"),
    (["demo", "--target-recall", "0.9"], "--target-recall is for --review"),
    (["nominate", "--simulate", "rdpg", "--positives", "3", "--out", "o"],
     "--positives is for --data, not --simulate rdpg"),
    (["nominate", "--simulate", "rdpg", "--objective", "mrr", "--out", "o"], "--objective is for --data"),
    (["nominate", "--data", "d.jsonl", "--category", "c", "--runs", "5", "--out", "o"],
     "--runs is for --simulate rdpg, not --data"),
])
def test_options_the_mode_would_ignore_are_refused(argv: list[str], said: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, err = _run(argv, capsys)
    assert code == 1 and said in err


@pytest.mark.parametrize(("argv", "said"), [
    (["screen", "--data", "x.jsonl", "--out", "o", "--negatives", "-5"],
     "argument --negatives: must be an integer >= 0, got -5"),
    (["screen", "--data", "x.jsonl", "--out", "o", "--exponent", "nan"],
     "argument --exponent: must be a finite number >= 0"),
    (["replay", "--select-features", "-5"], "argument --select-features: must be an integer >= 0"),
])
def test_option_values_are_checked_when_parsed(argv: list[str], said: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """They were checked by the library after the whole input was read, and named as
    its fields (``n_negatives``)."""
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert done.value.code == 1 and said in err and len(err.splitlines()) == 1


def test_nominate_names_an_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, err = _run(["nominate", "--data", str(empty), "--category", "c",
                      "--out", str(tmp_path / "o")], capsys)
    assert code == 1 and f"{empty}: 0 documents" in err


@pytest.mark.parametrize(("argv", "env", "said"), [
    (["web", "--port", "0"], {}, "--port must be a port in [1, 65535], got 0"),
    (["worker", "--partitions", "0"], {}, "--partitions must be in [1, 10000], got 0"),
    (["tail", "decisions", "--broker", "kafka://127.0.0.1:99999"], {}, "--broker port '99999'"),
    (["worker"], {"SIFT_PARTITIONS": "0"}, "SIFT_PARTITIONS must be in [1, 10000], got 0"),
])
def test_a_bad_value_is_named_where_it_came_from(argv: list[str], env: dict[str, str], said: str,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """An option's bad value was reported under the variable's name (SIFT_WEB_PORT for
    ``--port``), a setting the user never used; a variable's still is."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code, err = _run(argv, capsys)
    assert code == 1 and said in err


def test_a_data_dir_option_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    code, err = _run(["worker", "--data-dir", str(afile)], capsys)
    assert code == 1 and f"--data-dir {str(afile)!r} is not a writable directory" in err
