"""The repository passes its own linters: ruff everywhere, mypy --strict on the package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True,
                          check=False, timeout=600)


def test_ruff_is_clean() -> None:
    res = _run("ruff", "check", "--no-cache", ".")
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_is_clean_and_strict(tmp_path: Path) -> None:
    # strict on the whole package: pyproject.toml says so, and the command line again
    res = _run("mypy", "--cache-dir", str(tmp_path / "mypy"), "--strict", "sift")
    assert res.returncode == 0, res.stdout + res.stderr
