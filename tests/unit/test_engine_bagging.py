"""The joint decision of ``benchmarks/engine_bagging.py``'s bagged profiles, by hand."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tests.scripts import load_benchmark

bagging = load_benchmark("engine_bagging")
INF = np.inf


def filterer(rule: str, n_bags: int = 3) -> Any:
    banks = [SimpleNamespace(names=["a", "b"]) for _ in range(n_bags)]
    return bagging.BagFilterer(banks, rule)


def test_the_mean_margin_decides_and_a_silenced_member_counts_minus_one() -> None:
    # one document, two profiles, three members
    S = np.array([[[0.5, 0.5]], [[0.5, 0.5]], [[0.5, 0.5]]])
    # a: margins 0.1, 0.1, -0.1 -> mean +0.033: delivered
    # b: margins 0.3, 0.3, and -1 for the member answering No -> mean -0.133: not delivered
    T = np.array([[[0.4, 0.2]], [[0.4, 0.2]], [[0.6, INF]]])
    assert filterer("margin").delivered(S, T).tolist() == [[True, False]]


def test_the_vote_needs_a_majority() -> None:
    S = np.array([[[0.5, 0.5]], [[0.5, 0.5]], [[0.5, 0.5]]])
    T = np.array([[[0.4, 0.4]], [[0.6, 0.6]], [[0.5, INF]]])  # a: 2 of 3 yes; b: 1 of 3
    assert filterer("vote").delivered(S, T).tolist() == [[True, False]]
    # an even split is not a majority
    S2, T2 = S[:2], np.array([[[0.4, 0.4]], [[0.6, 0.6]]])
    assert filterer("vote", 2).delivered(S2, T2).tolist() == [[False, False]]


def test_one_member_is_the_plain_threshold() -> None:
    S = np.array([[[0.5, 0.2], [0.1, 0.9]]])
    T = np.array([[[0.5, INF]]])
    for rule in ("margin", "vote"):
        assert filterer(rule, 1).delivered(S, T).tolist() == [[True, False], [False, False]]


def test_bad_rules_and_mismatched_banks_are_refused() -> None:
    with pytest.raises(ValueError, match="rule must be"):
        filterer("mean")
    banks = [SimpleNamespace(names=["a", "b"]), SimpleNamespace(names=["b", "a"])]
    with pytest.raises(ValueError, match="same profiles"):
        bagging.BagFilterer(banks, "margin")


def test_abstaining_leaves_silenced_members_out() -> None:
    S = np.array([[[0.5, 0.5]], [[0.5, 0.5]], [[0.5, 0.5]]])
    # a: margins 0.1 and -0.1, the third member silenced: mean 0 over the two -> delivered
    # b: every member silenced -> not delivered
    T = np.array([[[0.4, INF]], [[0.6, INF]], [[INF, INF]]])
    assert filterer("abstain").delivered(S, T).tolist() == [[True, False]]
    # the same cells under the margin rule: the silenced member's -1 keeps a out
    assert filterer("margin").delivered(S, T).tolist() == [[False, False]]
