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


#: Where sift may read its environment other than sift/settings.py, and what for (the
#: settings' promise: one frozen object is the only place the environment is read)
ENVIRONMENT_READERS = {
    "sift/devbroker.py": "JAVA_HOME, the JVM's own variable, to find java",
    "sift/agents/harness.py": "hands its environment to the worker processes it starts",
}


def environment_reads(source: str) -> list[int]:
    """Line numbers of ``os.environ`` / ``os.getenv`` / ``environ`` / ``getenv`` uses."""
    import ast

    names = {"environ", "getenv", "environb"}
    lines = []
    for node in ast.walk(ast.parse(source)):
        uses = ((isinstance(node, ast.Attribute) and node.attr in names | {"putenv", "unsetenv"})
                or (isinstance(node, ast.Name) and node.id in names)
                or (isinstance(node, ast.ImportFrom) and node.module == "os"
                    and any(a.name in names for a in node.names)))
        if uses:
            lines.append(node.lineno)
    return sorted(lines)


def test_environment_reads_are_caught() -> None:
    assert environment_reads("import os\nx = os.environ['A']\n") == [2]
    assert environment_reads("import os\nx = os.getenv('A')\n") == [2]
    assert environment_reads("from os import environ\nx = environ.get('A')\n") == [1, 2]
    assert environment_reads("import os as o\nx = o.environ\n") == [2]
    assert environment_reads("settings = {'environment': 1}\n") == []


def test_only_settings_reads_the_environment() -> None:
    found = {}
    for path in sorted((ROOT / "sift").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "sift/settings.py" or rel in ENVIRONMENT_READERS:
            continue
        lines = environment_reads(path.read_text(encoding="utf-8"))
        if lines:
            found[rel] = lines
    assert found == {}, f"the environment read outside sift/settings.py: {found}"
    for rel in ENVIRONMENT_READERS:  # the list stays true: each one still reads it
        assert environment_reads((ROOT / rel).read_text(encoding="utf-8")), rel
