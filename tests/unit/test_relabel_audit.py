"""Audit of judgment corrections (forty-seventh session): ``Profile.find_judgment`` and
``Profile.relabel`` of a judgment the profile never learned.

``relabel`` used to take any judgment it could not find for an evicted one: it took the
old label's share of ``x`` out of the running sums, which never held it, and learned
``x`` again. A profile that has evicted no judgment cannot have evicted this one, so
the correction is refused there (the profile unchanged), and ``find_judgment`` tells a
caller beforehand where the judgment is, or that the profile never learned it.
"""

from __future__ import annotations

import orjson
import pytest

from sift.filters.errors import FilterError
from tests.unit.test_relabel import REL, STREAM, XS, _bag, _fit, _state_bytes


def test_find_judgment_says_where_the_judgment_is() -> None:
    p = _fit("rocchio", update=3)
    p.learn_many(XS[:4], REL[:4])  # 0-2 applied, 3 pending
    assert p.find_judgment(XS[3], REL[3]) == "pending"
    assert p.find_judgment(XS[1], REL[1]) == "held"
    assert p.find_judgment(XS[1], not REL[1]) is None  # held with the other label
    assert p.find_judgment(XS[1], REL[1], weight=2.0) is None  # another weight
    assert p.find_judgment(XS[6], True) is None  # never judged
    state = _state_bytes(p)
    assert _state_bytes(p) == state  # asking changes nothing


def test_find_judgment_in_a_profile_that_has_evicted_judgments() -> None:
    p = _fit("rocchio", max_examples=6, pseudolabel={})
    for i in range(len(STREAM)):
        p.learn_one(XS[i], REL[i])
    assert p.find_judgment(XS[0], REL[0]) == "evicted"  # it may be among the evicted
    assert p.find_judgment(XS[9], REL[9]) == "held"


@pytest.mark.parametrize("model", ["rocchio", "kantor", "knn"])
def test_relabel_of_a_judgment_never_learned_is_refused(model: str) -> None:
    """Nothing evicted, nothing held or pending for ``x``: taking its old label out of
    the sums would take out what was never put in. Refused, the profile unchanged."""
    p = _fit(model)
    for i in range(5):
        p.learn_one(XS[i], REL[i])
    assert len(p.examples_) < (p.max_examples or 0) and p.examples_.n_evicted == 0
    state = _state_bytes(p)
    with pytest.raises(FilterError, match="never learned") as err:
        p.relabel(XS[7], True)  # never judged
    assert "\n" not in str(err.value)
    with pytest.raises(FilterError, match="never learned"):
        p.relabel(XS[1], REL[1], weight=2.0)  # judged with another weight
    assert _state_bytes(p) == state


def test_relabel_still_takes_an_evicted_judgment() -> None:
    p = _fit("rocchio", max_examples=6, pseudolabel={})
    p.learn_one(XS[0], not REL[0])
    for i in range(1, 8):
        p.learn_one(XS[i], REL[i])
    assert p.find_judgment(XS[0], not REL[0]) == "evicted"
    assert p.relabel(XS[0], REL[0]) is False


def test_a_bagged_profile_refuses_before_any_member_changes() -> None:
    b = _bag("rocchio")
    for i in range(4):
        b.learn_one(XS[i], REL[i])
    assert b.find_judgment(XS[2], REL[2]) == "held"
    assert b.find_judgment(XS[8], True) is None
    state = _state_bytes(b)
    with pytest.raises(FilterError, match="never learned"):
        b.relabel(XS[8], False)
    assert _state_bytes(b) == state
    assert b.relabel(XS[2], not REL[2]) is True


def test_update_never_still_ignores_the_correction() -> None:
    p = _fit("rocchio", update="never")
    p.learn_one(XS[0], False)
    state = _state_bytes(p)
    assert p.find_judgment(XS[0], False) is None  # ignored: never learned
    assert p.relabel(XS[0], True) is True
    assert _state_bytes(p) == state


def test_state_keeps_what_find_judgment_needs() -> None:
    from sift.filters.profile import Profile
    from tests.unit.test_relabel import VEC

    p = _fit("rocchio", max_examples=6, pseudolabel={})
    for i in range(len(STREAM)):
        p.learn_one(XS[i], REL[i])
    q = Profile.from_state(orjson.loads(_state_bytes(p)), VEC.feature_weights())
    for i in range(len(STREAM)):
        assert q.find_judgment(XS[i], REL[i]) == p.find_judgment(XS[i], REL[i])
