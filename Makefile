# fedmem: `make run` starts everything on this machine, `make test` runs every check.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of torch; set TORCH_INDEX="--index-url https://download.pytorch.org/whl/cpu"
# on machines whose default index would hand out a CUDA build.
TORCH_INDEX ?=

.PHONY: install run test lint format clean-data

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0 $(TORCH_INDEX)
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

run: install
	$(BIN)/python manage.py fedmem_run

test: install
	PATH="$(abspath $(BIN)):$$PATH" scripts/test.sh

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean-data:
	rm -rf var
