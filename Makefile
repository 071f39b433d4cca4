# agentlog: every task a developer or CI runs. A fresh machine needs only
# python3 (3.11+), and for the Kafka tests java 17 and mvn.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-unit test-fast test-langgraph-oldest lint docs bench bench-quick bench-compare kafka-jars clean

# The oldest LangGraph the saver supports (pyproject's lower bounds), tested in a venv of its own.
# The SIGKILL test is left out there: langgraph < 1.2.16 reruns saved subgraph tasks (docs/langgraph.md).
OLD_VENV      := .venv-langgraph-oldest
OLD_STAMP     := $(OLD_VENV)/.installed
LANGGRAPH_OLD := langgraph==1.2.11 langgraph-checkpoint==4.2.0 langgraph-checkpoint-sqlite

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

$(OLD_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(OLD_VENV)
	$(OLD_VENV)/bin/pip install --quiet --upgrade pip
	$(OLD_VENV)/bin/pip install --quiet -e '.[dev]' $(LANGGRAPH_OLD)
	touch $(OLD_STAMP)

## demo: the crash-resume-approve demo on the embedded SQLite default
demo: $(STAMP)
	$(BIN)/agentlog demo

## kafka-jars: resolve the Apache Kafka broker jars from Maven Central (cached)
kafka-jars: $(STAMP)
	$(BIN)/python -c "import sys; sys.path.insert(0, 'scripts'); import kafka_broker; print(kafka_broker.ensure_jars())"

# The suites of `make test`: the whole tree, then the LangGraph saver's suites on the oldest langgraph.
SUITE_ALL    := $(BIN)/python -m pytest -p no:cacheprovider --durations=30
SUITE_OLDEST := $(OLD_VENV)/bin/python -m pytest -p no:cacheprovider tests/langgraph tests/langgraph/graphs \
	tests/archive/test_langgraph_threads.py tests/cli/test_langgraph_threads.py \
	--deselect tests/langgraph/graphs/test_crash.py::test_sigkill_mid_graph_then_resume

## test: every test; the Kafka broker and the S3 server are started by the fixtures.
## Both suites run to their end, and the target fails at the end if either failed.
test: $(STAMP) $(OLD_STAMP) kafka-jars
	scripts/run_suites.sh "$(SUITE_ALL)" "$(SUITE_OLDEST)"

## test-langgraph-oldest: the LangGraph saver's suites again on the oldest langgraph supported
test-langgraph-oldest: $(OLD_STAMP) kafka-jars
	$(SUITE_OLDEST)

## test-unit: every test on memory and SQLite that needs no service, no child process and is not slow
test-unit: $(STAMP)
	$(BIN)/python -m pytest -p no:cacheprovider --tier unit

## test-fast: every test that needs no service and is not slow (child processes allowed)
test-fast: $(STAMP)
	$(BIN)/python -m pytest -p no:cacheprovider --tier fast

## lint: ruff and mypy --strict
lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks scripts examples
	$(BIN)/ruff format --check src tests benchmarks scripts examples
	$(BIN)/mypy

## docs: the API reference, generated from the docstrings, in site/api/ (fails on any pdoc warning)
docs: $(STAMP)
	rm -rf site/api
	$(BIN)/python scripts/api_docs.py site/api

## bench: every benchmark, one table (python -m benchmarks)
bench: $(STAMP) kafka-jars
	$(BIN)/python -m benchmarks

bench-quick: $(STAMP) kafka-jars
	$(BIN)/python -m benchmarks --quick

## bench-compare: two results files side by side, e.g. make bench-compare BEFORE=old.json AFTER=new.json
bench-compare: $(STAMP)
	$(BIN)/python -m benchmarks.compare $(BEFORE) $(AFTER)

clean:
	rm -rf $(VENV) $(OLD_VENV) .cache .agentlog .pytest_cache .mypy_cache .ruff_cache site
