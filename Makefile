# agentlog: every task a developer or CI runs. A fresh machine needs only
# python3 (3.11+), and for the Kafka tests java 17 and mvn.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast lint docs bench bench-quick kafka-jars clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

## demo: the crash-resume-approve demo on the embedded SQLite default
demo: $(STAMP)
	$(BIN)/agentlog demo

## kafka-jars: resolve the Apache Kafka broker jars from Maven Central (cached)
kafka-jars: $(STAMP)
	$(BIN)/python -c "import sys; sys.path.insert(0, 'scripts'); import kafka_broker; print(kafka_broker.ensure_jars())"

## test: every test; the Kafka broker and the S3 server are started by the fixtures
test: $(STAMP) kafka-jars
	$(BIN)/python -m pytest -p no:cacheprovider

## test-fast: everything but the crash tests and the Kafka and S3 suites
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not crash and not kafka and not s3"

## lint: ruff and mypy --strict
lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks scripts examples
	$(BIN)/ruff format --check src tests benchmarks scripts examples
	$(BIN)/mypy

## docs: the API reference, generated from the docstrings, in site/api/
docs: $(STAMP)
	rm -rf site/api
	$(BIN)/pdoc --docformat google --output-directory site/api \
		agentlog agentlog.runtime agentlog.eventlog agentlog.projector agentlog.archive agentlog.errors
	@echo "API reference: site/api/index.html"

## bench: every benchmark, one table (python -m benchmarks)
bench: $(STAMP) kafka-jars
	$(BIN)/python -m benchmarks

bench-quick: $(STAMP) kafka-jars
	$(BIN)/python -m benchmarks --quick

clean:
	rm -rf $(VENV) .cache .agentlog .pytest_cache .mypy_cache .ruff_cache site
