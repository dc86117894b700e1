"""Full training in sift.replay: feature selection, the shared-pool kNN, SCut thresholds, CLI flags."""

import math
from pathlib import Path

import numpy as np
import orjson
import pytest
import scipy.sparse as sp

from sift.cli import main
from sift.errors import ConfigError
from sift.filters.bank import ProfileBank
from sift.filters.profile import Profile
from sift.filters.vectorize import Vectorizer
from sift.replay import (
    BankFilterer,
    Corpus,
    FullTrainingConfig,
    ReplayConfig,
    build_bank,
    chi2_columns,
    full_training_filterer,
    full_training_labels,
    mask_columns,
    replay,
    scut_thresholds,
)
from sift.topics.records import Document, ProfileSpec

CATS = {"wheat": "wheat grain harvest bushels", "oil": "crude oil barrels opec", "gold": "gold ounce mine"}


def _corpus(n_train: int = 60, n_test: int = 30, seed: int = 0) -> Corpus:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(80)]

    def docs(n: int, start: int) -> list[Document]:
        out = []
        for i in range(n):
            cat = list(CATS)[i % 3]
            words = [*rng.choice(CATS[cat].split(), 3), *rng.choice(vocab, 8)]
            out.append(Document(f"d{start + i}", " ".join(words), topics=(cat,)))
        return out

    return Corpus(docs(n_train, 0), docs(n_test, 1000))


def test_chi2_columns_hand_computed() -> None:
    # 4 documents, columns 1, 3, 5 used; documents 0 and 1 relevant
    X = sp.csr_matrix(np.array([[0, 1, 0, 1, 0, 0, 0, 0],
                                [0, 1, 0, 1, 0, 0, 0, 0],
                                [0, 0, 0, 1, 0, 1, 0, 0],
                                [0, 0, 0, 1, 0, 0, 0, 0]], dtype=float))
    Y = np.array([[True], [True], [False], [False]])
    # column 1: A=2, B=0, C=0, D=2 -> 4 * 4^2 / 16 = 4; column 3 (in every document): 0;
    # column 5: A=0, B=1, C=2, D=1 -> 4 * 2^2 / (2 * 2 * 1 * 3) = 4/3
    assert chi2_columns(X, Y, 1).tolist() == [1]
    assert chi2_columns(X, Y, 2).tolist() == [1, 5]
    assert chi2_columns(X, Y, 10).tolist() == [1, 3, 5]  # fewer used columns than asked: all
    # maximum over the label columns: a second label that column 3 separates... none does,
    # but column 5 is perfect for document 2
    Y2 = np.array([[True, False], [True, False], [False, True], [False, False]])
    assert chi2_columns(X, Y2, 2).tolist() == [1, 5]
    with pytest.raises(ConfigError, match="select_features"):
        chi2_columns(X, Y, 0)


def test_mask_columns_renormalises() -> None:
    X = sp.csr_matrix(np.array([[0.6, 0.8, 0.0], [0.0, 1.0, 0.0]]))
    out = mask_columns(X, np.array([True, False, True]))
    assert out.toarray().tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    assert X.toarray()[0, 1] == 0.8  # input untouched


def _knn_bank(X: sp.csr_matrix, labels: list[int], k: int = 2, normalize: bool = False) -> ProfileBank:
    bank = ProfileBank()
    p = Profile("p", model="knn", model_params={"k": k, "normalize": normalize}, pseudolabel={},
                max_examples=None, update="never")
    p.fit(None, X, labels=labels)
    bank.add(p)
    return bank


def test_normalised_vote_hand_computed() -> None:
    pool = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]]))
    bank = _knn_bank(pool, [1, -1, 1])
    q = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0]]))
    # [1, 0]: neighbours row 0 (1.0, relevant) and row 2 (0.6, relevant): 1.6, normalised 1
    # [0, 1]: row 1 (1.0, non-relevant) and row 2 (0.8, relevant): 0.8, normalised 0.8 / 1.8
    raw = bank.score(q)[:, 0]
    norm = _knn_bank(pool, [1, -1, 1], normalize=True).score(q)[:, 0]
    assert np.allclose(raw, [1.6, 0.8])
    assert np.allclose(norm, [1.0, 0.8 / 1.8])


