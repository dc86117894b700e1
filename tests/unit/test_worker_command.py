"""``sift worker``'s stop watchdog (the process side is tested against a broker in
tests/reliability/test_broker_restart.py) and its frozen heap."""

from __future__ import annotations

import gc
import logging
import re
import threading
import time
from pathlib import Path

import pytest

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


def test_the_worker_says_which_training_corpus_it_uses(caplog: pytest.LogCaptureFixture) -> None:
    from sift.agents.service import TrainingSet
    from sift.commands.worker import log_training
    from sift.filters.vectorize import Vectorizer

    with caplog.at_level(logging.INFO, logger="sift.worker"):
        line = log_training(TrainingSet(Vectorizer(), None, {"a": 0, "b": 1}, "train.jsonl"))
        assert line.startswith("training corpus train.jsonl: 2 documents")
        line = log_training(TrainingSet.load(None))
    assert line.startswith("no training corpus") and "SIFT_IDF_CORPUS" in line
    assert [r.levelname for r in caplog.records] == ["INFO", "WARNING"]


def test_the_docker_image_names_a_training_corpus_it_contains() -> None:
    """The image installs the package (not the checkout), where the bundled corpus is not
    found by itself: the Dockerfile names it, and the build context keeps it."""
    root = Path(__file__).resolve().parents[2]
    docker = (root / "Dockerfile").read_text()
    match = re.search(r"SIFT_IDF_CORPUS=/app/(\S+)", docker)
    assert match and "COPY . /app" in docker
    assert (root / match.group(1)).is_file()
    ignored = [line.strip() for line in (root / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.lstrip().startswith("#")]  # as Docker reads it
    assert not any(match.group(1).startswith(p.rstrip("/*") + "/") for p in ignored if p.rstrip("/*"))


def test_a_web_port_in_use_is_a_one_line_error_before_the_worker_starts() -> None:
    """A second ``sift worker --web`` on the same port joined its group, then ended in
    Faust's traceback."""
    import socket

    from sift.commands.worker import check_web_port
    from sift.errors import SiftError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SiftError, match=f"cannot listen on 127.0.0.1:{port} .*own SIFT_WEB_PORT"):
            check_web_port("127.0.0.1", port)
    check_web_port("127.0.0.1", port)  # free again
    with pytest.raises(SiftError, match="does not resolve"):
        check_web_port("nonexistent.invalid", port)
