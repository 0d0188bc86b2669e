# Two entry points: `make run` (portal on embedded defaults) and `make test` (everything).
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON ?= python3

.PHONY: run test setup setup-test lint typecheck layers pytest bench lock clean screenshots

run: setup
	PORTAL_DEVELOPMENT=true PORTAL_SIMULATED_CLUSTER_GPUS=2 PORTAL_SIMULATED_EXAMPLE_WORK=true $(BIN)/gpu-portal serve --seed --host 127.0.0.1 --port 8000

# Lint, types, layers and the tests that need no Go tool run while the tools build.
test: setup
	scripts/system-deps.sh
	VENV=$(VENV) scripts/test.sh

setup: $(VENV)/.installed static/vendor/.fetched

# Exactly the versions in requirements-dev.lock, checked against their hashes; then the
# portal itself, editable. `make lock` updates the lock files after pyproject.toml changes
# (keeping other pins); `make lock UPGRADE=--upgrade` moves every pin to the newest release.
$(VENV)/.installed: pyproject.toml requirements-dev.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes -r requirements-dev.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

static/vendor/.fetched: scripts/fetch-assets.sh
	scripts/fetch-assets.sh

setup-test:
	scripts/system-deps.sh
	scripts/build-tools.sh

lint:
	$(BIN)/ruff check app tests bench migrations scripts
	$(BIN)/ruff format --check app tests bench migrations

layers:
	$(BIN)/lint-imports

typecheck:
	$(BIN)/mypy --strict app tests bench

pytest:
	$(BIN)/pytest -q

bench: setup setup-test
	$(BIN)/python bench/portal_load.py

screenshots: setup setup-test
	$(BIN)/python bench/screenshots.py

lock: $(VENV)/.installed
	$(BIN)/uv pip compile pyproject.toml --python-version 3.11 --generate-hashes $(UPGRADE) --quiet -o requirements.lock
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 --generate-hashes $(UPGRADE) --quiet -o requirements-dev.lock

clean:
	rm -rf $(VENV) static/vendor .pytest_cache .mypy_cache .ruff_cache
