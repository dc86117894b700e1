"""Every benchmark script answers ``--help``, and answering writes nothing.

The README and docs quote the benchmark commands that produced their figures. A script
that no longer starts (an import broken by a change in ``sift``), or that runs instead
of answering ``--help`` (until the forty-ninth session two of them did, and rewrote
``docs/engine_profiles.md`` and a results file), is a figure nobody can reproduce.

The scripts run in one subprocess, one after the other as ``__main__`` (``runpy``), so
that numpy, scipy and sift are imported once, not 44 times (87 s against a few).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
#: modules the scripts import, with no command line of their own
HELPERS = {"_peer.py", "cpucap.py"}
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py") if p.name not in HELPERS)
#: what a script might write when it runs instead of answering ``--help``
WATCHED = (ROOT / "benchmarks" / "results", ROOT / "docs")

#: runs each script given as ``__main__`` with ``--help``; prints, per script, its exit
#: code, the first line it printed and the end of any error, as one JSON object
DRIVER = r"""
import contextlib, io, json, runpy, sys, traceback
out = {}
sys.path.insert(0, sys.argv[1])
for path in sys.argv[2:]:
    sys.argv = [path, "--help"]
    text, code, error = io.StringIO(), None, ""
    try:
        with contextlib.redirect_stdout(text), contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                runpy.run_path(path, run_name="__main__")
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        error = err.getvalue()[-2000:]
    except BaseException:
        code, error = -1, traceback.format_exc()[-2000:]
    lines = text.getvalue().lstrip().splitlines()
    out[path] = [code, lines[0] if lines else "", error]
print(json.dumps(out))
"""


def mtimes() -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for folder in WATCHED for p in folder.rglob("*") if p.is_file()}


def test_the_scripts_are_found() -> None:
    assert len(SCRIPTS) > 30
    assert "engine_replay.py" in SCRIPTS and "stream_bench.py" in SCRIPTS


def test_every_script_answers_help_and_writes_nothing() -> None:
    before = mtimes()
    paths = [str(BENCHMARKS / s) for s in SCRIPTS]
    done = subprocess.run([sys.executable, "-c", DRIVER, str(BENCHMARKS), *paths], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    bad = {}
    for script, path in zip(SCRIPTS, paths, strict=True):
        code, usage, error = results[path]
        if code != 0 or not (usage.startswith("usage:") and script in usage):
            bad[script] = (code, usage[:200], error)
    assert not bad, bad
    changed = sorted(str(p.relative_to(ROOT)) for p, t in mtimes().items() if before.get(p) != t)
    assert not changed, f"--help wrote {changed}"
