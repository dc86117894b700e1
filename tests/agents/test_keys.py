"""JudgmentKeys: a profile's judgment keys as digests, against the dict it replaced."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sift.agents.keys as keys_module
from sift.agents.keys import JudgmentKeys, digest, key_digests
from sift.filters.errors import StateError


class DictModel:
    """What a profile did before: a dict of keys, the oldest forgotten first."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.d: dict[str, None] = {}

    def add(self, key: str) -> None:
        self.d[key] = None
        while len(self.d) > self.capacity:
            del self.d[next(iter(self.d))]

    def pop_oldest(self) -> None:
        if self.d:
            del self.d[next(iter(self.d))]


ops = st.lists(st.one_of(st.tuples(st.just("add"), st.integers(0, 40)),
                         st.tuples(st.just("pop"), st.just(0))), max_size=300)


@settings(max_examples=150, deadline=None)
@given(ops=ops, capacity=st.integers(1, 25), rebuild=st.integers(1, 9))
def test_the_digests_behave_as_the_dict_of_keys(ops: list[tuple[str, int]], capacity: int,
                                                rebuild: int) -> None:
    """Membership, count and order equal the dict's after any adds and evictions,
    whenever the sorted copy is rebuilt (``REBUILD_EVERY`` from 1 up)."""
    old = keys_module.REBUILD_EVERY
    keys_module.REBUILD_EVERY = rebuild
    try:
        got, want = JudgmentKeys(capacity), DictModel(capacity)
        for op, k in ops:
            if op == "add":
                got.add(f"k{k}")
                want.add(f"k{k}")
            else:
                got.pop_oldest()
                want.pop_oldest()
            assert len(got) == len(want.d)
        assert got.digests().tolist() == key_digests(want.d)
        for k in range(41):
            assert (f"k{k}" in got) == (f"k{k}" in want.d)
        again = JudgmentKeys.from_obj(orjson.loads(orjson.dumps(got.to_obj())), capacity)
        assert again == got and got.copy() == got
        for k in range(41):
            assert (f"k{k}" in again) == (f"k{k}" in want.d)
    finally:
        keys_module.REBUILD_EVERY = old


def test_a_record_from_before_reads_its_list_of_keys() -> None:
    listed = {"judged": ["a", "b", "c"]}
    keys = JudgmentKeys.from_record(listed, capacity=10)
    assert keys.digests().tolist() == key_digests(["a", "b", "c"])
    assert "b" in keys and "d" not in keys
    assert JudgmentKeys.from_record({"judged_digests": keys.to_obj()}, 10) == keys
    assert not JudgmentKeys.from_record({}, 10)  # a record with no keys at all
    # more keys than the capacity: the newest are kept, as the dict kept them
    assert JudgmentKeys.from_record(listed, capacity=2).digests().tolist() == key_digests("bc")


@pytest.mark.parametrize("bad", [
    {"judged": "abc"},
    {"judged_digests": [1, 2]},
    {"judged_digests": {"dtype": "<f8", "shape": [1], "b64": "AAAAAAAAAAA="}},
    {"judged_digests": {"dtype": "<i8", "shape": [2], "b64": "AAAAAAAAAAA="}},
    {"judged_digests": {"dtype": "<i8", "shape": [1, 1], "b64": "AAAAAAAAAAA="}},
])
def test_bad_keys_in_a_record_are_a_state_error(bad: dict[str, Any]) -> None:
    with pytest.raises(StateError):
        JudgmentKeys.from_record(bad, capacity=10)


@pytest.mark.parametrize("capacity", [0, -1, True, 2.5])
def test_the_capacity_must_be_a_positive_integer(capacity: Any) -> None:
    with pytest.raises(ValueError, match="capacity"):
        JudgmentKeys(capacity)


def test_digests_are_fixed_for_good() -> None:
    """Workers, and records written by earlier ones, must agree on a key's digest: no
    per-process hash salt, and no change of the function (a record's digests would
    no longer match its keys: every judgment learned again)."""
    assert digest("judgment-1") == 0xB18D2F14965B9525
    assert digest("\udcff") != digest("")  # a lone surrogate (from JSON) is still a key


def test_two_hundred_thousand_keys_take_a_few_megabytes() -> None:
    """The point of the digests: 200,000 keys of 30 characters took about 19 MB as a dict
    and 8 MiB of the record; here the arrays are 3.2 MB and the record 2.1 MB."""
    rng = random.Random(0)
    n = 200_000
    keys = JudgmentKeys(n)
    for i in range(n):
        keys.add(f"judgment-{i:08d}-{rng.getrandbits(48):012x}")
    assert len(keys) == n
    held = keys._ring.nbytes + keys._sorted.nbytes
    assert held <= 16 * n + 64
    assert len(keys._recent) + len(keys._gone) < keys_module.REBUILD_EVERY
    assert len(orjson.dumps(keys.to_obj())) < 11 * n
    keys.add("one more")  # full: the oldest goes
    assert len(keys) == n and "one more" in keys
    assert np.unique(keys.digests()).size == n
