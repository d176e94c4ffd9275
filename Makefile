# kubesched: `make run` (scheduler + local control plane + demo workload) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
CLUSTER_DIR ?= .cluster
SCHEDULER_NAME ?= kubesched
POLICY ?= examples/policies/seed-policy.json
PYTEST_ARGS ?=
# The development package (local control plane, fixtures) is not installed: it lives in hack/.
DEVPY := env PYTHONPATH=$(CURDIR)/hack $(BIN)/python

.PHONY: all venv k8s lint fmt test test-unit test-integration test-reliability run cluster-up cluster-down demo bench clean

all: test

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

venv: $(STAMP)

# kube-apiserver, kube-scheduler and kubectl 1.20.2, built once and cached outside the checkout.
k8s:
	bash hack/build-kubernetes.sh >/dev/null

lint: venv
	$(BIN)/ruff check operator hack tests bench
	$(BIN)/ruff format --check operator hack tests bench
	$(BIN)/mypy

fmt: venv
	$(BIN)/ruff format operator hack tests bench
	$(BIN)/ruff check --fix operator hack tests bench

test-unit: venv
	$(BIN)/pytest tests/unit -q $(PYTEST_ARGS)

test-integration: venv k8s
	$(BIN)/pytest tests/integration tests/e2e -q $(PYTEST_ARGS)

test: venv k8s lint
	$(BIN)/pytest tests -q -m "not slow" --durations=15 $(PYTEST_ARGS)

# Everything, the long variants marked `slow` included (failover with kube-scheduler's 15/10/2 s timings,
# the fault-injection suite at full size: tests/e2e/test_faults.py; -s prints its FAULT lines).
test-reliability: venv k8s
	$(BIN)/pytest tests -q --durations=15 $(PYTEST_ARGS)

cluster-up: venv k8s
	$(DEVPY) -m kubesched_dev.devcluster up --dir $(CLUSTER_DIR)

cluster-down: venv
	$(DEVPY) -m kubesched_dev.devcluster down --dir $(CLUSTER_DIR)

demo: cluster-up
	$(DEVPY) -m kubesched_dev.devcluster demo --kubeconfig $(CLUSTER_DIR)/kubeconfig --scheduler-name $(SCHEDULER_NAME)

# With KUBECONFIG set, schedule in that cluster; otherwise start a local control plane with a demo workload.
run: venv
ifdef KUBECONFIG
	$(BIN)/kubesched run --kubeconfig "$(KUBECONFIG)" --scheduler-name $(SCHEDULER_NAME) --policy-config-file $(POLICY)
else
	$(MAKE) --no-print-directory demo
	@echo "Local control plane: export KUBECONFIG=$(CURDIR)/$(CLUSTER_DIR)/kubeconfig (stop it with 'make cluster-down')"
	$(BIN)/kubesched run --kubeconfig $(CLUSTER_DIR)/kubeconfig --scheduler-name $(SCHEDULER_NAME) --policy-config-file $(POLICY)
endif

# kubesched vs kube-scheduler 1.20.2 vs a null binder (not part of `make test`; 30-45 minutes).
# BENCH_ARGS=--quick for a smoke run of a few minutes; see bench/README.md for the rest.
BENCH_ARGS ?=
bench: venv k8s
	@$(BIN)/python -c "import matplotlib" 2>/dev/null || $(BIN)/pip install -q -e '.[dev,bench]'
	$(DEVPY) bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
