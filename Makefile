# CommitLayer: build, local services, tests.
#   make up      start the Temporal dev server and PostgreSQL (idempotent);
#                `make up TEMPORAL=server`: Temporal's own server on PostgreSQL instead (port 7243)
#   make demo    up + build + bin/commitlayer demo (results in .data/results, ignored: the checkout stays clean)
#   make results the demo into sandbox/results, the committed results, and their headline into README.md
#   make test    up + fresh test database + lint + go test -race ./...
#   make lint    gofmt, go vet, staticcheck, workflowcheck, go mod tidy check
#   make down    stop what `make up` started
#   make test-cluster  the same tests against Temporal's own server on PostgreSQL
# `make help` lists every target. Variables below can be overridden: `make test PKGS=./contracts/...`.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
export GOTOOLCHAIN := local

GO ?= go
BIN := bin/commitlayer
PKGS ?= ./...

# Local services (scripts/dev-services.sh reads the same names).
# TEMPORAL: which Temporal `make up` starts: dev (the dev server, the default) or server (Temporal's
# own server binary with PostgreSQL persistence, frontend at TEMPORAL_CLUSTER_PORT). `down` and
# `status` without it cover both.
TEMPORAL ?=
ifneq ($(filter-out dev server,$(TEMPORAL)),)
$(error TEMPORAL is dev or server, got '$(TEMPORAL)')
endif
TEMPORAL_CLUSTER_PORT ?= 7243
ifeq ($(TEMPORAL),server)
TEMPORAL_ADDRESS ?= 127.0.0.1:$(TEMPORAL_CLUSTER_PORT)
TEST_TEMPORAL_ADDRESS ?= 127.0.0.1:$(TEMPORAL_CLUSTER_PORT)
endif
TEMPORAL_PORT ?= 7233
TEMPORAL_UI_PORT ?= 8233
TEMPORAL_ADDRESS ?= 127.0.0.1:$(TEMPORAL_PORT)
DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/commitlayer?sslmode=disable
export TEMPORAL_PORT TEMPORAL_UI_PORT TEMPORAL_ADDRESS DATABASE_URL TEMPORAL_CLUSTER_PORT

# The server `make test` creates its test database on, and that database.
PG_ADMIN_URL ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
TEST_DB ?= commitlayer_test
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/$(TEST_DB)?sslmode=disable
# `make test-cluster`: its own test database, and the size of the `bench settle` run after the tests
# (0 skips it).
CLUSTER_TEST_DB ?= commitlayer_test_cluster
CLUSTER_TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/$(CLUSTER_TEST_DB)?sslmode=disable
CLUSTER_BENCH_ACTIONS ?= 200

# What tests and benchmarks see: one database for the run, the local dev server (whatever
# TEMPORAL_ADDRESS says for `make demo`), integration mode.
TEST_TEMPORAL_ADDRESS ?= 127.0.0.1:$(TEMPORAL_PORT)
TEST_ENV := COMMITLAYER_TEST_DATABASE_URL='$(TEST_DATABASE_URL)' COMMITLAYER_INTEGRATION=1 \
	TEMPORAL_ADDRESS='$(TEST_TEMPORAL_ADDRESS)' TEMPORAL_NAMESPACE=default

# Packages holding workflow code, for workflowcheck (determinism).
WORKFLOW_PKGS ?= ./workflows/... ./sandbox/bench/...

# Per test binary: cmd/commitlayer's end-to-end tests (rollout, mixed fleet, outages) take minutes
# under -race on 2 cores; go test's default of 10 minutes is too tight for a loaded machine.
TEST_TIMEOUT ?= 30m
FUZZTIME ?= 10s
BENCH ?= .
BENCHTIME ?= 1s
BENCHCOUNT ?= 1

.PHONY: help build up down status test test-cluster testdb lint vet fmt-check staticcheck workflowcheck tidy-check demo results bench fuzz readme-results report-screenshot clean distclean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-13s %s\n", $$1, $$2}'

build: ## build bin/commitlayer
	$(GO) build -trimpath -buildvcs=auto -o $(BIN) ./cmd/commitlayer

up: ## start Temporal (TEMPORAL=dev|server) and PostgreSQL, create the database (idempotent)
	scripts/dev-services.sh up $(TEMPORAL)

down: ## stop what `make up` started
	scripts/dev-services.sh down $(TEMPORAL)

