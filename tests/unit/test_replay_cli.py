"""`sift replay` end to end on small files: outputs, and one-line errors for bad input."""

import gzip
from pathlib import Path

import orjson
import pytest

from sift.cli import main
from sift.errors import ConfigError
from sift.replay import Corpus, ReplayConfig, evaluate, load_corpus, read_specs, replay
from sift.topics.records import Document

WORDS = {
    "wheat": "wheat grain harvest bushels export tonnes",
    "oil": "crude oil barrels opec refinery prices",
    "gold": "gold ounce mine bullion metal",
}


def _docs(n: int, start: int) -> list[dict]:
    out = []
    cats = list(WORDS)
    for i in range(n):
        cat = cats[i % 3]
        filler = " ".join(f"w{(i * 7 + k) % 50}" for k in range(6))
        out.append({"id": f"d{start + i}", "text": f"{WORDS[cat]} {filler}", "topics": [cat]})
    return out


def _write(path: Path, rows: list, gz: bool = False) -> Path:
    data = b"".join(orjson.dumps(r) + b"\n" if not isinstance(r, bytes) else r for r in rows)
    if gz:
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    return (_write(tmp_path / "train.jsonl.gz", _docs(60, 0), gz=True),
            _write(tmp_path / "test.jsonl", _docs(30, 1000)))


def test_replay_writes_decisions_and_metrics(files: tuple[Path, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    train, test = files
    out = tmp_path / "out"
    assert main(["replay", "--train", str(train), "--test", str(test), "--out", str(out), "--no-plot"]) == 0
    m = orjson.loads((out / "metrics.json").read_bytes())
    for key in ("macro_t11su", "macro_t11f", "micro_precision", "micro_recall"):
        assert 0.0 <= m[key] <= 1.0
    assert set(m["per_profile"]) == set(WORDS)
    row = m["per_profile"]["wheat"]
    assert row["R+"] + row["R-"] == 10
    decisions = [orjson.loads(line) for line in (out / "decisions.jsonl").read_bytes().splitlines()]
    assert decisions and all(d["score"] >= d["threshold"] for d in decisions)
    assert {"doc_id", "profile", "score", "threshold", "model_version"} <= set(decisions[0])
    # the separable toy stream: nothing wrong delivered, well above delivering nothing (1/3).
    # (With a third of the corpus in each category, the random unlabelled documents that
    # pseudolabeling calls non-relevant are a third wrong, so the thresholds are cautious.)
    assert m["micro_precision"] >= 0.9
    assert m["macro_t11su"] > 0.55
    assert "macro_t11su" in capsys.readouterr().out


def test_full_training_adds_f1(files: tuple[Path, Path], tmp_path: Path) -> None:
    train, test = files
    out = tmp_path / "full"
    assert main(["replay", "--train", str(train), "--test", str(test), "--out", str(out), "--no-plot",
                 "--full-training", "--model", "knn"]) == 0
    m = orjson.loads((out / "metrics.json").read_bytes())
    assert m["micro_f1"] > 0.9 and "macro_f1" in m


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"{not json\n", "not valid JSON"),
        (b'{"id": "x", "title": "", "text": "  "}\n', "has no text"),
        (b'{"id": 5, "text": ["a"]}\n', "must be a string"),
        (b'["a list"]\n', "must be a JSON object"),
        (b'{"id": "\xff\xfe", "text": "a"}\n', "not UTF-8"),
    ],
)
def test_bad_line_is_one_line_error_with_file_and_line(files: tuple[Path, Path], tmp_path: Path, line: bytes,
                                                        message: str, capsys: pytest.CaptureFixture[str]) -> None:
    train, _ = files
    bad = _write(tmp_path / "bad.jsonl", [*_docs(2, 5000), line])
    rc = main(["replay", "--train", str(train), "--test", str(bad), "--out", str(tmp_path / "o"), "--no-plot"])
    err = capsys.readouterr().err.strip()
    assert rc == 1
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"{bad}:3:" in err and message in err


def test_skip_bad_counts_lines(files: tuple[Path, Path], tmp_path: Path) -> None:
    train, _ = files
    bad = _write(tmp_path / "bad.jsonl", [*_docs(9, 5000), b"oops\n", b'{"id": "y"}\n'])
    out = tmp_path / "o"
    assert main(["replay", "--train", str(train), "--test", str(bad), "--out", str(out), "--no-plot",
                 "--skip-bad"]) == 0
    m = orjson.loads((out / "metrics.json").read_bytes())
    assert m["skipped_lines"] == {"test": 2}


