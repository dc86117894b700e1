"""The Prometheus registry's histogram: cumulative buckets, sum and count."""

from __future__ import annotations

import math

import pytest

from sift.observability import Histogram, Registry


def test_observe_many_equals_observing_one_by_one() -> None:
    values = [0.003, 0.01, 0.01, 0.2, 7.0, 1e9, math.nan, 0.0]
    one, many = Histogram("a_seconds", "a", (0.01, 0.1, 1.0)), Histogram("b_seconds", "b", (0.01, 0.1, 1.0))
    for v in values:
        one.observe(v)
    many.observe_many(iter(values))  # any iterable, once
    assert (one.counts, one.sum, one.count) == (many.counts, many.sum, many.count)
    assert many.count == 7 and many.counts == [4, 0, 1, 2]  # <= 0.01, 0.1, 1, +Inf; NaN left out


def test_histogram_renders_cumulative_buckets() -> None:
    reg = Registry()
    h = reg.histogram("sift_x_seconds", "x", (0.5, 2))
    h.observe_many([0.1, 1.0, 3.0])
    lines = reg.render().splitlines()
    assert lines[:2] == ["# HELP sift_x_seconds x", "# TYPE sift_x_seconds histogram"]
    assert lines[2:] == ['sift_x_seconds_bucket{le="0.5"} 1', 'sift_x_seconds_bucket{le="2"} 2',
                         'sift_x_seconds_bucket{le="+Inf"} 3', "sift_x_seconds_sum 4.1",
                         "sift_x_seconds_count 3"]


def test_bad_buckets_and_names_are_refused() -> None:
    with pytest.raises(ValueError, match="finite bucket bounds"):
        Histogram("h", "h", [math.nan])
    reg = Registry()
    reg.histogram("dup_seconds", "d")
    with pytest.raises(ValueError, match="registered twice"):
        reg.histogram("dup_seconds", "d")
