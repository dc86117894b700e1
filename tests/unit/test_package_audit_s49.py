"""sift installed as a package, not run from a source checkout (forty-ninth session's
packaging audit, /tmp/s49/pkg.md).

An installed package has no ``data/`` and no ``kafka/pom.xml`` beside it. The tests that
need the installed layout copy the package's sources into a folder of their own (a
stand-in for site-packages: no build, no install) and run Python there, from another
working directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import sift
from sift import devbroker
from sift.devbroker import BrokerError, DevBroker, free_port

PACKAGE = Path(sift.__file__).resolve().parent
ROOT = PACKAGE.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(site, run)``: the package copied alone into ``site`` (as a wheel installs it: its
    modules and py.typed, nothing of the checkout around it), and an empty working
    directory ``run`` elsewhere."""
    base = tmp_path_factory.mktemp("installed")
    site, run = base / "site-packages", base / "run"
    shutil.copytree(PACKAGE, site / "sift", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    run.mkdir()
    return site, run


def _python(site: Path, run: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIFT_")}
    env["PYTHONPATH"] = str(site)  # ahead of the checkout's editable install
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run([sys.executable, *args], cwd=run, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if "__pycache__" not in p.parts)


def test_the_copy_is_what_python_imports(installed: tuple[Path, Path]) -> None:
    """The stand-in works: Python imports the copy, not the checkout."""
    site, run = installed
    res = _python(site, run, "-S", "-c", "import sift; print(sift.__file__)")
    assert res.returncode == 0, res.stderr
    assert Path(res.stdout.strip()).parent == site / "sift"


# ------------------------------------------------------------------- the local broker
def test_installed_local_broker_cache_is_not_inside_the_installation(
        installed: tuple[Path, Path]) -> None:
    """The local broker's jar cache and data dirs were ``<sift>/../.cache/kafka``: in an
    installed package, a folder ``.cache`` made inside site-packages (by ``sift demo``
    and ``python -m sift.devbroker``, before they failed on the missing pom; on a
    system-wide install, a permission error instead). Outside a checkout the default is
    ``.cache/kafka`` in the working directory, as the worker's ``.cache/sift-worker``."""
    site, run = installed
    res = _python(site, run, "-S", "-c",
                  "from sift.devbroker import DevBroker, DEFAULT_CACHE; "
                  "print(DEFAULT_CACHE); print(DevBroker(port=39592, controller_port=39593).data)")
    assert res.returncode == 0, res.stderr
    cache, data = (Path(line) for line in res.stdout.split())
    assert site not in (run / cache).resolve().parents
    assert (run / cache).resolve() == run / ".cache" / "kafka"
    assert data == run / ".cache" / "kafka" / "data-39592"


def test_checkout_local_broker_cache_is_unchanged() -> None:
    """In a source checkout (kafka/pom.xml beside the package) the cache stays where the
    scripts, the Makefile and CI expect it."""
    assert (ROOT / "kafka" / "pom.xml").is_file()
    assert devbroker.DEFAULT_CACHE == ROOT / ".cache" / "kafka"
    assert devbroker.default_cache(ROOT) == ROOT / ".cache" / "kafka"


def test_default_cache_without_a_pom_is_relative_to_the_working_directory(tmp_path: Path) -> None:
    assert devbroker.default_cache(tmp_path) == Path(".cache") / "kafka"
    (tmp_path / "kafka").mkdir()
    (tmp_path / "kafka" / "pom.xml").write_text("<project/>")
    assert devbroker.default_cache(tmp_path) == tmp_path / ".cache" / "kafka"


def test_local_broker_without_its_pom_says_what_to_set_and_creates_nothing(tmp_path: Path) -> None:
    """``start`` took its data dir's lock (making ``<cache>/data-<port>/.lock``) before it
    found the pom missing, and then said only that the pom "ships with the sift repo":
    nothing about a broker of one's own (``SIFT_BROKER``), which is what a package user
    needs (``sift demo`` starts a local broker unless it is set)."""
    port = free_port()
    broker = DevBroker(port=port, controller_port=free_port(), cache_dir=tmp_path / "cache",
                       pom=tmp_path / "kafka" / "pom.xml")
    with pytest.raises(BrokerError) as exc:
        broker.start(timeout=5.0)
    message = str(exc.value)
    assert "\n" not in message
    assert "SIFT_BROKER" in message and "source checkout" in message
    assert _files(tmp_path) == []
    with pytest.raises(BrokerError, match="SIFT_BROKER"):
        broker.fetch()
    assert _files(tmp_path) == []


# --------------------------------------------------------- commands without bundled data
def _error_line(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 1, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr  # one line, no traceback
    return lines[0]


def test_installed_replay_without_data_names_the_options(installed: tuple[Path, Path]) -> None:
    """``sift replay`` with no arguments, installed: the bundled Reuters files are not there.
    It said "run from the repository root", which a package user does not have."""
    site, run = installed
    line = _error_line(_python(site, run, "-m", "sift.cli", "replay", "--no-plot"))
    assert line.startswith("sift replay: error: ")
    assert "--train" in line and "--test" in line
    assert "repository root" not in line and "source checkout" in line
    assert _files(run) == []


def test_installed_demo_without_data_names_the_options(installed: tuple[Path, Path]) -> None:
    """``sift demo``, installed: it named a file inside site-packages
    (``.../site-packages/data/reuters21578/train.jsonl.gz: no such file``), not the
    options that replace it."""
    site, run = installed
    line = _error_line(_python(site, run, "-m", "sift.cli", "demo"))
    assert line.startswith("sift demo: error: ")
    assert "--train" in line and "--test" in line and "source checkout" in line
    assert not (site / ".cache").exists() and not (run / ".cache").exists()


def test_installed_demo_review_without_data_is_one_plain_line(installed: tuple[Path, Path]) -> None:
    """``sift demo --review Donners_2021``, installed: "[Errno 2] No such file or
    directory: '.../site-packages/data/screening/reviews.json'"."""
    site, run = installed
    line = _error_line(_python(site, run, "-m", "sift.cli", "demo", "--review", "Donners_2021"))
    assert line.startswith("sift demo: error: --review ")
    assert "Errno" not in line and "source checkout" in line
    assert "sift screen --data" in line  # what works with the package instead


def test_checkout_demo_review_names_the_sets() -> None:
    """In the checkout an unknown set still lists the bundled ones."""
    import argparse

    from sift.commands import demo
    from sift.errors import SiftError

    args = argparse.Namespace(review="No_such_set", target_recall=0.95)
    with pytest.raises(SiftError, match="Donners_2021"):
        demo.run_review(args)


# --------------------------------------------------------------------- what is packaged
def test_every_package_folder_is_a_package_and_every_data_file_is_declared() -> None:
    """A guard (no defect found): the wheel takes the folders with an ``__init__.py``
    (``packages.find``) and, of other files, only what ``package-data`` lists. A new
    subfolder without one, or a new non-Python file the code reads, would be left out of
    the wheel silently while every test run from the checkout passes."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = set(config["tool"]["setuptools"]["package-data"]["sift"])
    for folder in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir())]:
        if folder.name == "__pycache__":
            continue
        if any(folder.glob("*.py")):
            assert (folder / "__init__.py").is_file(), f"{folder}: not a package, left out of the wheel"
        for f in folder.iterdir():
            if f.is_file() and f.suffix not in (".py", ".pyc"):
                assert str(f.relative_to(PACKAGE)) in declared, f"{f}: not in package-data"
