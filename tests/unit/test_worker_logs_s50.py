"""``sift worker``'s plain-text log: one record a line, whatever a message quotes.

Faust sets up the worker's logging with its own formatter, which writes a message as it
is; ``sift web`` escaped user text (forty-ninth session) and the worker did not. Each
root handler now gets :class:`sift.observability.OneLineFilter` when Faust configures
the root logger (the worker class's ``on_setup_root_logger``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from sift.commands.worker import StopWatchdog, worker_class
from sift.observability import OneLineFilter, one_line_handlers

FORGED = "d1\n[2026-01-01 00:00:00,000] [1] [ERROR] forged"


def test_filter_escapes_the_formatted_message() -> None:
    rec = logging.makeLogRecord({"msg": "document %s refused", "args": (FORGED,)})
    assert OneLineFilter().filter(rec) is True
    assert rec.getMessage() == "document d1\\n[2026-01-01 00:00:00,000] [1] [ERROR] forged refused"
    assert "\n" not in rec.getMessage()


def test_filter_keeps_a_message_its_arguments_do_not_fit() -> None:
    rec = logging.makeLogRecord({"msg": "two %s %s", "args": ("one\nline",)})
    OneLineFilter().filter(rec)
    assert rec.getMessage() == "two %s %s (cannot format the message with its arguments: TypeError)"


def test_handlers_get_one_filter_however_often_they_are_set_up() -> None:
    logger = logging.getLogger("sift.test.one_line")
    handler = logging.StreamHandler()
    logger.addHandler(handler)
    try:
        one_line_handlers(logger)
        one_line_handlers(logger)
        assert sum(isinstance(f, OneLineFilter) for f in handler.filters) == 1
    finally:
        logger.removeHandler(handler)


def test_the_worker_escapes_messages_through_fausts_formatter(tmp_path: Path, root_handlers: None) -> None:
    """Faust's own set-up (mode's ``setup_logging``, to a file so that no colour codes
    are written), then the worker's hook, as ``Worker.default_on_first_start`` runs them."""
    from mode.utils.logging import setup_logging

    log_file = tmp_path / "worker.log"
    cls = worker_class(StopWatchdog(1.0))
    worker = cls.__new__(cls)  # the hook needs no running app
    worker.spinner = None
    level = setup_logging(loglevel="INFO", logfile=str(log_file))
    worker.on_setup_root_logger(logging.getLogger(), level)
    logging.getLogger("sift.worker").warning("dead letter from %s", FORGED)
    for h in logging.getLogger().handlers:
        h.flush()
    lines = log_file.read_text().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].rstrip().endswith("dead letter from d1\\n[2026-01-01 00:00:00,000] [1] [ERROR] forged")
