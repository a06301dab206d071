# npuemu: `make run` runs the ported samples, `make test` the whole test suite,
# `make bench` the benchmarks. Each target sets up .venv on its own first.
#
# The package is installed editable: Python code runs from this tree (so `import acl` works from
# the repository root too), and the compiled kernels are rebuilt whenever a file of kernels_cpp/
# or the build settings change.
SHELL  := /bin/bash
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# PyTorch CPU is the optional reference of tests and benchmarks (never of `make run`); TORCH=0 skips it.
TORCH  ?= 1
NATIVE_SOURCES := $(shell find kernels_cpp toolkit emulator/native -type f -not -name '*.pyc') CMakeLists.txt pyproject.toml

.PHONY: all setup install run test bench clean

all: test

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet "scikit-build-core>=0.10" "pybind11>=2.12" cmake ninja numpy "pytest>=7"
	touch $@

$(VENV)/.torch: $(VENV)/.created
	@if [ "$(TORCH)" = "1" ]; then \
	  $(PIP) install --quiet torch==2.13.0 || echo "npuemu: PyTorch unavailable; its cross-checks will be skipped"; \
	fi
	touch $@

$(VENV)/.installed: $(VENV)/.created $(NATIVE_SOURCES) emulator/status.py emulator/dtypes.py aclnn_api/status.py
	$(PIP) install --quiet --no-build-isolation --editable .
	touch $@

setup: $(VENV)/.created

install: $(VENV)/.installed

# The Python samples, then the C++ ones built with the documentation's recipe against the toolkit.
run: install
	@set -e; for s in samples/*.py; do echo "== $$s"; $(PY) $$s; done
	@set -e; export PATH="$(CURDIR)/$(VENV)/bin:$$PATH"; source "$$(npuemu toolkit path)/set_env.sh"; \
	  rm -rf build/samples-cpp; mkdir -p build/samples-cpp; cd build/samples-cpp; \
	  cmake "$(CURDIR)/samples/cpp" -DCMAKE_CXX_COMPILER=g++ -DCMAKE_SKIP_RPATH=TRUE > cmake.log || { cat cmake.log; exit 1; }; \
	  make --no-print-directory > make.log || { cat make.log; exit 1; }; \
	  cd bin; for s in "$(CURDIR)"/samples/cpp/*.cpp; do echo "== samples/cpp/$${s##*/}"; ./"$$(basename "$$s" .cpp)"; done

# The suite runs on every core (pytest-xdist; at most 8 workers): on a 2-core CI machine that is
# about a third less time than one process. PYTEST_WORKERS=0 runs it in this process alone.
PYTEST_WORKERS ?= auto

$(VENV)/.test-tools: $(VENV)/.created
	$(PIP) install --quiet "pytest>=7" "pytest-xdist>=3"
	touch $@

test: install $(VENV)/.torch $(VENV)/.test-tools
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) --maxprocesses=8

bench: install $(VENV)/.torch
	$(PY) bench/run.py

clean:
	rm -rf build $(VENV) .pytest_cache