def test_truncate_reaches_the_vectorizer(files: tuple[Path, Path], tmp_path: Path) -> None:
    """``--truncate N`` cuts the tokens of the training set, the queries and the stream
    (recorded in the metrics' config); a cut that merges every word of the toy corpus
    into one column changes what is delivered."""
    train, test = files
    runs = {}
    for cut in (None, 1):
        out = tmp_path / f"t{cut}"
        extra = [] if cut is None else ["--truncate", str(cut)]
        assert main(["replay", "--train", str(train), "--test", str(test), "--out", str(out),
                     "--no-plot", *extra]) == 0
        runs[cut] = orjson.loads((out / "metrics.json").read_bytes())
    assert runs[None]["config"]["vectorizer"] == {}
    assert runs[1]["config"]["vectorizer"] == {"truncate": 1}
    assert runs[1]["per_profile"] != runs[None]["per_profile"]
    with pytest.raises(SystemExit) as exc:
        main(["replay", "--truncate", "0"])
    assert exc.value.code == 1


def test_chars_reach_the_vectorizer(files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                    ) -> None:
    """``--chars C`` adds the character n-gram block (recorded in the metrics' config);
    a share outside [0, 1) is a one-line error."""
    train, test = files
    out = tmp_path / "c"
    assert main(["replay", "--train", str(train), "--test", str(test), "--out", str(out), "--no-plot",
                 "--chars", "0.4", "--truncate", "5"]) == 0
    assert orjson.loads((out / "metrics.json").read_bytes())["config"]["vectorizer"] == {"truncate": 5, "chars": 0.4}
    for bad in ("1", "-0.5", "x"):
        with pytest.raises(SystemExit) as exc:
            main(["replay", "--chars", bad])
        assert exc.value.code != 0
        assert "--chars" in capsys.readouterr().err


@pytest.mark.parametrize(("option", "value", "given", "effective"), [
    ("--negative-mass", None, "auto", 3.0), ("--negative-mass", "none", None, None),
    ("--negative-mass", "1.5", 1.5, 1.5),
    ("--size-cut", None, "auto", 0.3), ("--size-cut", "none", None, None), ("--size-cut", "0.5", 0.5, 0.5),
])
def test_profile_options_reach_the_profiles(files: tuple[Path, Path], tmp_path: Path, option: str,
                                            value: str | None, given: object, effective: float | None) -> None:
    """``--negative-mass`` (default auto: 3 for Rocchio) and ``--size-cut`` (auto: 0.3 for
    Rocchio) are the profiles' parameters, recorded in the metrics' config as given and as
    resolved."""
    train, test = files
    out = tmp_path / "opt"
    extra = [] if value is None else [option, value]
    assert main(["replay", "--train", str(train), "--test", str(test), "--out", str(out), "--no-plot", *extra]) == 0
    config = orjson.loads((out / "metrics.json").read_bytes())["config"]
    key = option[2:].replace("-", "_")
    assert config[f"{key}_effective"] == effective
    assert config["profile_params"][key] == given


@pytest.mark.parametrize(("option", "bad"), [
    *(("--negative-mass", b) for b in ("0", "-1", "inf", "nan", "many")),
    *(("--size-cut", b) for b in ("0", "-0.1", "1.5", "nan", "some")),
])
def test_bad_profile_option_is_a_one_line_error(option: str, bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["replay", option, bad])
    assert exc.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert option in err[-1] and "Traceback" not in "".join(err)


def test_missing_file_and_bad_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--train", str(tmp_path / "none.jsonl"), "--out", str(tmp_path)]) == 1
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["replay", "--update", "sometimes"])
    assert exc.value.code == 1


