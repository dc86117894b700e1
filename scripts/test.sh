#!/usr/bin/env bash
# The project's test command: sets up what it needs (idempotent), then runs pytest.
#
#   scripts/test.sh                 # pytest -q -m "not slow" (integration tests included)
#   scripts/test.sh -m integration  # extra arguments go to pytest (a later -m wins)
#   SIFT_TEST_PROCESSES=0 scripts/test.sh   # in one process (no pytest-xdist)
#
# The tests run in parallel processes (pytest-xdist, a file's tests together in one
# process): SIFT_TEST_PROCESSES of them, by default one per CPU up to 4. Each process
# that reaches an integration test starts a broker of its own (free ports), so the
# processes share nothing but the machine. tests/conftest.py puts the files that wait on
# a broker first.
#
# Set-up: .venv (python3 -m venv), `pip install -e '.[test]'` when pyproject.toml changed,
# the Kafka jars (mvn, cached in .cache/kafka/libs). The integration tests start a local
# broker through their session fixture unless SIFT_BROKER points at one.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"

if [[ ! -x .venv/bin/python ]] || ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
  # (a venv left without pip, by a python3 -m venv that failed half-way, is made again)
  echo "test.sh: creating .venv with $("$PY" --version 2>&1)"
  "$PY" -m venv --clear .venv
fi
stamp=.venv/.sift-pyproject-sha256
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]] || ! .venv/bin/python -c 'import sift, pytest' 2>/dev/null; then
  echo "test.sh: pip install -e '.[test]'"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test]'
  echo "$want" > "$stamp"
fi
.venv/bin/python -m sift.devbroker fetch

procs="${SIFT_TEST_PROCESSES:-}"
if [[ -z "$procs" ]]; then
  procs="$(nproc 2>/dev/null || echo 1)"
  (( procs > 4 )) && procs=4
fi
if ! [[ "$procs" =~ ^[0-9]+$ ]]; then
  echo "test.sh: error: SIFT_TEST_PROCESSES must be a whole number (0: one process), got '$procs'" >&2
  exit 2
fi
parallel=()
if (( procs > 0 )); then
  parallel=(-n "$procs" --dist loadfile)
fi

set +e
.venv/bin/python -m pytest -q -m "not slow" "${parallel[@]}" "$@"
rc=$?
set -e
if [[ $rc -eq 5 ]]; then
  echo "test.sh: error: pytest collected no tests" >&2
  exit 1
fi
exit $rc
