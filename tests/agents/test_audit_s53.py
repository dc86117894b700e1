"""Audit of the fifty-third session's two changes (tail watch evidence, JudgmentKeys).

Each test here showed a defect of the audited commits (failing on them), fixed since.
Not taken up: the audit's wish that a worker of the previous version refuse a record
written now (it reads no judgment keys there, docs/reliability.md item 88); refusing
would stop it scoring the profile at all during a rolling upgrade. The tail watch's new evidence was read against
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

import pytest
import scipy.sparse as sp

from sift.agents import journal as jr
from sift.agents.keys import JudgmentKeys, key_digests
from sift.agents.service import MAX_JUDGED_KEYS

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


def test_judged_keys_gives_record_and_journal_keys_in_one_form() -> None:
    """journal.judged_keys gave the record's keys as ``#`` + digest and the journal's
    (after the record) as the keys themselves, so a tool could neither compare them with
    the ids sent nor tell a key given twice: now the digests of both, each once."""
    record = {"judged_digests": JudgmentKeys(10, ["a", "b"]).to_obj(),
              "journal": {"epoch": "e", "seq": 1}}
    batch = jr.encode_batch(2, sp.csr_matrix((2, 3)), [True, True], ["c", "a"], True)
    journal = jr.encode_journal("p", "e", [batch])
    assert jr.judged_keys(record, journal) == key_digests(["a", "b", "c"])
    # a record from before the digests lists its keys: the same answer
    old = {"judged": ["a", "b"], "journal": {"epoch": "e", "seq": 1}}
    assert jr.judged_keys(old, journal) == key_digests(["a", "b", "c"])