def test_run_from_elsewhere_finds_the_checkouts_bundled_data(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --train/--test the bundled files are found from any working directory (they
    were looked up relative to it); a path the user gives is never replaced."""
    import sift.commands.replay as replay_cmd

    checkout = tmp_path / "checkout"
    data = checkout / "data" / "reuters21578"
    data.mkdir(parents=True)
    _write(data / "train.jsonl.gz", _docs(60, 0), gz=True)
    _write(data / "test.jsonl.gz", _docs(30, 1000), gz=True)
    monkeypatch.setattr(replay_cmd, "REPO_ROOT", checkout)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["replay", "--out", "out", "--no-plot"]) == 0
    assert orjson.loads((elsewhere / "out" / "metrics.json").read_bytes())["profiles"]
    capsys.readouterr()
    assert main(["replay", "--test", "test.jsonl.gz", "--out", "out", "--no-plot"]) == 1
    assert "test.jsonl.gz: no such file" in capsys.readouterr().err


def test_batched_protocol_equals_one_document_at_a_time(files: tuple[Path, Path]) -> None:
    corpus = load_corpus(*files)
    a = replay(corpus, ReplayConfig(batch_size=256))
    b = replay(corpus, ReplayConfig(batch_size=1))
    assert a.decisions == b.decisions


def test_evaluate_counts_contingency() -> None:
    from sift.filters.bank import Hit

    test = [Document("a", "x", topics=("p",)), Document("b", "x", topics=()), Document("c", "x", topics=("p",))]
    hits = [Hit(0, "p", 1.0, 0.5, 1), Hit(1, "p", 0.9, 0.5, 1)]
    m = evaluate(hits, test, ["p"])
    row = m["per_profile"]["p"]
    assert (row["R+"], row["N+"], row["R-"]) == (1, 1, 1)
    # T11U = 2 - 1 = 1; MaxU = 4; SU = (0.25 + 0.5) / 1.5
    assert row["t11su"] == pytest.approx(0.5)
    assert isinstance(Corpus([], []), Corpus)


@pytest.mark.parametrize("name", ["docs.jsonl", "docs.jsonl.gz"])
def test_write_jsonl_round_trips_through_read_jsonl(tmp_path: Path, name: str) -> None:
    from sift.topics.codecs import read_jsonl, write_jsonl

    docs = [Document("a", "wheat exports", title="Wheat"), Document("b", "oil prices")]
    assert write_jsonl(tmp_path / name, docs) == 2
    assert list(read_jsonl(tmp_path / name, Document.from_obj)) == docs


def test_profiles_file_positives_unknown_id_is_a_one_line_error(
        files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A listed positive that is no training document id and no text used to be dropped
    without a word (the profile then trained on fewer positives than listed)."""
    train, test = files
    specs = _write(tmp_path / "profiles.jsonl", [{"profile": "wheat", "positives": ["d0", "d9999"]}])
    code = main(["replay", "--train", str(train), "--test", str(test), "--profiles", str(specs),
                 "--out", str(tmp_path / "out"), "--no-plot"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1 and "'wheat'" in err[0] and "'d9999'" in err[0] and "training document" in err[0]
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_profiles_file_text_positive_trains_the_profile(files: tuple[Path, Path], tmp_path: Path) -> None:
    """A text positive is the profile's initial positive (a spec without positives gets
    the first training positives of its category, as by default) and finds the category."""
    train, test = files
    corpus = load_corpus(train, test)
    text = "gold ounce mine bullion metal"
    specs_file = _write(tmp_path / "p.jsonl", [{"profile": "gold", "query": "metal", "positives": [text]},
                                               {"profile": "oil", "query": "metal"}])
    res = replay(corpus, ReplayConfig(update="never"), read_specs(specs_file))
    rows = res.metrics["per_profile"]
    assert rows["gold"]["initial_positives"] == 1 and rows["oil"]["initial_positives"] == 3
    assert rows["gold"]["R+"] > 0
    with pytest.raises(ConfigError, match="full training"):
        replay(corpus, ReplayConfig(full_training=True), read_specs(specs_file))


def test_a_profile_without_relevant_stream_documents_is_pointed_out(
        files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T11SU and T11F are not defined without relevant documents (T11SU then counts
    0.333 whatever the profile delivered): the table says which profiles these are."""
    train, test = files
    specs = _write(tmp_path / "p.jsonl", [{"profile": "silver", "query": "gold metal"},
                                          {"profile": "gold", "query": "gold"}])
    assert main(["replay", "--train", str(train), "--test", str(test), "--profiles", str(specs),
                 "--out", str(tmp_path / "out"), "--no-plot"]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "1 profile(s)" in notes[0] and notes[0].endswith(": silver")


# -- inputs found to end in a traceback or a silent drop (thirty-seventh session) ------------
def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    return code, err


def test_a_corrupt_gzip_file_is_a_one_line_error(files: tuple[Path, Path], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    train, test = files
    raw = bytearray(train.read_bytes())
    for i in range(200, min(260, len(raw) - 8)):  # inside the deflate stream
        raw[i] ^= 0x55
    bad = tmp_path / "corrupt.jsonl.gz"
    bad.write_bytes(bytes(raw))
    for argv in (["replay", "--train", str(bad), "--test", str(test), "--no-plot",
                  "--out", str(tmp_path / "o")],
                 ["screen", "--data", str(bad), "--out", str(tmp_path / "o2")]):
        code, err = _run(argv, capsys)
        assert code == 1 and "cannot read" in err and str(bad) in err, argv
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(("argv", "expect"), [
    (["replay", "--seed", "99999999999999999999999"],
     "argument --seed: 99999999999999999999999 is out of range (see sift replay --help)"),
    (["replay", "--update", "99999999999999999999999"], "argument --update: 99999999999999999999999 is out of range"),
    (["nominate", "--simulate", "rdpg", "--k", "99999999999999999999999", "--out", "unused"], "argument --k: 999"),
    (["profiles", "add", "x\udcff", "--query", "q", "--wait", "1"], "argument name: 'x\\udcff' is not valid UTF-8"),
])
def test_arguments_json_cannot_hold_are_refused_up_front(argv: list[str], expect: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A usage error like the others (exit 1, since the forty-eighth session; 2 before),
    the option named as given, undecodable bytes escaped once."""
    code, err = _run(argv, capsys)
    assert code == 1 and expect in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("line", "reason"), [
    ({"id": "x1", "text": "wheat", "topics": [""]}, "non-empty strings"),
    ({"id": "x1", "text": 5, "topics": ["wheat"]}, "field 'text' must be a string, got int"),
    ({"id": "x1", "text": "wheat", "title": 7}, "field 'title' must be a string, got int"),
])
def test_wrong_types_name_the_file_and_line_or_are_skipped(
        files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        line: dict, reason: str) -> None:
    train, _ = files
    test = _write(tmp_path / "bad.jsonl", [*_docs(3, 2000), line, *_docs(3, 3000)])
    base = ["replay", "--train", str(train), "--test", str(test), "--no-plot"]
    code, err = _run([*base, "--out", str(tmp_path / "o1")], capsys)
    assert code == 1 and f"{test}:4:" in err and reason in err
    assert main([*base, "--out", str(tmp_path / "o2"), "--skip-bad"]) == 0
    assert orjson.loads((tmp_path / "o2" / "metrics.json").read_bytes())["skipped_lines"]["test"] == 1


@pytest.mark.parametrize(("specs", "expect"), [
    ([{"profile": "wheat", "query": "wheat"}, {"profile": "oil", "query": "oil"},
      {"profile": "wheat", "query": "corn"}], ":3: profile 'wheat' is named twice"),
    ([{"profile": "wheat", "query": "wheat", "model": "knn"}], ":1: field 'model' of profile 'wheat'"),
    ([{"profile": "wheat", "query": "wheat", "delete": True}], ":1: field 'delete' of profile 'wheat'"),
])
def test_a_profiles_file_the_replay_cannot_honour_is_an_error(
        files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        specs: list[dict], expect: str) -> None:
    train, test = files
    path = _write(tmp_path / "profiles.jsonl", specs)
    code, err = _run(["replay", "--train", str(train), "--test", str(test), "--no-plot",
                      "--profiles", str(path), "--out", str(tmp_path / "o")], capsys)
    assert code == 1 and f"{path}{expect}" in err and len(err.strip().splitlines()) == 1


def test_a_document_id_twice_in_a_file_names_its_line(files: tuple[Path, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    train, _ = files
    docs = _docs(6, 4000)
    test = _write(tmp_path / "dup.jsonl", [*docs[:4], {**docs[5], "id": docs[1]["id"]}])
    base = ["replay", "--train", str(train), "--test", str(test), "--no-plot"]
    code, err = _run([*base, "--out", str(tmp_path / "o1")], capsys)
    assert code == 1 and f"{test}:5: document id 'd4001' came before" in err
    assert main([*base, "--out", str(tmp_path / "o2"), "--skip-bad"]) == 0
    assert orjson.loads((tmp_path / "o2" / "metrics.json").read_bytes())["skipped_lines"]["test"] == 1


@pytest.mark.parametrize("command", [["replay"], ["screen", "--data", "x.jsonl", "--out", "o"],
                                     ["nominate", "--simulate", "rdpg", "--out", "o"]])
def test_a_negative_seed_is_named_before_any_work(command: list[str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([*command, "--seed", "-1"])
    err = capsys.readouterr().err
    assert "--seed" in err and "must be an integer >= 0, got -1" in err


@pytest.mark.parametrize(("argv", "expect"), [
    (["tail", "decisions", "--max", "-1"], "argument --max: must be a positive integer, got -1"),
    (["tail", "decisions", "--timeout", "nan"], "argument --timeout: must be a finite number of seconds"),
    (["produce", "x.jsonl", "--limit", "0"], "argument --limit: must be a positive integer, got 0"),
])
def test_stream_commands_refuse_limits_that_mean_nothing(argv: list[str], expect: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(argv)
    assert expect in capsys.readouterr().err
