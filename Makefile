# Two commands for a fresh machine with only Python:
#   make run   - set up .venv and run the main job on the shipped data
#   make test  - set up .venv and run the test suite
# and a local multi-node Ray cluster to run them on (docs/scaling.md, "Run on a cluster"):
#   make cluster-up    - a head and a worker node (separate raylets); prints the address and how to join
#   make cluster-down  - stops exactly the processes cluster-up started
#   (options: make cluster-up CLUSTER_ARGS="--workers 2 --worker-cpus 4" CLUSTER_DIR=/tmp/my-cluster)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test clean cluster-up cluster-down
CLUSTER_ARGS ?=
CLUSTER_DIR ?=
CLUSTER_AT = $(if $(CLUSTER_DIR),--dir $(CLUSTER_DIR))

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# The CPU build of torch first, so the project's torch requirement is already met.
	$(BIN)/python -m pip install -q torch==2.13.0
	# The src/ layout makes the editable install a plain .pth line (src/ on sys.path), so a script or notebook run
	# from the clone's parent directory, where "offlinerl/" is the clone, still imports the package.
	$(BIN)/python -m pip install -q -e ".[test,export,suite,tracking,multiagent]"
	touch $(STAMP)

run: setup
	$(BIN)/offlinerl validate datasets/cartpole-mixed
	$(BIN)/offlinerl train jobs/cartpole-bc.yaml --output runs/quickstart-bc-$$(date -u +%Y%m%dT%H%M%SZ)
	$(BIN)/offlinerl train jobs/cartpole-cql.yaml --output runs/quickstart-cql-$$(date -u +%Y%m%dT%H%M%SZ)

test: setup
	$(BIN)/python -m pytest -q

cluster-up: setup
	$(BIN)/python examples/local_cluster.py up $(CLUSTER_AT) $(CLUSTER_ARGS)

cluster-down:
	$(BIN)/python examples/local_cluster.py down $(CLUSTER_AT)

clean:
	rm -rf $(VENV) runs .pytest_cache
