PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv test test-sdk-oldest fwenvs lint demo bench stress clean compiled-venv test-compiled

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP) fwenvs
	$(PY) -m pytest -q tests
	$(MAKE) test-sdk-oldest

# The live processor's tests against the oldest supported opentelemetry-sdk, in a venv of their own
# (cached outside the repo, keyed by the pins' hash; the package itself comes from src/). SDKs before
# 1.45 drop dict-valued attributes, so the tests of them are deselected (not skipped: CI fails skips).
SDK_OLDEST_PINS := .ci/sdk-oldest.txt
SDK_OLDEST_VENV := $(HOME)/.cache/spanassert/venvs/sdk-1.40-$(shell sha256sum $(SDK_OLDEST_PINS) | cut -c1-12)
LIVE_TESTS := tests/test_sdk_version.py tests/test_live_sdk.py tests/test_processor_live.py tests/test_processor_background.py \
	tests/test_processor_outputs.py tests/test_live_timing.py tests/test_conventions_live.py \
	tests/stress/test_live_hardening.py tests/stress/test_faults_processor.py

test-sdk-oldest:
	mkdir -p $(dir $(SDK_OLDEST_VENV))
	flock $(dir $(SDK_OLDEST_VENV)).lock sh -c 'test -f $(SDK_OLDEST_VENV)/.complete || { \
	  rm -rf $(SDK_OLDEST_VENV) && $(PYTHON) -m venv $(SDK_OLDEST_VENV) && \
	  $(SDK_OLDEST_VENV)/bin/python -m pip install -q --upgrade pip && \
	  $(SDK_OLDEST_VENV)/bin/python -m pip install -q -r $(SDK_OLDEST_PINS) && touch $(SDK_OLDEST_VENV)/.complete; }'
	PYTHONPATH=src SPANASSERT_EXPECT_SDK=1.40.0 $(SDK_OLDEST_VENV)/bin/python -m pytest -q -p no:spanassert -p spanassert.pytest_plugin -m 'not needs_dict_attributes' \
	  --deselect 'tests/test_conventions_live.py::test_convention_gives_the_episode_its_calls_and_arguments[otel-genai-structured]' \
	  $(LIVE_TESTS)

# The guard adapters' framework envs (.ci/frameworks/<name>.txt -> ~/.cache/spanassert/venvs/<name>-<sha12>),
# built once and cached, before the tests that run a framework's agent in them. A build that fails here is not
# fatal: those tests then skip with the reason (and fail under CI=true, tests/conftest.py).
fwenvs: $(STAMP)
	-$(PY) tests/fwenv.py build

# ruff + mypy --strict over src/: zero findings (.ci/lint.py).
lint: $(STAMP)
	$(PY) .ci/lint.py

demo: $(STAMP)
	$(PY) examples/demo.py

# The compiled build (mypyc, build_support/compiled_modules.py lists the modules): a venv of its own with
# spanassert compiled and its test extra, cached outside the repo (~/.cache/spanassert/venvs/compiled-*),
# keyed by the hash of the sources and build files, the Python version and the mypy pin, built on a copy of
# the tree (never into src/). A few minutes the first time; `SPANASSERT_PURE=1` is for installs, not here.
compiled-venv:
	$(PYTHON) build_support/compiled_venv.py

# The whole suite against the compiled build (tests/test_build.py checks that it is compiled and of this
# source). Opt-in until every module of the engine compiles and passes (issue 15).
test-compiled: compiled-venv fwenvs
	V="$$($(PYTHON) build_support/compiled_venv.py --path)" && \
	  flock -s "$$V.inuse" env SPANASSERT_EXPECT_COMPILED=1 "$$V/bin/python" -m pytest -q tests

# Every row in the pure build (the editable venv); every row whose work runs through compiled modules again
# in the compiled build beside them (each row says which build it measured; without a compiler, pure rows only).
bench: $(STAMP)
	-$(MAKE) compiled-venv
	V="$$($(PYTHON) build_support/compiled_venv.py --path)" && mkdir -p "$$(dirname "$$V")" && \
	  flock -s "$$V.inuse" env SPANASSERT_BENCH_COMPILED="$$V" $(PY) benchmarks/run.py

stress: $(STAMP)
	$(PY) -m pytest -q tests/stress --stress-full

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
