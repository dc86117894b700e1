"""``sift worker``'s stop watchdog (the process side is tested against a broker in
tests/reliability/test_broker_restart.py) and its frozen heap."""

from __future__ import annotations

import gc
import threading
import time

from sift.commands.worker import StopWatchdog, freeze_heap


def test_the_watchdog_exits_with_1_once_the_stop_outlasts_its_timeout() -> None:
    codes: list[int] = []
    fired = threading.Event()

    def exit_(code: int) -> None:
        codes.append(code)
        fired.set()

    dog = StopWatchdog(0.05, exit=exit_)
    assert dog.timer is None  # nothing runs until a stop begins
    dog.arm()
    first = dog.timer
    dog.arm()  # a second signal does not restart the countdown
    assert dog.timer is first
    assert fired.wait(10.0)
    assert codes == [1]
    assert first is not None and first.daemon  # never keeps a clean exit waiting


def test_an_unarmed_watchdog_never_exits() -> None:
    codes: list[int] = []
    dog = StopWatchdog(0.01, exit=codes.append)
    time.sleep(0.1)  # ten timeouts
    assert dog.timer is None and codes == []


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_freeze_heap_takes_what_lives_out_of_the_collector_and_frees_later_cycles() -> None:
    gc.unfreeze()
    try:
        kept = [_Node() for _ in range(100)]
        frozen = freeze_heap()
        assert frozen >= 100 and gc.get_freeze_count() == frozen
        assert not any(gc.is_tracked(o) and o in gc.get_objects(2) for o in kept[:3])
        # objects made afterwards are collected as usual, cycles included
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        del a, b
        assert gc.collect() >= 2
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_the_gc_watch_times_collections_by_generation() -> None:
    """Each collection is counted under its generation with its pause; uninstalled, the
    watch no longer counts."""
    import gc

    from sift.agents.gcwatch import GcPauses

    watch = GcPauses().install()
    try:
        gc.collect(0)
        gc.collect(2)
        s = watch.summary()
        assert s["collections"][0] >= 1 and s["collections"][2] >= 1
        assert s["pause_ms_max"][2] > 0
        assert s["pause_ms_total"][2] >= s["pause_ms_max"][2]
    finally:
        watch.uninstall()
    before = watch.summary()["collections"]
    gc.collect()
    assert watch.summary()["collections"] == before
