"""sift/filters is the pure learning core: no I/O, no Kafka, no Faust, no service code.

:func:`violations` reads one module's source and lists what breaks the rule:

- imports are checked against ALLOW-lists (a standard-library module that is not listed is
  refused, so a new I/O module cannot slip through a deny-list). Relative imports are
  resolved against the module's package, and every name of ``from X import a, b`` is
  checked as ``X.a``, ``X.b`` (so ``from sift import settings`` is ``sift.settings``);
- I/O reachable through the allowed libraries (``np.load``, ``sp.save_npz``,
  ``sklearn.datasets``, ``x.tofile`` ...) and through builtins (``open``, ``print``,
  ``exec`` ...) is refused wherever it is referenced, through any alias.

The self-test runs :func:`violations` itself on snippets, one per kind of violation the
audit of session 45 found missed, and on controls that must pass.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sift.filters

#: standard-library modules sift/filters may import: what it imports today plus other
#: modules that do no I/O. A module not listed here is refused.
ALLOWED_STDLIB = frozenset({
    # imported by sift/filters today
    "__future__", "abc", "base64", "collections", "collections.abc", "contextlib", "dataclasses",
    "hashlib", "inspect", "itertools", "math", "numbers", "operator", "re", "time", "typing",
    "weakref",
    # pure, not used yet
    "array", "bisect", "copy", "enum", "functools", "heapq", "statistics", "string", "struct",
    "types", "unicodedata", "warnings",
})
#: third-party packages (and all their submodules, minus FORBIDDEN below)
ALLOWED_THIRD_PARTY = frozenset({"numpy", "scipy", "sklearn"})
#: the parts of sift the core may use
ALLOWED_SIFT = frozenset({"sift.filters", "sift.errors"})

#: dotted names that must not be imported nor referenced (through any alias): I/O, the
#: network, or dynamic imports reachable from an allowed module. A name covers its
#: submodules and attributes.
FORBIDDEN = frozenset({
    # numpy file I/O
    "numpy.load", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.loadtxt",
    "numpy.savetxt", "numpy.genfromtxt", "numpy.fromfile", "numpy.fromregex", "numpy.memmap",
    "numpy.DataSource", "numpy.lib.npyio", "numpy.lib.format", "numpy.lib.DataSource",
    "numpy.ctypeslib", "numpy.f2py", "numpy.distutils", "numpy.testing",
    # scipy / sklearn file and network I/O
    "scipy.sparse.load_npz", "scipy.sparse.save_npz", "scipy.io", "scipy.datasets", "scipy.misc",
    "sklearn.datasets", "sklearn.externals", "sklearn.utils._testing",
    # standard library, listed so that an alias is caught even if the module were allowed
    "builtins", "io", "os", "sys", "codecs.open", "importlib", "linecache", "posix", "nt",
    "inspect.getsource", "inspect.getsourcelines", "inspect.getsourcefile", "inspect.findsource",
    "inspect.getcomments", "inspect.getfile",
})
#: builtins that read or write a file or the terminal, or run code from a string
FORBIDDEN_BUILTINS = frozenset({"open", "print", "input", "exec", "eval", "compile", "__import__",
                                "breakpoint", "__builtins__", "help"})
#: method names that do file or network I/O whatever the receiver (``ndarray.tofile``,
#: ``ndarray.dump``, ``Path.read_text`` ...)
FORBIDDEN_METHODS = frozenset({"tofile", "dump", "read_text", "write_text", "read_bytes",
                               "write_bytes", "urlopen", "savetxt", "loadtxt", "save_npz", "load_npz",
                               "savez", "savez_compressed"})


def _under(name: str, prefixes: frozenset[str]) -> str | None:
    """The entry of ``prefixes`` that ``name`` is, or is inside of (dotted components)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        head = ".".join(parts[:i])
        if head in prefixes:
            return head
    return None


