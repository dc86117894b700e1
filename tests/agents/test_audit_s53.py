"""Audit of the fifty-third session's two changes (tail watch evidence, JudgmentKeys).

Each test here shows a defect of the audited commits and fails on them; see the
audit report for the proposed fixes. The tail watch's new evidence was read against
Faust's code and held up (no test here); the JudgmentKeys container itself matched a
dict model under add/pop/_extend/copy/from_obj with small capacities and rebuilds
(no test here either): what breaks is around it.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
import scipy.sparse as sp

from sift.agents import journal as jr
from sift.agents.keys import JudgmentKeys, digest
from sift.agents.service import MAX_JUDGED_KEYS, InputMessage, Service, ServiceError
from tests.agents.offline import training_set

ROOT = Path(__file__).resolve().parents[2]


def _entry(keys: list[str]) -> Any:
    """What ``recovered_profiles`` gives for a learning profile: its keys as the worker
    holds them now, and a profile that learned them."""
    profile = SimpleNamespace(n_judged_=len(keys), to_state=lambda: {"model": "rocchio"})
    return SimpleNamespace(judged=JudgmentKeys(MAX_JUDGED_KEYS, keys), profile=profile)


def test_reliability_check_can_compare_judgment_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/reliability/faults.py ``check`` (test_crash, test_rebalance,
    test_broker_restart) compares ``set(entry.judged)`` with the judgment ids sent:
    ``JudgmentKeys`` is not iterable, so every fault-injection run now ends in a
    TypeError instead of its verdict (and iterating digests would never equal ids)."""
    from tests.reliability import faults

    keys = ["j-1-learn", "j-2-learn"]
    stream = faults.Stream(docs=[], doc_messages=[], specs=[], fixed=[], learn=["learn"],
                           judgments=[{"id": k, "profile": "learn"} for k in keys])
    expected = faults.Expected(decisions=set(), states={"learn": _entry(keys)})
    monkeypatch.setattr(faults, "decisions_of", lambda settings, profiles: [])
    monkeypatch.setattr(faults, "recovered_profiles",
                        lambda settings, service: {"learn": _entry(keys)})
    outcome = faults.check(None, stream, expected, time.monotonic())  # type: ignore[arg-type]
    assert outcome.n_judgments == 2


@pytest.mark.parametrize("path", ["benchmarks/rebalance.py", "benchmarks/memory_budget.py"])
def test_benchmarks_do_not_iterate_a_profile_s_judgment_keys(path: str) -> None:
    """benchmarks/rebalance.py (``set(entry.judged) == want``, its keys_equal verdict)
    and benchmarks/memory_budget.py (``py_bytes_strings(entry.judged)``) still treat a
    profile's keys as a dict of strings: both raise TypeError on JudgmentKeys."""
    source = (ROOT / path).read_text()
    iterated = re.findall(r"(?:set|list|py_bytes_strings|sorted)\(\s*entry\.judged\s*\)", source)
    assert iterated == [], f"{path} iterates JudgmentKeys: {iterated}"
    with pytest.raises(TypeError):
        set(JudgmentKeys(4, ["a"]))  # type: ignore[call-overload]  # what they would do


def _record_with_a_judgment() -> bytes:
    svc = Service(training_set(), n_shards=4)  # no journal: the record is written
    table: dict[str, bytes] = {}
    spec = InputMessage(orjson.dumps({"profile": "grain", "query": "wheat crop"}), "profiles",
                        svc.shard("grain"), 0)
    assert not svc.apply_specs([spec], table).dead_letters
    judgment = InputMessage(orjson.dumps({"profile": "grain", "id": "j-1", "doc_id": "d-1",
                                          "relevant": True, "text": "wheat exports"}),
                            "judgments", svc.shard("grain"), 0)
    assert not svc.apply_judgments([judgment], table).dead_letters
    entry = svc.entry("grain", table)
    assert entry is not None and "j-1" in entry.judged
    return table["grain"]


def _previous_version_reads_keys(raw: bytes) -> dict[str, None]:
    """How a worker of the previous version (8984c2a, decode_profile_record) reads a
    record's judgment keys: same RECORD_FORMAT check, then the ``judged`` list."""
    obj = orjson.loads(raw)
    if obj.get("format") != 1:
        raise ServiceError(f"profile record format {obj.get('format')!r} is not 1")
    return dict.fromkeys(str(k) for k in obj.get("judged", ()))


def test_a_record_written_now_is_not_misread_by_the_previous_version() -> None:
    """Rolling upgrade or rollback: the new record keeps RECORD_FORMAT 1 but has no
    ``judged``, so a worker of the previous version reads it as a profile that learned
    no judgment and learns every redelivered one again (and, rewriting the record, drops
    ``judged_digests`` for good). It must either refuse the record or see its keys."""
    raw = _record_with_a_judgment()
    try:
        keys = _previous_version_reads_keys(raw)
    except ServiceError:
        return  # refused: the previous version skips the profile, learning nothing twice
    assert "j-1" in keys, "the previous version reads the profile as having judged nothing"


def test_judged_keys_gives_record_and_journal_keys_in_one_form() -> None:
    """journal.judged_keys: the record's keys come back as ``#`` + digest and the
    journal's (after the record) as the keys themselves, so a tool can neither compare
    them with the ids sent nor tell a key given twice."""
    record = {"judged_digests": JudgmentKeys(10, ["a", "b"]).to_obj(),
              "journal": {"epoch": "e", "seq": 1}}
    batch = jr.encode_batch(2, sp.csr_matrix((1, 3)), [True], ["c"], True)
    journal = jr.encode_journal("p", "e", [batch])
    got = jr.judged_keys(record, journal)
    assert len(got) == 3
    forms = {k.startswith("#") and len(k) == 17 for k in got}
    assert len(forms) == 1, f"mixed forms: {got}"
    assert got[-1] in (f"#{digest('c'):016x}", "c")