def test_full_training_filterer_sets_scut_thresholds() -> None:
    corpus = _corpus()
    specs = [ProfileSpec(c, query=c) for c in CATS]
    vec = Vectorizer(n_features=2**12).fit(d.text for d in corpus.train)
    X = vec.transform([d.text for d in corpus.train])
    Y = full_training_labels(corpus, specs)
    assert Y.sum(axis=0).tolist() == [20, 20, 20]
    full = FullTrainingConfig()
    for model in ("knn", "rocchio"):
        cfg = ReplayConfig(model=model, full_training=True, update="never", full=full)
        bank, _ = build_bank(corpus, specs, cfg, vec, X)
        f = full_training_filterer(bank, X, Y, full, model)
        assert isinstance(f, BankFilterer)
        if model == "knn":  # the normalised vote of the full-training setting
            assert all(p.model_.normalize for p in bank)  # type: ignore[attr-defined]
        loo = np.stack([p.model_.loo_scores() for p in bank], axis=1)
        assert np.array_equal(bank.thresholds(), scut_thresholds(loo, Y, full))
        assert np.all(np.isfinite(bank.thresholds()) | np.isinf(bank.thresholds()))


def test_scut_thresholds_guard_a_category_with_no_evidence() -> None:
    loo = np.array([[0.0, 0.9], [0.0, 0.8], [0.0, 0.1]])
    Y = np.array([[True, True], [False, True], [False, False]])
    thr = scut_thresholds(loo, Y, FullTrainingConfig())
    assert math.isinf(thr[0])  # the relevant document scores 0: nothing above min score 0
    assert thr[1] == 0.8


@pytest.mark.parametrize("model", ["knn", "rocchio"])
def test_replay_full_training_defaults_and_old_setting(model: str) -> None:
    corpus = _corpus()
    new = replay(corpus, ReplayConfig(model=model, full_training=True, update="never"))
    assert new.metrics["micro_f1"] > 0.9
    assert new.metrics["config"]["full"]["threshold"] == "scut"
    old = replay(corpus, ReplayConfig(model=model, full_training=True, update="never",
                                      full=FullTrainingConfig(threshold="trot", select_features=None,
                                                              knn_normalize=False)))
    assert old.metrics["micro_f1"] > 0.8


def test_adaptive_replay_ignores_the_full_training_options() -> None:
    corpus = _corpus()
    a = replay(corpus, ReplayConfig())
    b = replay(corpus, ReplayConfig(full=FullTrainingConfig(select_features=5, threshold="trot")))
    assert a.decisions == b.decisions


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"threshold": "rcut"}, "threshold"), ({"fbr": 1.5}, "fbr"), ({"fbr_fallback": "x"}, "fbr_fallback"),
     ({"placement": 1.0}, "placement"), ({"min_score": math.nan}, "min_score"),
     ({"select_features": -3}, "select_features")],
)
def test_full_training_config_errors_name_the_option(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        FullTrainingConfig(**kwargs)  # type: ignore[arg-type]


def _write(path: Path, docs: list[Document]) -> Path:
    path.write_bytes(b"".join(orjson.dumps({"id": d.id, "text": d.text, "topics": list(d.topics)}) + b"\n"
                              for d in docs))
    return path


def test_cli_full_training_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = _corpus()
    train = _write(tmp_path / "train.jsonl", corpus.train)
    test = _write(tmp_path / "test.jsonl", corpus.test)
    out = tmp_path / "o"
    base = ["replay", "--train", str(train), "--test", str(test), "--out", str(out), "--no-plot",
            "--full-training", "--model", "knn"]
    assert main([*base, "--threshold", "trot", "--select-features", "0", "--no-knn-normalize",
                 "--min-score", "none", "--param", "k=5"]) == 0
    m = orjson.loads((out / "metrics.json").read_bytes())
    full = m["config"]["full"]
    assert (full["threshold"], full["select_features"], full["knn_normalize"], full["min_score"]) == (
        "trot", None, False, None)
    assert m["config"]["model_params"]["k"] == 5
    # what ran, defaults included: full training keeps kNN's query out of the shared pool
    assert m["config"]["model_params_effective"] == {"k": 5, "vote": "positive",
                                                     "normalize": False, "query_weight": 0.0}
    assert main([*base, "--fbr", "0.5", "--placement", "0.5", "--fbr-fallback", "none"]) == 0
    m = orjson.loads((out / "metrics.json").read_bytes())
    assert (m["config"]["full"]["fbr"], m["config"]["full"]["placement"]) == (0.5, 0.5)
    assert "SCut on f1" in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad_n:  # refused as it is parsed (forty-eighth session)
        main([*base, "--select-features", "-2"])
    assert bad_n.value.code == 1 and "--select-features" in capsys.readouterr().err
    for bad in (["--fbr", "2"], ["--placement", "1"], ["--min-score", "inf"]):
        with pytest.raises(SystemExit) as exc:
            main([*base, *bad])
        assert exc.value.code == 1
