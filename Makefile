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

# pytest exit 5 = no tests collected (e.g. a PYTEST_ARGS selection that matches nothing): not a failure.
# --durations=15: the slowest tests are listed, so the suite's time (kept under ~15 min) can be watched in CI logs.
# pytest-xdist: one worker per core (at most 4; PYTEST_WORKERS=0 runs in this process alone)
PYTEST_WORKERS ?= auto
test-python: setup
	@$(BIN)/python -m pytest -q --durations=15 -n $(PYTEST_WORKERS) --maxprocesses=4 $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest: no tests were collected (exit 5)"; exit 0; fi; exit $$rc

bench: setup
	$(BIN)/python -m evals.bench.kernels

clean:
	rm -rf build native/build decoding/*.so

# issue 17 (docs/scale-out.md): llama.cpp's tools/server built from the llama.cpp sources vendored in the
# llama-cpp-python 0.3.36 sdist, with Debian's cmake (/usr/bin/cmake; apt-get install cmake if missing,
# never a CMake built from source), once per machine into LLAMA_SERVER_CACHE, at nice 15. Nothing is
# downloaded: the sdist is LLAMA_CPP_SDIST, else found under ~/.cache/pip or /tmp; without it the target
# says how to get it and fails. tests/test_upstream_llama_server.py runs the binary (skips without it).
LLAMA_CPP_VERSION ?= 0.3.36
LLAMA_SERVER_CACHE ?= $(HOME)/.cache/guarded-decoding/llama-server-$(LLAMA_CPP_VERSION)
LLAMA_CPP_SDIST ?=
.PHONY: llama-server
llama-server:
	@set -e; out="$(LLAMA_SERVER_CACHE)"; \
	if [ -x "$$out/bin/llama-server" ]; then echo "llama-server: $$out/bin/llama-server (built before)"; exit 0; fi; \
	sdist="$(LLAMA_CPP_SDIST)"; \
	[ -n "$$sdist" ] || sdist=$$(find $(HOME)/.cache/pip /tmp -name "llama_cpp_python-$(LLAMA_CPP_VERSION).tar.gz" 2>/dev/null | head -1); \
	if [ -z "$$sdist" ] || [ ! -f "$$sdist" ]; then \
	  echo "llama-server: the llama-cpp-python $(LLAMA_CPP_VERSION) sdist is not on this machine (looked in ~/.cache/pip and /tmp)."; \
	  echo "  get it with: pip download --no-deps --no-binary :all: llama-cpp-python==$(LLAMA_CPP_VERSION) -d /tmp"; \
	  echo "  (or curl -sSLO its URL from https://pypi.org/project/llama-cpp-python/$(LLAMA_CPP_VERSION)/#files)"; \
	  echo "  then: make llama-server LLAMA_CPP_SDIST=/tmp/llama_cpp_python-$(LLAMA_CPP_VERSION).tar.gz"; exit 2; fi; \
	[ -x /usr/bin/cmake ] || { echo "installing Debian's cmake"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake >/dev/null; }; \
	src=$$(mktemp -d); trap 'rm -rf "$$src"' EXIT; tar -xzf "$$sdist" -C "$$src"; \
	root=$$(ls -d "$$src"/*/vendor/llama.cpp); [ -d "$$root/tools/server" ] || { echo "llama-server: no tools/server in $$sdist"; exit 2; }; \
	start=$$(date +%s); \
	nice -n 15 /usr/bin/cmake -S "$$root" -B "$$src/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
	  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF >/dev/null; \
	nice -n 15 /usr/bin/cmake --build "$$src/build" --target llama-server -j$$(nproc); \
	mkdir -p "$$out/bin"; cp "$$src/build/bin/llama-server" "$$out/bin/llama-server.tmp"; mv "$$out/bin/llama-server.tmp" "$$out/bin/llama-server"; \
	echo "llama-server built in $$(( $$(date +%s) - start )) s with $$(/usr/bin/cmake --version | head -1) on $$(nproc) cores: $$out/bin/llama-server"
