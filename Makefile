# agentchain — common tasks. `make help` lists them.
PYTHON ?= python3
PYTEST_ARGS ?=
# Test processes for `make test`: each has its own control plane, real node, Redis and
# stand-ins, in network and mount namespaces of its own (e2e/controlplane/README.md), and
# takes whole modules (--dist loadfile), so a module's fixtures are built once. The real
# node's own tests run in a lane of their own beside them: e2e/lanes.sh says why;
# REALNODE=0 leaves them out. The real node needs root.
TEST_WORKERS ?= 2

.PHONY: help install binaries lint test unit e2e realnode image images demo crds bench bench-figures trace-screenshot

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

install: ## install the package with its test tools (pip, editable)
	$(PYTHON) -m pip install -e '.[test]'

binaries: ## build/cache etcd, kube-apiserver, controller-manager, scheduler, kubectl, helm
	bash e2e/controlplane/build-binaries.sh all
	bash e2e/controlplane/build-binaries.sh helm
	bash e2e/controlplane/build-binaries.sh otelcol

lint: ## ruff, mypy --strict, import-linter, CRD drift
	ruff check operator tests e2e bench
	mypy
	mypy --strict tests e2e bench
	PYTHONPATH=operator lint-imports
	$(PYTHON) -m agentchain.crdgen --check

test: ## everything CI runs: setup, lint, unit and e2e tests on real nodes (root)
	bash e2e/setup.sh --lanes
	$(MAKE) lint
	PYTHON=$(PYTHON) bash e2e/lanes.sh $(TEST_WORKERS) $(PYTEST_ARGS)

unit: ## unit tests only (no control plane; Redis is started by the tests)
	$(PYTHON) -m pytest -m 'not e2e' $(PYTEST_ARGS)

e2e: ## the end-to-end suite (local control plane and real node, or AGENTCHAIN_E2E_KUBECONFIG's cluster)
	$(PYTHON) -m pytest -m 'e2e and not realnode' $(PYTEST_ARGS)

# In a lane of its own (network and mount namespaces, as `make test` runs them), with the
# binaries and images built first while there is a network (setup.sh --lanes);
# `realnode_lanes hold` compares the machine after.
realnode: ## the real node's own tests alone: kubelet, containerd, kube-proxy, the chart (root)
	REALNODE=1 bash e2e/setup.sh --lanes
	$(PYTHON) -m e2e.controlplane.realnode_lanes hold -- \
		e2e/controlplane/lane-ns.sh $(PYTHON) -m pytest -m realnode $(PYTEST_ARGS)

image: ## build the Dockerfile without Docker or a registry (buildah, root), cached by its inputs
	$(PYTHON) -m e2e.controlplane.operator_image

images: ## build the reference agent images (images/agent/Dockerfile, one per runtime) the same way
	$(PYTHON) -m e2e.controlplane.agent_images

demo: ## the local demo: control plane, Redis, operator, seed agents, a signed webhook, a live chain
	bash e2e/setup.sh
	$(PYTHON) -m e2e.demo

crds: ## regenerate crds/, the chart's copy and docs/reference/crds.md from the models
	$(PYTHON) -m agentchain crds
	cp crds/*.yaml charts/agentchain/crds/

TRACE_WORKDIR ?= .trace-screenshot

trace-screenshot: ## docs/images/trace-zipkin.png: a three-agent chain's trace (e2e/test_traces.py) in Zipkin
	rm -rf $(TRACE_WORKDIR)
	AGENTCHAIN_KEEP_WORKDIR=1 AGENTCHAIN_E2E_WORKDIR=$(abspath $(TRACE_WORKDIR)) \
		$(PYTHON) -m pytest -m e2e e2e/test_traces.py -k across_a_sigkill -p no:cacheprovider
	$(PYTHON) -m e2e.traceview $(abspath $(TRACE_WORKDIR))/*/otelcol/spans.jsonl \
		docs/images/trace-zipkin.png --select "agentjob tr-developer"
	rm -rf $(TRACE_WORKDIR)

BENCH_TABLE ?= .bench/table.jsonl
BENCH_JOBS ?= 5000

bench: bench-figures ## benchmarks on the real node (root), ratios against baselines of the same run, one table
	$(PYTHON) bench/table.py $(BENCH_TABLE)

# Each script appends its rows to $(BENCH_TABLE); `bench` prints them as one table.
# bench/run.sh runs them on the real node, in a lane of their own (root).
bench-figures: export AGENTCHAIN_BENCH_TABLE = $(abspath $(BENCH_TABLE))
bench-figures:
	$(PYTHON) bench/table.py --reset $(BENCH_TABLE)
	PYTHON=$(PYTHON) bash bench/run.sh $(BENCH_JOBS)
