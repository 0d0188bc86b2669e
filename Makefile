# Two entry points: `make run` (portal on embedded defaults) and `make test` (everything).
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON ?= python3

.PHONY: run test setup setup-test lint typecheck pytest bench clean

run: setup
	PORTAL_DEVELOPMENT=true $(BIN)/gpu-portal serve --seed --host 127.0.0.1 --port 8000

test: setup setup-test lint typecheck pytest

setup: $(VENV)/.installed static/vendor/htmx.min.js

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

static/vendor/htmx.min.js: scripts/fetch-assets.sh
	scripts/fetch-assets.sh

setup-test:
	scripts/system-deps.sh
	scripts/build-tools.sh

lint:
	$(BIN)/ruff check app tests bench migrations
	$(BIN)/ruff format --check app tests bench migrations

typecheck:
	$(BIN)/mypy --strict app

pytest:
	$(BIN)/pytest -q

bench: setup setup-test
	$(BIN)/python bench/portal_load.py

clean:
	rm -rf $(VENV) static/vendor .pytest_cache .mypy_cache .ruff_cache
