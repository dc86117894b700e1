"""How long the garbage collector holds the worker up.

A full collection stops the event loop: no message is read, scored or acknowledged
meanwhile, so its pauses set the decision latency's tail (docs/streaming.md finding
19). :class:`GcPauses` times every collection through ``gc.callbacks`` and keeps, per
generation, the number of collections, their total and their longest pause; the
worker reports them in its stats (``gc``).
"""

from __future__ import annotations

import gc
import time
from typing import Any


class GcPauses:
    """Per-generation counts and pause times of the collections since :meth:`install`.

    Examples
    --------
    >>> watch = GcPauses().install()
    >>> _ = gc.collect()
    >>> watch.summary()["collections"][2] >= 1
    True
    >>> watch.uninstall()
    """

    def __init__(self) -> None:
        self.collections = [0, 0, 0]
        self.total_s = [0.0, 0.0, 0.0]
        self.max_s = [0.0, 0.0, 0.0]
        self._started: float | None = None

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        if self._started is None:
            return
        pause = time.perf_counter() - self._started
        self._started = None
        g = min(int(info.get("generation", 2)), 2)
        self.collections[g] += 1
        self.total_s[g] += pause
        if pause > self.max_s[g]:
            self.max_s[g] = pause

    def install(self) -> GcPauses:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)
        return self

    def uninstall(self) -> None:
        while self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def summary(self) -> dict[str, Any]:
        """``collections``, ``pause_ms_total`` and ``pause_ms_max``, each a list by generation."""
        return {"collections": list(self.collections),
                "pause_ms_total": [round(1000 * t, 2) for t in self.total_s],
                "pause_ms_max": [round(1000 * t, 2) for t in self.max_s]}


#: the worker process's watch, installed by ``sift worker`` (None in other processes)
WATCH: GcPauses | None = None


def install() -> GcPauses:
    """Install the process's watch (once) and return it."""
    global WATCH
    if WATCH is None:
        WATCH = GcPauses().install()
    return WATCH
