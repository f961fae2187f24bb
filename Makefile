# ctxwin — everything runs from a local virtualenv (.venv), created on demand. Each target
# installs only what it needs: ctxwin and its runtime dependencies (typer, rich, orjson)
# for `make demo`, plus the test group for `make test`, the lint group for `make lint`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP      := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
LINT_STAMP := $(VENV)/.installed-lint

.DEFAULT_GOAL := help
.PHONY: help venv demo test lint format clean bench bench-proxy bench-estimators bench-telemetry fidelity fuzz fuzz-proxy slow docs

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

# ctxwin alone (editable) with its runtime dependencies; pip 25.1 or later reads
# [dependency-groups] for the stamps below.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=25.1"
	$(BIN)/python -m pip install --quiet -e .
	@touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --group test
	@touch $(TEST_STAMP)

$(LINT_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --group lint
	@touch $(LINT_STAMP)

venv: $(TEST_STAMP) $(LINT_STAMP) ## Create .venv with ctxwin and its dev tools (test and lint groups)

demo: $(STAMP) ## Run ctxwin on the example agent run (installs ctxwin's runtime only)
	@echo '$$ ctxwin estimate examples/agent-run.json'
	@$(BIN)/ctxwin estimate examples/agent-run.json
	@echo
	@echo '$$ ctxwin estimate examples/agent-run.json --context-length 16000'
	@$(BIN)/ctxwin estimate examples/agent-run.json --context-length 16000
	@echo
	@echo '$$ ctxwin prune examples/agent-run.json examples/agent-run.pruned.json --context-length 16000'
	@$(BIN)/ctxwin prune examples/agent-run.json examples/agent-run.pruned.json --context-length 16000
	@echo
	@echo '$$ ctxwin estimate examples/agent-run.pruned.json --context-length 16000 --json'
	@$(BIN)/ctxwin estimate examples/agent-run.pruned.json --context-length 16000 --json

test: $(TEST_STAMP) ## Run the test suite (installs the test group)
	$(BIN)/python -m pytest

fuzz: $(TEST_STAMP) ## Fuzz the CLI with 10,000 mutated transcripts and the session readers with damaged samples; time hostile bodies of 1-8 MiB
	CTXWIN_FUZZ_EXAMPLES=$${CTXWIN_FUZZ_EXAMPLES:-10000} $(BIN)/python -m pytest tests/test_fuzz.py tests/test_fuzz_sessions.py -s -q
	CTXWIN_LINEAR_MAX_BYTES=$${CTXWIN_LINEAR_MAX_BYTES:-8388608} $(BIN)/python -m pytest tests/test_linear.py -s -q

fuzz-proxy: $(TEST_STAMP) ## Replay the known attacks on `ctxwin proxy` against a stand-in upstream on 127.0.0.1
	$(BIN)/python -m tests.proxy_attacks

slow: $(TEST_STAMP) ## Slow tests: SIGKILL in the middle of a 200 MB prune (not part of `make test`)
	CTXWIN_SLOW=1 $(BIN)/python -m pytest tests/test_kill.py -q

lint: $(TEST_STAMP) $(LINT_STAMP) ## ruff + mypy --strict (installs the lint group; mypy reads the tests' packages too)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

docs: $(TEST_STAMP) ## Rewrite docs/cli.md (--help) and every figure of README.md and docs/ (tests/figures.py)
	$(BIN)/python -m tests.docs_support

format: $(LINT_STAMP) ## Apply ruff's fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(TEST_STAMP) bench-proxy bench-estimators bench-telemetry ## Benchmark ctxwin vs the orjson floor and peers (BENCH_ARGS="--sizes 1k,10k,100k,1M")
	$(BIN)/python bench/run.py $(BENCH_ARGS)

bench-estimators: $(TEST_STAMP) ## The default bound vs --estimator content: prune, check, estimate (ESTIMATOR_BENCH_ARGS="--reps 5")
	$(BIN)/python bench/estimators.py $(ESTIMATOR_BENCH_ARGS)

bench-telemetry: $(TEST_STAMP) ## What seeing a fit costs: logs and spans against the fit alone (TELEMETRY_BENCH_ARGS="--rounds 5")
	$(BIN)/python bench/telemetry.py --out bench/telemetry-results.md $(TELEMETRY_BENCH_ARGS)

bench-proxy: $(TEST_STAMP) ## Load test of `ctxwin proxy` on loopback (PROXY_BENCH_ARGS="--turns 30,300")
	$(BIN)/python bench/proxy.py --out bench/proxy-results.md $(PROXY_BENCH_ARGS)

FIDELITY_STAMP := $(VENV)/.installed-fidelity

$(FIDELITY_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --group fidelity
	@touch $(FIDELITY_STAMP)

fidelity: $(FIDELITY_STAMP) ## Estimate ÷ real tokens per class, transcript, provider call
	$(BIN)/python -m fidelity.provider --out fidelity/provider.md
	$(BIN)/python -m fidelity.run --out fidelity/results.md
	$(BIN)/python -m fidelity.adversarial --out fidelity/adversarial.md
	$(BIN)/python -m fidelity.strategies --out fidelity/strategies.md
	$(BIN)/python -m fidelity.compare --out fidelity/compare.md

clean: ## Remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build *.egg-info
