# sift: the streaming service's entry points. Each target sets up what it needs.
#   make demo    local Kafka broker, one worker, Reuters-21578 streamed with a simulated judge
#   make test    the default test run (unit, agents, integration against a local broker)
#   make bench   the streaming benchmarks (writes benchmarks/results/stream_*.json)
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.sift-pyproject-sha256

.PHONY: demo test bench setup jars lint clean-demo

$(VENV)/bin/python:
	$(PY) -m venv $(VENV)

setup: $(VENV)/bin/python
	@want=$$(sha256sum pyproject.toml | cut -d' ' -f1); \
	if [ ! -f $(STAMP) ] || [ "$$(cat $(STAMP))" != "$$want" ] || ! $(VENV)/bin/python -c 'import sift, faust, pytest' 2>/dev/null; then \
	  $(VENV)/bin/python -m pip install -q --upgrade pip && \
	  $(VENV)/bin/python -m pip install -q -e '.[test]' && echo "$$want" > $(STAMP); \
	fi

jars: setup
	@command -v java >/dev/null || { echo "make: install a Java 17 runtime (apt-get install openjdk-17-jre-headless)"; exit 1; }
	@command -v mvn >/dev/null || { echo "make: install Maven (apt-get install maven)"; exit 1; }
	$(VENV)/bin/python -m sift.devbroker fetch

demo: jars
	$(VENV)/bin/sift demo

test: jars
	bash scripts/test.sh

bench: jars
	$(VENV)/bin/python benchmarks/stream_bench.py

lint: setup
	$(VENV)/bin/ruff check sift/agents sift/kafkaclient.py sift/commands/worker.py \
	  sift/commands/produce.py sift/commands/profiles.py sift/commands/tail.py \
	  sift/commands/demo.py tests/agents tests/integration/test_service.py \
	  tests/integration/test_scaleout.py benchmarks/stream_bench.py

clean-demo:
	rm -rf .cache/demo
