"""Upgrade compatibility, fiftieth session: profile records that older workers wrote to
the table's changelog, read by this one as a restarted worker reads them.

The fixtures in ``tests/fixtures/old_records/`` were made by the old commits' own code
(``make_fixture.py`` there, run with the old commit on ``PYTHONPATH``): the table values,
the old code's scores and thresholds of probe documents, and a next batch of judgments
with what a restarted old worker made of it. A record must be read as what it was: the
same scores and thresholds, and the same threshold after the next judgments (docs/
reliability.md item 82; /tmp/s50/compat.md). The ``test_u<n>`` tests failed before
their fix.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from sift.agents.service import (
    InputMessage,
    Service,
    TrainingSet,
    decode_profile_record,
    default_corpus,
    encode_profile_record,
)
from sift.filters.profile import Profile
from sift.filters.vectorize import Vectorizer
from sift.topics.codecs import read_jsonl
from sift.topics.records import Document

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "old_records"


@cache
def _corpus() -> list[tuple[str, str]]:
    return [(d.id, d.text) for d in read_jsonl(default_corpus(), Document.from_obj)][:200]


def load(name: str) -> dict[str, Any]:
    fx: dict[str, Any] = orjson.loads((FIXTURES / name).read_bytes())
    texts = {i: t[:fx["cut"]] for i, t in _corpus()}
    ids = list(texts)[:fx["n_train"]]
    vec = Vectorizer(n_features=fx["n_features"]).fit(texts[i] for i in ids)
    fx["training"] = TrainingSet(vec, vec.transform([texts[i] for i in ids]),
                                 {i: k for k, i in enumerate(ids)})
    fx["X"] = vec.transform([texts[i] for i in fx["probe"]])
    # the records as the old worker wrote them (stored as JSON: the same bytes)
    fx["raw"] = {k: orjson.dumps(v) for k, v in fx["table"].items()}
    return fx


def restarted(fx: dict[str, Any]) -> tuple[Service, dict[str, bytes]]:
    table = dict(fx["raw"])
    return Service(fx["training"], n_shards=fx["n_shards"], journal={}), table


def assert_as_old(svc: Service, table: dict[str, bytes], fx: dict[str, Any],
                  want: dict[str, Any]) -> None:
    for name, old in want.items():
        entry = svc.entry(name, table)
        assert entry is not None, name
        p = entry.profile
        np.testing.assert_allclose(p.score(fx["X"]), old["scores"], rtol=0, atol=1e-12,
                                   err_msg=name)
        thr = None if math.isinf(p.threshold_) else p.threshold_
        assert thr == pytest.approx(old["threshold"], abs=1e-12), name
        assert p.n_judged_ == old["n_judged"], name


def next_batch(svc: Service, table: dict[str, bytes], fx: dict[str, Any]) -> None:
    out = svc.apply_judgments([InputMessage(orjson.dumps(j), "judgments",
                                            svc.shard(j["profile"]), 1000 + k)
                               for k, j in enumerate(fx["next_judgments"])], table)
    assert not out.dead_letters


def test_u1_kantor_records_from_before_query_weight_score_as_written() -> None:
    """Kantor's ``query_weight`` (the query's weight against the positives) came with a
    default of 1.5 on 1 December (0e6ef01); before it the formula was the design's, 1.
    The parameter is only in a record when its spec set it, so an older Kantor profile
    was scored with 1.5 against the threshold fitted with 1: scores moved by up to 0.03
    here, decisions with them, silently."""
    fx = load("kantor_5255d20.json")
    svc, table = restarted(fx)
    assert_as_old(svc, table, fx, fx["loaded"])
    assert not svc.stats["bad_state"]
    next_batch(svc, table, fx)
    assert_as_old(svc, table, fx, fx["after_next"])


def test_u1_a_fusion_profiles_kantor_component_scores_as_written() -> None:
    """The same for the Kantor inside a fusion profile (its weights all on Kantor here):
    scores moved by up to 0.2. Only the loaded profile is compared: the next judgments
    re-solve the weights with today's solver (item 82: journal and learning follow the
    code that runs)."""
    fx = load("fusion_89f6d80.json")
    svc, table = restarted(fx)
    assert_as_old(svc, table, fx, fx["loaded"])


def test_u2_an_update_n_record_from_before_exploration_learns_as_written() -> None:
    """Records written before 1 December 01:10 (e53ad73) have no ``trot_pseudo_positives``
    and no ``explore``: TROT then counted the pseudo-positives and nothing explored; no
    ``silent_explore`` (b92c9d2) either. Read with today's defaults, the judgments after
    the upgrade re-thresholded the profile under other rules (the audit's larger run:
    an ``update`` = 3 Rocchio profile went to 0.304 where the old worker kept 0.233). This
    small record holds judgments pending under ``update`` = 3; loaded and after the next
    batch it is what the old worker had. It is too small to tell the old rules from
    today's (it passes without the fix too): the next test checks the parameters
    themselves."""
    fx = load("held_89f6d80.json")
    svc, table = restarted(fx)
    assert_as_old(svc, table, fx, fx["loaded"])
    next_batch(svc, table, fx)
    assert_as_old(svc, table, fx, fx["after_next"])


def test_u2_the_legacy_behaviour_is_written_out_explicitly() -> None:
    """A record rewritten by this worker carries the legacy parameters themselves, so it
    reads the same whatever the markers of age (and the defaults) become."""
    fx = load("held_89f6d80.json")
    entry = decode_profile_record(fx["raw"]["rocp"], fx["training"].vectorizer.feature_weights())
    params = entry.profile.to_state()["params"]
    assert (params["trot_pseudo_positives"], params["explore"], params["silent_explore"]) == \
        (True, 0.0, False)
    again = decode_profile_record(encode_profile_record(entry),
                                  fx["training"].vectorizer.feature_weights())
    np.testing.assert_array_equal(again.profile.score(fx["X"]), entry.profile.score(fx["X"]))
    kan = load("kantor_5255d20.json")
    state = decode_profile_record(kan["raw"]["kan"],
                                  kan["training"].vectorizer.feature_weights()).profile.to_state()
    assert state["params"]["model_params"] == {"query_weight": 1.0}
    fus = load("fusion_89f6d80.json")
    state = decode_profile_record(fus["raw"]["fus"],
                                  fus["training"].vectorizer.feature_weights()).profile.to_state()
    assert state["params"]["model_params"] == {"kantor": {"query_weight": 1.0}}


@pytest.mark.parametrize("model", ["kantor", "fusion", "rocchio"])
def test_checked_todays_records_keep_todays_defaults(model: str) -> None:
    """The legacy defaults apply to records without the markers only: a profile made now
    round-trips with today's parameters (Kantor's 1.5, pseudo-positives out of TROT)."""
    fx = load("kantor_5255d20.json")
    X = fx["training"].X
    vec = fx["training"].vectorizer
    weights = vec.feature_weights()
    p = Profile("p", query="crude oil prices", model=model)
    p.fit(vec.transform(["crude oil prices"]), X, feature_weights=weights)
    q = Profile.from_state(orjson.loads(orjson.dumps(p.to_state())), weights)
    assert q.get_params() == p.get_params()
    np.testing.assert_array_equal(q.score(fx["X"]), p.score(fx["X"]))
    if model == "kantor":
        assert q.model_.query_weight == 1.5


def test_checked_a_spec_setting_query_weight_in_an_old_record_keeps_it() -> None:
    """An old record whose spec set Kantor's ``query_weight`` (possible from 0e6ef01 on,
    before the record's marker) keeps the value it set."""
    fx = load("kantor_5255d20.json")
    rec = orjson.loads(fx["raw"]["kan"])
    rec["state"]["params"]["model_params"] = {"query_weight": 2.0}
    entry = decode_profile_record(orjson.dumps(rec), fx["training"].vectorizer.feature_weights())
    assert entry.profile.model_.query_weight == 2.0
