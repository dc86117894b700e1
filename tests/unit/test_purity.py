"""sift/filters is the pure learning core: no I/O, no Kafka, no Faust, no service code."""

import ast
import sys
from pathlib import Path

import sift.filters

THIRD_PARTY = {"numpy", "scipy", "sklearn"}
# standard-library modules that do I/O, run processes, or talk to the network
IO_STDLIB = {"os", "io", "pathlib", "socket", "gzip", "bz2", "lzma", "zipfile", "tarfile", "json", "pickle",
             "marshal", "shelve", "dbm", "sqlite3", "subprocess", "shutil", "tempfile", "glob", "urllib",
             "http", "asyncio", "selectors", "ssl", "logging", "mmap", "multiprocessing", "threading",
             "csv", "fileinput", "signal", "ftplib", "smtplib", "email", "webbrowser"}
ALLOWED_TOP = THIRD_PARTY | {"sift"} | (set(sys.stdlib_module_names) - IO_STDLIB)
FORBIDDEN_SIFT = ("sift.agents", "sift.topics", "sift.commands", "sift.cli", "sift.replay", "sift.settings",
                  "sift.devbroker", "sift.kafkaclient")
FORBIDDEN_CALLS = {"open", "print", "input", "exec", "eval", "__import__"}


def _modules() -> list[Path]:
    root = Path(sift.filters.__file__).parent
    return sorted(root.rglob("*.py"))


def test_filters_import_only_numpy_scipy_sklearn_and_stdlib_basics() -> None:
    bad = []
    for path in _modules():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top not in ALLOWED_TOP or name.startswith(FORBIDDEN_SIFT):
                    bad.append(f"{path.name}: import {name}")
    assert not bad, bad


def test_filters_make_no_io_calls() -> None:
    bad = []
    for path in _modules():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
                bad.append(f"{path.name}:{node.lineno}: {node.func.id}()")
            if isinstance(node, ast.Attribute) and node.attr in {"read_text", "write_text", "read_bytes",
                                                                   "write_bytes", "urlopen", "loads", "dumps"}:
                if isinstance(node.value, ast.Name) and node.value.id in {"pickle", "marshal", "shelve"}:
                    bad.append(f"{path.name}:{node.lineno}: {node.value.id}.{node.attr}")
                elif node.attr.endswith(("_text", "_bytes")) or node.attr == "urlopen":
                    bad.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert not bad, bad


def test_the_check_catches_a_violation(tmp_path: Path) -> None:
    src = "import faust\nopen('x')\n"
    tree = ast.parse(src)
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import)]
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert imports[0].names[0].name.split(".")[0] not in ALLOWED_TOP
    assert "pathlib" not in ALLOWED_TOP and "kafka" not in ALLOWED_TOP
    assert isinstance(calls[0].func, ast.Name) and calls[0].func.id in FORBIDDEN_CALLS
