#!/usr/bin/env bash
# A local single-node Kafka broker (KRaft, no Docker) for sift development and tests.
#
#   scripts/kafka-local.sh fetch|start|stop|restart|status|logs|clean|config [--port 9092] ...
#
# Jars come from Maven Central (kafka/pom.xml) into .cache/kafka/libs; data lives in
# .cache/kafka/data-PORT. Then: export SIFT_BROKER=kafka://127.0.0.1:9092
# All the work is done by sift/devbroker.py (python -m sift.devbroker --help).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -x "$ROOT/.venv/bin/python" ]]; then
  PY="$ROOT/.venv/bin/python"
else
  PY="${PYTHON:-python3}"
fi
if [[ $# -eq 0 ]]; then
  set -- --help
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m sift.devbroker "$@"
