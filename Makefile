# Each command does all set-up on a fresh machine:
#   make book   venv + install + offline assets + fine-tuning (cached) + notebooks (papermill) + static site
#   make site   the same for every preset of the README's scorecard, in one site and one runs/ (resumable: a killed
#               build picks up at the step it lost; each step's time in runs/timings.csv)
#   make test   venv + install + the whole test suite (what .ci/run calls)
#   make lab    venv + install + offline assets, then JupyterLab on this folder (live notebooks, sliders)
#   make test-fast   ruff, mypy, then the tests not marked slow, offline (the developer loop)
#   make publish     the built site onto the gh-pages branch (PUSH=1 pushes it to origin; GitHub Pages serves it)
#   make dist        dist/headlab-book-<commit>.zip: the site, runs/ tables, executed notebooks and a manifest
#                    (BOOK_DIR=, RUN_DIR=: another build's folders, e.g. benchmarks/gpu_book.sh's gpu-out/site)
# Options: make book PRESET=tiny      quick tiny-sized book
#          make book SET="DEVICE=cuda HALF_DRAWS=50"   any notebook parameter, for every notebook that declares it
#          make book TORCH="torch==2.14.1"        another torch build (e.g. a CUDA one on a GPU machine)
#          make book PRESET=mpnet TORCH="torch==2.14.1"   the 12x12 all-mpnet-base-v2 on a GPU
#          make book MODEL=zh-char    pretrain a 12x12 character-level Chinese BERT, run the book on it
#                                     (the same as PRESET=zh-char; zh-char-mlm: pretrained without NSP)
#          make book PRESET=e5-zh     multilingual-e5-small on Chinese STS-B (e5-en: on English STS-B)
#          make book PRESET=e5-zh-char   the same reading Chinese one character per token
#          make book PRESETS="default zh-char"   one site: each preset's pages, the scorecard across them first
#          make book MODEL=path/or/hub-id   any other model, on the default data and sizes
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
TORCH_INDEX ?=   # where torch comes from (e.g. https://download.pytorch.org/whl/cpu: a CPU build on a CI runner)
MODEL ?=
CHINESE_PRESETS := zh-char zh-char-mlm
PRESET ?= $(if $(filter $(CHINESE_PRESETS),$(MODEL)),$(MODEL),default)
PRESETS ?= $(PRESET)
SITE_PRESETS := default zh-char e5-zh e5-en e5-zh-char
SET ?=
ASSETS ?= minilm stsb-en $(if $(filter mpnet,$(PRESETS)),mpnet) \
	$(if $(filter $(CHINESE_PRESETS) e5-zh e5-zh-char,$(PRESETS)),pku-1998 stsb-zh) \
	$(if $(filter e5-zh e5-en,$(PRESETS)),e5-small) $(if $(filter e5-zh-char,$(PRESETS)),e5-small-char)
BIN := $(VENV)/bin
BOOK_DIR ?= book
RUN_DIR ?= runs

.PHONY: book site test test-fast lab venv assets clean publish dist

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-compile "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install --quiet --no-compile -e ".[dev]"
	touch $@

venv: $(VENV)/.installed

assets: venv
	$(BIN)/python -m headlab.inputs fetch $(ASSETS)
	$(BIN)/python -m headlab.report

# the whole `make book` is timed from here (venv, install, assets, notebooks, site: runs/timings.csv)
book: export HEADLAB_MAKE_STARTED := $(shell date +%s)
book: assets
	$(BIN)/python -m headlab.book --presets $(PRESETS) $(if $(MODEL),--set MODEL=$(MODEL)) $(foreach s,$(SET),--set $(s))

site:
	$(MAKE) book PRESETS="$(SITE_PRESETS)"

lab: assets
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/notebooks \
	    --LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
	    $(if $(filter 0,$(shell id -u)),--allow-root)

test: venv
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy
	@command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
	$(BIN)/python -m pytest

# the developer loop: lint, format and type checks (pyproject.toml's [tool.ruff] and [tool.mypy], fail fast), then
# the tests not marked slow (no asset, book build or browser), offline, on an empty cache
test-fast: venv
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy
	HEADLAB_NO_NETWORK=1 $(BIN)/python -m pytest -m "not slow"

publish: venv
	$(BIN)/python -m tools.publish pages --book $(BOOK_DIR) $(if $(filter 1,$(PUSH)),--push)

dist: venv
	$(BIN)/python -m tools.publish dist --book $(BOOK_DIR) --runs $(RUN_DIR)

clean:
	rm -rf book/_build book/executed book/_extra runs dist
