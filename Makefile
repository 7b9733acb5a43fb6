# The two commands a newcomer types (see README.md):
#   make lab    set up .venv if needed, then open JupyterLab on notebooks/
#   make test   set up .venv if needed, then run the whole test suite
# and the edit-test loop:
#   make quick  lint, contracts and the tests without browser, notebooks, slow zoo saves or
#               spawned torch.distributed runs
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.tensorviz-installed

.PHONY: lab test quick lint bench gallery notebooks browser-deps clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test,lab]'
	touch $@

# As root (containers, CI machines) JupyterLab refuses to start without --allow-root.
lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/ $$([ "$$(id -u)" = 0 ] && echo --allow-root)

# Lint, format, layer contracts and types first, then the tests.
test: $(STAMP)
	$(BIN)/ruff check tensorviz tests bench tools docs
	$(BIN)/ruff format --check tensorviz tests bench tools docs
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python -m pytest
	if command -v node >/dev/null 2>&1; then node --test tests/js/; else echo "skipped tests/js: node is not installed (the canvas geometry tests need node >= 18)"; fi

# The edit-test loop: the same checks, minus Chromium, the notebooks, the real-save zoo and the
# spawned torch.distributed worlds (markers in pyproject.toml).
quick: $(STAMP)
	$(BIN)/ruff check tensorviz tests bench tools docs
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -m "not browser and not notebooks and not slow and not spawn"

# Fix what ruff can fix and format the code.
lint: $(STAMP)
	$(BIN)/ruff check --fix tensorviz tests bench tools docs
	$(BIN)/ruff format tensorviz tests bench tools docs

bench: $(STAMP)
	for f in bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

gallery: $(STAMP)
	$(BIN)/python docs/make_gallery.py
	$(BIN)/python docs/make_tree_gallery.py

notebooks: $(STAMP)
	$(BIN)/python tools/build_notebooks.py
	$(BIN)/python tools/run_notebooks.py

# Headless Chromium for the real-browser test (Debian's package; Playwright drives it), and
# node for the front-end's unit tests (node --test).
browser-deps:
	command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null; }
	command -v node >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs >/dev/null; }

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
