#!/usr/bin/env bash
# Run one test N times in a row (each in its own basetemp, kept when it fails) and
# print one line per run: how the looped kill -9 figures in docs/reliability.md were
# counted.
#   bash benchmarks/loop_test.sh 13 tests/reliability/test_crash.py::test_worker_sigkill_mid_stream_5000
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
n="${1:?number of runs}"; test_id="${2:?pytest node id}"
out="${LOOP_DIR:-/tmp/sift-loop}"; mkdir -p "$out"
pass=0
for i in $(seq 1 "$n"); do
  start=$(date +%s)
  rm -rf "$out/bt$i"
  .venv/bin/python -m pytest "$test_id" -x -q -rA -p no:cacheprovider --basetemp="$out/bt$i" \
    > "$out/run$i.log" 2>&1
  rc=$?
  if [[ $rc -eq 0 ]]; then pass=$((pass + 1)); rm -rf "$out/bt$i"; fi
  echo "run $i rc=$rc $(( $(date +%s) - start ))s $(tail -1 "$out/run$i.log")"
done
echo "$pass of $n passed (logs and failed runs' worker dirs in $out)"