def _import_allowed(name: str) -> bool:
    top = name.split(".")[0]
    if top in ALLOWED_THIRD_PARTY:
        return True
    if top == "sift":
        return _under(name, ALLOWED_SIFT) is not None
    return name in ALLOWED_STDLIB


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str | None:
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    if level - 1 > len(base) - 1:
        return None
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _dotted(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``, or None if the chain does not start at a name."""
    out: list[str] = []
    while isinstance(node, ast.Attribute):
        out.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        out.append(node.id)
        return out[::-1]
    return None


def violations(source: str, module: str, *, is_package: bool = False) -> list[str]:
    """What in ``source`` (the module ``module``) breaks the purity rule of sift/filters.

    ``is_package`` says ``module`` is a package's ``__init__`` (relative imports then
    resolve against ``module`` itself rather than its parent).
    """
    tree = ast.parse(source)
    bad: list[str] = []
    aliases: dict[str, str] = {}  # local name -> dotted name it was imported as

    def check_import(lineno: int, name: str, what: str) -> None:
        hit = _under(name, FORBIDDEN)
        if hit is not None:
            bad.append(f"{module}:{lineno}: {what} {name} (forbidden: {hit})")
        elif not _import_allowed(name):
            bad.append(f"{module}:{lineno}: {what} {name} (not in the allow-list)")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                check_import(node.lineno, a.name, "import")
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _resolve_relative(module, is_package, node.level, node.module)
                if base is None:
                    bad.append(f"{module}:{node.lineno}: relative import beyond the top-level package")
                    continue
            else:
                base = node.module or ""
            for a in node.names:
                if a.name == "*":
                    bad.append(f"{module}:{node.lineno}: from {base} import * (names cannot be checked)")
                    continue
                full = f"{base}.{a.name}"
                hit = _under(full, FORBIDDEN)
                if hit is not None:
                    bad.append(f"{module}:{node.lineno}: from {base} import {a.name} (forbidden: {hit})")
                elif not (_import_allowed(base) or _import_allowed(full)):
                    bad.append(f"{module}:{node.lineno}: from {base} import {a.name} ({full} not in the allow-list)")
                aliases[a.asname or a.name] = full

    def check_reference(lineno: int, chain: list[str] | None) -> None:
        if chain and chain[0] in aliases:
            name = ".".join([aliases[chain[0]], *chain[1:]])
            hit = _under(name, FORBIDDEN)
            if hit is not None:
                bad.append(f"{module}:{lineno}: {'.'.join(chain)} is {name} (forbidden: {hit})")

    # the inner links of a chain a.b.c (a.b) are checked as part of the outermost one
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in FORBIDDEN_BUILTINS \
                and node.id not in aliases:
            bad.append(f"{module}:{node.lineno}: builtin {node.id}")
        elif isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_METHODS:
                bad.append(f"{module}:{node.lineno}: .{node.attr}")
            if id(node) not in inner:
                check_reference(node.lineno, _dotted(node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str):
            # getattr(np, "load") is np.load
            attr = node.args[1].value
            if attr in FORBIDDEN_METHODS:
                bad.append(f"{module}:{node.lineno}: getattr(..., {attr!r})")
            head = _dotted(node.args[0])
            check_reference(node.lineno, [*head, attr] if head else None)
    return list(dict.fromkeys(bad))


ROOT = Path(sift.filters.__file__).parent


def _files() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def _module_of(path: Path) -> tuple[str, bool]:
    rel = path.relative_to(ROOT.parent.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def test_every_module_of_filters_is_checked() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in _files()}
    # a sanity floor, so that a broken glob cannot turn the check below into zero cases
    assert {"__init__.py", "profile.py", "fusion.py", "vectorize.py", "screening/cal.py"} <= names


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_filters_module_is_pure(path: Path) -> None:
    module, is_package = _module_of(path)
    assert violations(path.read_text(), module, is_package=is_package) == []


P = "sift.filters.profile"
# name -> (source, module the snippet is checked as, a text the report must contain: the
# reason the snippet is refused, so that each case pins the rule it is about)
VIOLATIONS = {
    "relative import of agents": ("from ..agents import service\n", P, "sift.agents.service not in"),
    "relative import from a subpackage": ("from ...agents import service\n", "sift.filters.screening.cal",
                                          "sift.agents.service not in"),
    "relative import in __init__": ("from .. import settings\n", "sift.filters.__init__", "sift.settings not in"),
    "relative import beyond the top": ("from .... import x\n", P, "beyond the top-level"),
    "from sift import names": ("from sift import errors, settings, agents, kafkaclient\n", P,
                               "sift.kafkaclient not in"),
    "sift.web": ("import sift.web.app\n", P, "import sift.web.app (not in"),
    "sift.observability": ("from sift.observability import REGISTRY\n", P, "sift.observability.REGISTRY not in"),
    "sift.filters look-alike": ("import sift.filterskit\n", P, "sift.filterskit (not in"),
    "importlib.import_module": ("import importlib\nm = importlib.import_module('faust')\n", P,
                                "importlib.import_module is"),
    "codecs.open": ("import codecs\nf = codecs.open('/etc/passwd')\n", P, "forbidden: codecs.open"),
    "np.load": ("import numpy as np\nx = np.load('x.npy')\n", P, "forbidden: numpy.load"),
    "np.save": ("import numpy as np\nnp.save('y', np.zeros(1))\n", P, "forbidden: numpy.save"),
    "ndarray.tofile": ("import numpy as np\nnp.zeros(1).tofile('z')\n", P, ".tofile"),
    "np.loadtxt": ("import numpy as np\nx = np.loadtxt('x.csv')\n", P, "forbidden: numpy.loadtxt"),
    "np.savetxt": ("import numpy\nnumpy.savetxt('x.csv', [1])\n", P, "forbidden: numpy.savetxt"),
    "np.genfromtxt": ("import numpy as np\nx = np.genfromtxt('x.csv')\n", P, "forbidden: numpy.genfromtxt"),
    "np.fromfile": ("from numpy import fromfile\nx = fromfile('x')\n", P, "forbidden: numpy.fromfile"),
    "np.load through getattr": ("import numpy as np\nx = getattr(np, 'load')('x')\n", P, "forbidden: numpy.load"),
    "sp.load_npz": ("import scipy.sparse as sp\nx = sp.load_npz('x.npz')\n", P,
                    "forbidden: scipy.sparse.load_npz"),
    "sp.save_npz via from-import": ("from scipy import sparse\nsparse.save_npz('x', None)\n", P,
                                    "forbidden: scipy.sparse.save_npz"),
    "scipy.io": ("from scipy.io import mmread\n", P, "forbidden: scipy.io"),
    "sklearn fetcher": ("from sklearn.datasets import fetch_20newsgroups\nfetch_20newsgroups()\n", P,
                        "forbidden: sklearn.datasets"),
    "sklearn.datasets via attribute": ("import sklearn\nsklearn.datasets.fetch_rcv1()\n", P,
                                       "sklearn.datasets.fetch_rcv1 is"),
    "builtins.open": ("import builtins\nbuiltins.open('x')\n", P, "builtins.open is"),
    "sys.stdout.write": ("import sys\nsys.stdout.write('x')\n", P, "sys.stdout.write is"),
    "posix": ("import posix\nfd = posix.open('x', 0)\n", P, "import posix (forbidden"),
    "_socket": ("import _socket\n", P, "import _socket (not in"),
    "linecache": ("import linecache\nlinecache.getline('/etc/passwd', 1)\n", P, "import linecache (forbidden"),
    "concurrent.futures": ("import concurrent.futures\n", P, "import concurrent.futures (not in"),
    "_thread": ("import _thread\n", P, "import _thread (not in"),
    "socketserver": ("import socketserver\n", P, "import socketserver (not in"),
    "xmlrpc": ("import xmlrpc.client\n", P, "import xmlrpc.client (not in"),
    "tomllib": ("import tomllib\n", P, "import tomllib (not in"),
    "faust": ("import faust\n", P, "import faust (not in"),
    "open": ("open('x')\n", P, "builtin open"),
    "print": ("print('x')\n", P, "builtin print"),
    "input": ("x = input()\n", P, "builtin input"),
    "exec": ("exec('1')\n", P, "builtin exec"),
    "eval": ("eval('1')\n", P, "builtin eval"),
    "__import__": ("m = __import__('os')\n", P, "builtin __import__"),
    "open kept as a value": ("reader = open\n", P, "builtin open"),
    "Path.read_text": ("def f(p):\n    return p.read_text()\n", P, ".read_text"),
    "inspect.getsource": ("import inspect\ninspect.getsource(inspect)\n", P, "forbidden: inspect.getsource"),
    "star import": ("from sift.filters.sparse import *\n", P, "cannot be checked"),
    "lazy import in a function": ("def f():\n    import socket\n    return socket\n", P, "import socket (not in"),
}

# (source, module) that must give no violation
CONTROLS = {
    "numpy": ("import numpy as np\nx = np.zeros(3)\n", P),
    "scipy.sparse": ("import scipy.sparse as sp\nX = sp.csr_matrix((2, 2))\n", P),
    "sibling, relative": ("from .rocchio import Rocchio\n", P),
    "sibling package, relative": ("from ..rocchio import Rocchio\n", "sift.filters.screening.cal"),
    "subpackage from __init__": ("from .screening import cal\n", "sift.filters.__init__"),
    "sift.errors": ("from sift.errors import SiftError\n", P),
    "from sift import errors": ("from sift import errors\n", P),
    "sklearn": ("from sklearn.preprocessing import normalize\n", P),
    "pure stdlib": ("import math, itertools\nfrom collections.abc import Sequence\n", P),
    "a method named load": ("class A:\n    def load(self):\n        return self\nA().load()\n",
                            P),
    "numpy.typing": ("from numpy.typing import NDArray\n", P),
    "getattr of a plain attribute": ("import numpy as np\nb = getattr(np, 'float64')\n", P),
    "a local named like a module": ("def f(sys):\n    return sys.stdout\n", P),
}


@pytest.mark.parametrize("name", sorted(VIOLATIONS))
def test_the_check_catches(name: str) -> None:
    source, module, reason = VIOLATIONS[name]
    is_package = module.endswith(".__init__")
    found = violations(source, module.removesuffix(".__init__"), is_package=is_package)
    assert any(reason in f for f in found), found


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_the_check_passes(name: str) -> None:
    source, module = CONTROLS[name]
    is_package = module.endswith(".__init__")
    assert violations(source, module.removesuffix(".__init__"), is_package=is_package) == []


def test_the_check_names_the_offending_import() -> None:
    found = violations("from sift import errors, settings\n", "sift.filters.profile")
    assert len(found) == 1 and "sift.settings" in found[0]
    found = violations("from ..agents import service\n", "sift.filters.profile")
    assert len(found) == 1 and "sift.agents" in found[0]
    found = violations("import numpy as np\n\n\nx = np.lib.npyio.load('x')\n", "sift.filters.x")
    assert found == ["sift.filters.x:4: np.lib.npyio.load is numpy.lib.npyio.load (forbidden: numpy.lib.npyio)"]
