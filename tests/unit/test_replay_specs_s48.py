"""``sift replay --profiles``: an audit's findings (forty-eighth session). A spec naming
only its profile was refused although the help and the engine issue say the name becomes
the query; and a spec's bad parameter or unknown positive was an error without the file
and line it came from (the parameter errors did not name the profile either)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from sift.cli import main
from tests.unit.test_replay_cli import _docs, _write


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    return (_write(tmp_path / "train.jsonl", _docs(60, 0)),
            _write(tmp_path / "test.jsonl", _docs(30, 1000)))


def _run(files: tuple[Path, Path], tmp_path: Path, specs: list[dict], *extra: str) -> int:
    path = _write(tmp_path / "specs.jsonl", specs)
    return main(["replay", "--train", str(files[0]), "--test", str(files[1]), "--profiles",
                 str(path), "--out", str(tmp_path / "out"), "--no-plot", *extra])


def test_a_spec_with_only_a_name_gets_it_as_query_and_the_first_positives(
        files: tuple[Path, Path], tmp_path: Path) -> None:
    assert _run(files, tmp_path, [{"profile": "wheat"}, {"profile": "gold"}]) == 0
    metrics = orjson.loads((tmp_path / "out" / "metrics.json").read_bytes())
    rows = metrics["per_profile"]
    assert set(rows) == {"wheat", "gold"}
    # the same as the replay's own profiles for those categories
    assert main(["replay", "--train", str(files[0]), "--test", str(files[1]),
                 "--out", str(tmp_path / "all"), "--no-plot"]) == 0
    every = orjson.loads((tmp_path / "all" / "metrics.json").read_bytes())["per_profile"]
    assert {p: rows[p] for p in rows} == {p: every[p] for p in rows}


def test_a_name_that_gives_no_query_is_still_refused(files: tuple[Path, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(files, tmp_path, [{"profile": "--"}]) == 1
    err = capsys.readouterr().err
    assert "specs.jsonl:1:" in err and "neither a query nor positives" in err


@pytest.mark.parametrize(("spec", "model", "said"), [
    ({"profile": "gold", "query": "gold", "params": {"alpha": "x"}}, "rocchio", "alpha must be"),
    ({"profile": "gold", "query": "gold", "params": {"nosuch": 1}}, "rocchio", "unknown 'nosuch'"),
    ({"profile": "gold", "query": "gold", "params": {"k": 0}}, "knn", "k must be"),
    ({"profile": "gold", "positives": ["nosuch"]}, "rocchio", "'nosuch' is not a training"),
])
def test_a_bad_spec_names_its_file_line_and_profile(
        files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        spec: dict, model: str, said: str) -> None:
    good = {"profile": "wheat", "query": "wheat"}
    assert _run(files, tmp_path, [good, spec], "--model", model) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "specs.jsonl:2: profile 'gold'" in err and said in err


def test_an_option_of_the_run_is_not_put_on_a_profile(files: tuple[Path, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A bad ``--param`` is the run's, not the first spec's: no file, line or profile."""
    assert _run(files, tmp_path, [{"profile": "wheat"}], "--param", "alpha=-1") == 1
    err = capsys.readouterr().err
    assert "alpha" in err and "specs.jsonl" not in err and "profile 'wheat'" not in err


def test_bad_json_names_one_line(files: tuple[Path, Path], tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """orjson's position came as a second "line" (2, counting the line's own newline)
    beside the file's line number."""
    bad = _write(tmp_path / "bad.jsonl", [*_docs(4, 5000), b'{"id": "x", "text": "abc"\n'])
    assert main(["replay", "--train", str(files[0]), "--test", str(bad),
                 "--out", str(tmp_path / "o"), "--no-plot"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.endswith("bad.jsonl:5: not valid JSON: unexpected end of data at character 26")


@pytest.mark.parametrize("value", [1, 0, 1.0, "yes", None, [True]])
def test_a_judgments_relevant_is_true_or_false_only(value: object) -> None:
    """The wire contract's ``relevant`` is a bool: the integers 0 and 1 were taken as one
    (while 1.0 and "yes" were refused), a wrong type the worker learned from."""
    from sift.topics.errors import RecordError
    from sift.topics.records import Judgment

    obj = {"doc_id": "d1", "profile": "wheat", "relevant": value}
    with pytest.raises(RecordError, match="'relevant' must be true or false") as err:
        Judgment.from_obj(obj)
    assert err.value.reason == "bad_relevant"
    assert Judgment.from_obj({**obj, "relevant": False}).relevant is False
