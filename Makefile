# The README names these targets; .ci/run calls `make ci`.
GO ?= go

.PHONY: setup test ci e2e soak failover-report bench bench-plane bench-http bench-sweep bench-start run build ts browser openapi-lint

# One-time set-up of a fresh Debian machine: PostgreSQL server binaries (the
# tests and `searchd dev` start their own throwaway clusters from them) and the
# Go modules.
setup:
	@if ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null 2>&1; then \
		echo "PostgreSQL server binaries: present"; \
	else \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql; \
	fi
	$(GO) mod download

# The test command: every package against real PostgreSQL, with the race
# detector.
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

ci: test ts openapi-lint browser

# The binary: bin/searchd, stamped with its version and commit
# (searchd version, the searchd_build_info metric).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
build:
	$(GO) build -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o bin/searchd ./cmd/searchd

# The TypeScript client (clients/ts): npm ci from the committed lock file,
# types generated from api/openapi.json, compiled, and its own tests with
# node's test runner.
ts:
	cd clients/ts && npm ci --no-audit --no-fund && npm test

# The OpenAPI document through a third-party linter (Redocly's), errors fail.
openapi-lint:
	cd clients/ts && npx --no-install redocly lint --config ../../api/redocly.yaml ../../api/openapi.json

# The browser test: a page on one loopback origin calls a real searchd on
# another with fetch() in headless Chromium (Debian's chromium package,
# driven by playwright-core). Needs make ts first (the compiled client).
browser:
	$(GO) test -tags browser -count=1 -v -timeout 5m ./test/browser/

# The fault suite: three replicas on one PostgreSQL, clients retrying
# overlapping keys, and one fault at a time (kill -9, SIGSTOP past the
# lease, an immediate PostgreSQL restart, a proxy that cuts connections or
# blackholes them).
# SEARCHD_E2E_LEASE (default 3s) is the replicas' saved-search lease, so a
# scenario takes seconds; soak repeats the faults for 10 minutes each at the
# product's 30 s lease.
e2e:
	$(GO) test -tags e2e -count=1 -v -timeout 45m ./test/e2e/

soak:
	SEARCHD_E2E_LEASE=30s SEARCHD_E2E_DURATION=10m $(GO) test -tags e2e -count=1 -v -timeout 2h ./test/e2e/

# The failover as a report: a primary with an ASYNCHRONOUS standby whose
# replication stream is delayed 20 ms a chunk, failed over under load; it
# prints what the failover lost (acknowledged starts whose Run is gone,
# deliveries never applied, tool calls executed again) and fails on none of
# it. `make e2e` runs the synchronous failover, which must lose nothing.
failover-report:
	SEARCHD_E2E_FAILOVER_ASYNC=1 SEARCHD_E2E_REPLICATION_LATENCY=20ms SEARCHD_E2E_PROMOTE_AFTER=2s \
		$(GO) test -tags e2e -count=1 -v -run 'TestFailover/AsynchronousReport' -timeout 15m ./test/e2e/

# Runs searchd against a local default database under .searchd-dev/.
run:
	$(GO) run ./cmd/searchd dev

# Saved-search starts in process against raw SQL (the two-commit flow, the
# three-commit flow it replaced, a replay's one statement), on a durable cluster.
bench-start:
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestStartBench -v -timeout 30m ./admission/

# The idempotency plane against raw pgx issuing the same SQL.
bench-plane:
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestBenchReport -v ./idempotency/

# searchd's HTTP starts against a thin echo + pgx handler issuing the same SQL.
bench-http:
	$(GO) run ./bench/http

# Claim latency while the sweeper deletes a million expired rows.
bench-sweep:
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestSweepBench -v -timeout 30m ./sweeper/

# All three benchmarks in one go (plane, sweeper, HTTP at 1 to 64 clients),
# written to docs/bench-report.md with a chart in docs/bench-report.svg.
# About 10 minutes on 2 CPUs; `go run ./bench/report -quick` takes about 2.
bench:
	$(GO) run ./bench/report

# The console's browser tests (test/console/): Debian's chromium driven by
# playwright-core against a real searchd serve on a throwaway PostgreSQL
# that the Go fixture starts and seeds. Needs chromium and node/npm (.ci/run
# installs them). SCREENSHOTS=dir also writes each page's screenshot there.
.PHONY: test-console console-screenshots bench-console
CONSOLE_BUILD ?= $(CURDIR)/.build/console
test-console:
	mkdir -p $(CONSOLE_BUILD)
	$(GO) build -o $(CONSOLE_BUILD)/searchd ./cmd/searchd
	$(GO) build -o $(CONSOLE_BUILD)/fixture ./test/console/fixture
	cd test/console && npm ci --no-audit --no-fund && \
		SEARCHD_BIN=$(CONSOLE_BUILD)/searchd CONSOLE_FIXTURE=$(CONSOLE_BUILD)/fixture SCREENSHOTS=$(SCREENSHOTS) npm test

# The browser tests, writing the README's screenshots to docs/console/.
console-screenshots:
	$(MAKE) test-console SCREENSHOTS=$(CURDIR)/docs/console

# Every console page on 10,000 snapshots and 100,000 claims (a benchmark,
# not a timed test): medians and p95 per page against a SELECT 1 baseline;
# then what the console's lease index costs the claim path, with and
# without it in alternating rounds on a durable cluster.
bench-console:
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestConsoleBench -v -timeout 20m ./console/
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestLeaseIndexBench -v -timeout 10m ./operator/
