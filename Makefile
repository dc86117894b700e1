# sift: the streaming service's entry points. Each target sets up what it needs.
#   make demo    local Kafka broker, one worker, Reuters-21578 streamed with a simulated judge
#   make test    the default test run (unit, agents, integration against a local broker)
#   make bench   the streaming benchmarks (writes benchmarks/results/stream_*.json)
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.sift-pyproject-sha256

.PHONY: demo test bench setup jars lint clean-demo

$(VENV)/bin/python:
	@$(PY) -c 'import ensurepip, venv' 2>/dev/null || { [ "$$(id -u)" = 0 ] && \
	  apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null; } || true
	$(PY) -m venv $(VENV)

setup: $(VENV)/bin/python
	@$(VENV)/bin/python -m pip --version >/dev/null 2>&1 || $(PY) -m venv --clear $(VENV)
	@want=$$(sha256sum pyproject.toml | cut -d' ' -f1); \
	if [ ! -f $(STAMP) ] || [ "$$(cat $(STAMP))" != "$$want" ] || ! $(VENV)/bin/python -c 'import sift, faust, pytest' 2>/dev/null; then \
	  $(VENV)/bin/python -m pip install -q --upgrade pip && \
	  $(VENV)/bin/python -m pip install -q -e '.[test]' && echo "$$want" > $(STAMP); \
	fi

# Java and Maven: installed with apt-get when missing and we are root (as .ci/run does).
jars: setup
	@need=""; command -v java >/dev/null || need="$$need openjdk-17-jre-headless"; \
	command -v mvn >/dev/null || need="$$need maven"; \
	if [ -n "$$need" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "make: apt-get install$$need"; apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$need >/dev/null; \
	  else echo "make: please install$$need (Java 17 and Maven fetch and run the broker)"; exit 1; fi; \
	fi
	$(VENV)/bin/python -m sift.devbroker fetch

demo: jars
	$(VENV)/bin/sift demo

test: jars
	bash scripts/test.sh

bench: jars
	$(VENV)/bin/python benchmarks/stream_bench.py

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy --strict sift

clean-demo:
	rm -rf .cache/demo
