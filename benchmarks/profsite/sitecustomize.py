"""Profile every ``sift worker`` process a benchmark starts, with cProfile.

Put this folder first on ``PYTHONPATH`` and name an output folder in ``PROF_DIR``;
each worker process (a Python process with ``worker`` among its arguments) writes
``w<pid>_<time>.prof`` there when it exits normally (a worker killed with SIGKILL, or
ended by its stop watchdog, writes nothing). The benchmark script itself is not
profiled. For example, the seventeenth session's look at where a second worker's CPU
goes (docs/streaming.md, Speed):

    PROF_DIR=/tmp/prof PYTHONPATH=benchmarks/profsite .venv/bin/python \\
        benchmarks/stream_bench.py --only-two-workers --two-workers 100:200000 --out /tmp/tw.json

The profiler slows Python code more than C code, so its shares are indicative only;
rates come from unprofiled runs.
"""

import atexit
import os
import sys

_out = os.environ.get("PROF_DIR")
if _out and "worker" in sys.argv:
    import cProfile
    import time

    _prof = cProfile.Profile()
    _prof.enable()

    def _dump() -> None:
        _prof.disable()
        _prof.dump_stats(os.path.join(_out, f"w{os.getpid()}_{time.time():.0f}.prof"))

    atexit.register(_dump)
