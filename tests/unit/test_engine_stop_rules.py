"""The give-up rules of ``benchmarks/engine_thresholds.py stops``, on hand-made delivery
sequences (True: a relevant delivery)."""

from __future__ import annotations

import pytest

from tests.scripts import load_benchmark

rules = load_benchmark("engine_thresholds").stop_rules()

R, N = True, False


@pytest.mark.parametrize(("rule", "seq", "kept"), [
    ("none", [N, N, N, N], 4),
    # stop at the c-th non-relevant delivery while none was relevant
    ("zero1", [N, R, R], 1),
    ("zero2", [N, N, R], 2),
    ("zero3", [N, N, R, N, N, N], 6),  # a relevant one before the third junk: never stops
    ("zero2", [R, N, N, N], 4),
    ("zero4", [N, N, N], 3),  # too few to stop
    # stop once 2r - n reaches -c: -1, -2, 0, -1, -2, -3
    ("util3", [N, N, R, N, N, N, R], 6),
    ("util2", [N, N, R], 2),
    ("util2", [R, N, N, N, N, N], 5),  # 2, 1, 0, -1, -2: stops there, the sixth not delivered
    ("util4", [R, R, N, N, N], 5),
])
def test_a_rule_keeps_the_deliveries_up_to_its_stop(rule: str, seq: list[bool], kept: int) -> None:
    before = list(seq)
    out = rules[rule](seq)
    assert out == before[:kept]
    assert seq == before  # the sequence itself is not changed


def test_the_rule_names_and_their_thresholds() -> None:
    assert set(rules) == {"none", *(f"zero{c}" for c in (1, 2, 3, 4, 5, 6, 8)),
                          *(f"util{c}" for c in (2, 3, 4, 5, 6, 8, 10))}
