# kubesched: `make run` (scheduler + local control plane + demo workload) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# The lock: every install (dev venv, bench, image) takes its versions from it; `make lock` refreshes it.
CONSTRAINTS := requirements/constraints.txt
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(CONSTRAINTS) | sha1sum | cut -c1-12)
CLUSTER_DIR ?= .cluster
SCHEDULER_NAME ?= kubesched
POLICY ?= examples/policies/seed-policy.json
PYTEST_ARGS ?=
# The development package (local control plane, fixtures) is not installed: it lives in hack/.
DEVPY := env PYTHONPATH=$(CURDIR)/hack $(BIN)/python

.PHONY: all venv k8s lint fmt docs docs-check test test-unit test-integration test-reliability run cluster-up cluster-down demo bench soak clean

all: test

$(STAMP): pyproject.toml $(CONSTRAINTS)
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c $(CONSTRAINTS) pip
	$(BIN)/pip install -q -c $(CONSTRAINTS) -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

venv: $(STAMP)

# kube-apiserver, kube-scheduler and kubectl 1.20.2, built once and cached outside the checkout.
k8s:
	bash hack/build-kubernetes.sh >/dev/null

# promtool checks the monitoring kit's alert rules and dashboard queries (tests/unit/test_monitoring_kit.py);
# Debian ships it in the prometheus package, with a server the tests do not use (systemd hosts start it).
.PHONY: promtool
promtool:
	@command -v promtool >/dev/null || (apt-get update && apt-get install -y --no-install-recommends prometheus)

lint: venv
	$(BIN)/ruff check operator hack tests bench
	$(BIN)/ruff format --check operator hack tests bench
	$(BIN)/mypy

fmt: venv
	$(BIN)/ruff format operator hack tests bench
	$(BIN)/ruff check --fix operator hack tests bench

test-unit: venv
	$(BIN)/pytest tests/unit -q $(PYTEST_ARGS)

test-integration: venv k8s promtool
	$(BIN)/pytest tests/integration tests/e2e -q $(PYTEST_ARGS)

# The docs site (mkdocs.yml, docs/) into site/. The reference pages and the benchmark table are
# generated from the code as it builds (hack/kubesched_dev/docs.py).
MKDOCS := env PYTHONPATH=$(CURDIR)/hack NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs
docs: venv
	$(MKDOCS) build --strict

# In `make test`: a broken link, a page missing from the nav or a failing generator fails the build.
# Its output only when it fails (--quiet would hide the warnings that --strict counts).
docs-check: venv
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $(MKDOCS) build --strict --site-dir "$$tmp/site" >"$$tmp/log" 2>&1 || { cat "$$tmp/log"; exit 1; }

test: venv k8s promtool lint docs-check
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

# kubesched vs kube-scheduler 1.20.2 vs a null binder (not part of `make test`; 50-60 minutes).
# BENCH_ARGS=--quick for a smoke run of a few minutes; see bench/README.md for the rest.
BENCH_ARGS ?=
bench: venv k8s
	@$(BIN)/python -c "import matplotlib" 2>/dev/null || $(BIN)/pip install -q -c $(CONSTRAINTS) -e '.[dev,bench]'
	$(DEVPY) bench/run.py $(BENCH_ARGS)

# Memory over a long churn of pods through one `kubesched run` (not part of `make test`): RSS per
# 100,000 pods after the warm-up and every map's size back at its start. SOAK_ARGS="--pods 20000" for a short one.
SOAK_ARGS ?=
soak: venv k8s
	$(DEVPY) bench/soak.py $(SOAK_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis site

# Regenerate the lock after changing dependencies in pyproject.toml. Pins already there stay where
# they can; LOCK_ARGS=--upgrade (or --upgrade-package NAME) moves them to the newest allowed releases.
# Resolved for the image's platform (CPython 3.11, x86_64 glibc) whatever machine runs it; uv is
# pinned, and lives in its own venv, so that the lock's format does not change with the tool.
UV_VERSION := 0.13.9
LOCK_VENV := .venv-lock
LOCK_ARGS ?=
.PHONY: lock image

$(LOCK_VENV)/.uv-$(UV_VERSION):
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found"; exit 1; }
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install -q uv==$(UV_VERSION)
	rm -f $(LOCK_VENV)/.uv-*
	touch $@

lock: $(LOCK_VENV)/.uv-$(UV_VERSION)
	@mkdir -p $(dir $(CONSTRAINTS))
	$(LOCK_VENV)/bin/uv pip compile -q pyproject.toml requirements/build.in --all-extras --python-version 3.11 \
	  --python-platform x86_64-manylinux_2_28 --custom-compile-command 'make lock' $(LOCK_ARGS) -o $(CONSTRAINTS)

# The image kubesched:VERSION (pyproject.toml's version), labelled with that version and the commit
# it is built from. The revision label names HEAD, so build releases from a clean checkout.
VERSION = $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
REVISION = $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
image:
	@test -n "$(VERSION)" || { echo "no version in pyproject.toml"; exit 1; }
	@test -z "$$(git status --porcelain -- Dockerfile .dockerignore pyproject.toml README.md requirements operator 2>/dev/null)" \
	  || echo "warning: uncommitted changes; the image's revision label ($(REVISION)) does not include them" >&2
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t kubesched:$(VERSION) .