status: ## show the local services
	scripts/dev-services.sh status $(TEMPORAL)

testdb: up ## drop and recreate the test database $(TEST_DB)
	@[[ '$(TEST_DB)' =~ ^[A-Za-z_][A-Za-z0-9_]*$$ ]] || { echo "TEST_DB: letters, digits, underscores" >&2; exit 1; }
	PGOPTIONS='--client-min-messages=warning' psql '$(PG_ADMIN_URL)' -XqA -v ON_ERROR_STOP=1 \
		-c 'DROP DATABASE IF EXISTS "$(TEST_DB)" WITH (FORCE)' \
		-c 'CREATE DATABASE "$(TEST_DB)"'

vet: ## go vet
	$(GO) vet $(PKGS)

fmt-check: ## fail when a Go file is not gofmt-formatted
	@files=$$(git ls-files -co --exclude-standard -- '*.go' ':(exclude)*/testdata/*' ':(exclude)testdata/*'); \
	bad=$$([[ -z $$files ]] || gofmt -l $$files); \
	if [[ -n $$bad ]]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi; \
	echo "gofmt: ok"

# staticcheck and workflowcheck are `tool` directives in go.mod: `go tool` builds the
# pinned versions, nothing to install.
staticcheck: ## staticcheck (honnef.co/go/tools, version pinned in go.mod)
	$(GO) tool staticcheck $(PKGS)

workflowcheck: ## Temporal's workflowcheck on the workflow packages (exceptions: workflowcheck.yaml)
	$(GO) tool workflowcheck -config workflowcheck.yaml $(WORKFLOW_PKGS)

tidy-check: ## fail when `go mod tidy` would change go.mod or go.sum
	$(GO) mod tidy -diff

lint: fmt-check vet staticcheck workflowcheck tidy-check ## gofmt, go vet, staticcheck, workflowcheck, go mod tidy check

test: testdb lint ## services up, fresh test database, vet, gofmt, go test -race
	$(TEST_ENV) $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(PKGS)

# The same as `make test` on Temporal's own server with PostgreSQL persistence (installed on first use,
# see docs/operations.md), in a test database of its own, then `bench settle` against it.
test-cluster: ## `make test` against Temporal's own server on PostgreSQL, then bench settle
	$(MAKE) --no-print-directory test TEMPORAL=server TEST_DB='$(CLUSTER_TEST_DB)' TEST_DATABASE_URL='$(CLUSTER_TEST_DATABASE_URL)' \
		TEMPORAL_ADDRESS=127.0.0.1:$(TEMPORAL_CLUSTER_PORT) TEST_TEMPORAL_ADDRESS=127.0.0.1:$(TEMPORAL_CLUSTER_PORT)
	@if [[ '$(CLUSTER_BENCH_ACTIONS)' != 0 ]]; then \
		$(MAKE) --no-print-directory build && \
		echo "bench settle -actions $(CLUSTER_BENCH_ACTIONS) on 127.0.0.1:$(TEMPORAL_CLUSTER_PORT)" && \
		DATABASE_URL='$(CLUSTER_TEST_DATABASE_URL)' \
		TEMPORAL_ADDRESS=127.0.0.1:$(TEMPORAL_CLUSTER_PORT) TEMPORAL_NAMESPACE=default \
			$(BIN) bench settle -actions $(CLUSTER_BENCH_ACTIONS); \
	fi

demo: up build ## services up, build, run the demo (results in .data/results, which git ignores)
	$(BIN) demo

results: up build ## refresh the committed results: the demo into sandbox/results, their headline into README.md
	$(BIN) demo -out sandbox/results
	scripts/readme-results.sh

bench: testdb ## benchmarks (against the dev services), BENCH=regexp BENCHTIME=1s BENCHCOUNT=1
	$(TEST_ENV) $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) $(PKGS)

fuzz: ## run each Fuzz target for FUZZTIME (default 10s)
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh $(PKGS)

readme-results: ## copy the headline of sandbox/results/latest.md into README.md (make results runs it)
	scripts/readme-results.sh

report-screenshot: ## render the HTML report (REPORT_IN=results.json) and screenshot it in headless Chromium
	GO=$(GO) scripts/report-screenshot.sh $(REPORT_IN)

clean: ## remove build output and cached test results
	rm -rf bin
	$(GO) clean -testcache

distclean: down clean ## also remove .data (the Temporal database and logs)
	rm -rf .data
