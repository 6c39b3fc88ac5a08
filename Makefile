# The README and docs/ name these targets; .ci/run calls `make ci`.
GO ?= go

.PHONY: setup test test-citus settings-docs client-types ci e2e e2e-citus soak failover-report bench bench-plane bench-neighbours bench-http bench-sweep bench-sweep-drain bench-schedule bench-start bench-dispatch bench-events bench-citus bench-scale run build ts browser openapi-lint image test-image readme-tour ts-pack web-example web-example-screenshots

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
	$(GO) -C client mod download
	$(GO) -C client/gen mod download
	$(GO) -C toolrun mod download

# The test command: every package against real PostgreSQL, with the race
# detector; and vet and the tests of the modules built against this
# checkout: the benchmarks' (bench/; its tests measure nothing), the Go
# client's (client/; its tests against a real searchd are test/goclient),
# its generator's (client/gen: the committed types against a fresh
# generation) and the agent runtime's tool-call library (toolrun/), so a
# change that breaks
# them fails here.
test:
	$(GO) vet ./...
	$(GO) -C bench vet ./...
	$(GO) -C bench test -race -count=1 ./...
	$(GO) -C client vet ./...
	$(GO) -C client test -race -count=1 ./...
	$(GO) -C client/gen test -count=1 ./...
	$(GO) -C toolrun vet ./...
	$(GO) -C toolrun test -race -count=1 ./...
	$(GO) test -race -count=1 -timeout 20m ./...

# The settings reference (docs/settings.md) and the example env file
# (searchd.example.env), written from the settings table in
# cmd/searchd/settings.go; make test fails while they differ from it.
settings-docs:
	$(GO) run ./cmd/searchd settings --format markdown >docs/settings.md
	$(GO) run ./cmd/searchd settings --format env >searchd.example.env

# The Go client's API types (client/types.gen.go), generated from
# api/openapi.json by oapi-codegen, the tool of the client/gen module (its
# configuration and the overlay it applies are there); run it after
# changing the document.
client-types:
	cd client/gen && $(GO) tool oapi-codegen -config oapi-codegen.yaml -o ../types.gen.go ../../api/openapi.json

# The contract on Citus (docs/scaling.md): every test of these packages
# against a coordinator and two workers that internal/testkit/pgtest starts from the
# installed binaries (SEARCHD_TEST_CITUS=1), on databases whose tables
# migration 00019 distributed: the plane, admission and the API, the stores
# beneath them, the schedule drain's and the dispatcher's passes, the
# sweeper's and the inbox applier's passes per shard, the catalog check of
# the distribution, and the router-query checks of the request path
# (TestEveryRequestStatementIsRoutedToOneShard), and the tool-call
# journal of the agent runtime (toolrun/: the Runner, its resolutions and
# TestEveryToolCallStatementIsRoutedToOneShard). It needs the citus
# extension: `bash ../shared/citus/install.sh` builds and installs it into
# PostgreSQL 15 (5-10 minutes the first time, a no-op after).
CITUS_PACKAGES ?= ./migrations/ ./idempotency/ ./admission/ ./api/ ./providerjobs/ ./sweeper/ \
	./savedsearch/ ./snapshot/ ./runs/ ./schedule/ ./dispatch/ ./internal/shardpass/ \
	./webhooks/ ./servicekeys/
test-citus:
	SEARCHD_TEST_CITUS=1 $(GO) test -count=1 -timeout 30m $(CITUS_PACKAGES)
	SEARCHD_TEST_CITUS=1 $(GO) -C toolrun test -count=1 -timeout 30m ./...

ci: test ts ts-pack openapi-lint browser web-example readme-tour test-image

# The binary: bin/searchd, stamped with its commit. Its version is the
# VERSION file's, embedded by every build (make, go build, go install, the
# image), so they all say the same (searchd version, searchd_build_info).
VERSION := $(shell cat VERSION)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
build:
	$(GO) build -ldflags "-X main.commit=$(COMMIT)" -o bin/searchd ./cmd/searchd

# The README's curl tour, pasted as a reader would into bash against a real
# bin/searchd dev (its own PostgreSQL), each answer checked; it needs curl,
# jq and openssl. The links of every Markdown file are checked by make test.
readme-tour:
	$(GO) test -tags tour -count=1 -v -run TestReadmeTourRunsAgainstDev -timeout 10m .

# The frontend example (examples/web): a Vite page on the TypeScript client,
# type-checked, then driven in Debian's headless Chromium by playwright-core
# against a real searchd dev: a double click, a reload mid-request and a
# Retry after a timeout each admit one Run. Needs make ts first (the
# compiled client). SCREENSHOTS=dir keeps the screenshots there.
WEB_BUILD ?= $(CURDIR)/.build/web
web-example:
	$(GO) build -o $(WEB_BUILD)/searchd ./cmd/searchd
	cd examples/web && npm ci --no-audit --no-fund && SEARCHD_BIN=$(WEB_BUILD)/searchd SCREENSHOTS=$(SCREENSHOTS) npm test

# The example's README screenshots, desktop and 390 px.
web-example-screenshots:
	$(MAKE) web-example SCREENSHOTS=$(CURDIR)/examples/web/screenshots

# The container image (Containerfile): the static binary built here (so
# no Go image is pulled), copied onto IMAGE_BASE, labelled with the VERSION
# file and the commit. PODMAN may carry storage flags.
PODMAN ?= podman
IMAGE ?= searchd:$(VERSION)
IMAGE_BASE ?= gcr.io/distroless/static-debian12:nonroot
image:
	mkdir -p .build/image
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.commit=$(COMMIT)" -o .build/image/searchd ./cmd/searchd
	$(PODMAN) build -f Containerfile --build-arg BINARY=prebuilt --build-arg BASE=$(IMAGE_BASE) \
		--build-arg VERSION=$(VERSION) --build-arg REVISION=$(COMMIT) -t $(IMAGE) .

# The image's test: make image on scratch (no registry is needed) in a
# throwaway vfs storage, then its labels, user and command, and the binary
# found in its exported filesystem, run.
test-image:
	$(GO) test -tags image -count=1 -v -timeout 20m ./test/image/

# The TypeScript client (clients/ts): npm ci from the committed lock file,
# types generated from api/openapi.json, compiled, and its own tests with
# node's test runner.
ts:
	cd clients/ts && npm ci --no-audit --no-fund && npm test

# The TypeScript client as a user gets it: npm pack, the tarball's files,
# installed into a fresh directory and imported by Node and by TypeScript
# (clients/ts/scripts/pack-check.sh). Needs make ts first (node_modules).
ts-pack:
	cd clients/ts && npm run --silent pack:check

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

# The fault suite on Citus (test/e2e/citus_test.go): two replicas on a
# coordinator and two workers under a load of starts, callbacks and tool
# calls; a worker killed (kill -9) mid-burst and restarted, and a
# transaction that spans two nodes killed between its prepare and its
# commit. Needs the citus extension, as test-citus does.
e2e-citus:
	SEARCHD_E2E_CITUS=1 $(GO) test -tags e2e -count=1 -v -run 'TestCitusFaults' -timeout 15m ./test/e2e/

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
# three-commit flow it replaced, the two-commit flow without the outbox row
# of the Run's dispatch, a replay's one statement), on a durable cluster.
bench-start:
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestStartBench -v -timeout 30m ./admission/

# Dispatch throughput to a local runtime against bare signed POSTs of the
# same bodies, on a durable cluster.
bench-dispatch:
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestDispatchBench -v -timeout 30m ./dispatch/

# Run events delivered to a local webhook endpoint by the webhooks Worker
# against bare signed POSTs of the same bodies (docs/webhooks.md).
bench-events:
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestEventsBench -v -timeout 30m ./webhooks/

# The idempotency plane against raw pgx issuing the same SQL.
bench-plane:
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestBenchReport -v ./idempotency/

# A real `searchd serve` at its defaults: a light organization's starts
# alone and beside each of issue 36's noisy loads and seat-holding attacks
# of another organization (docs/benchmarks.md, "Noisy neighbours"). About
# 8 minutes; SEARCHD_NEIGHBOURS_ROUNDS=1 SEARCHD_NEIGHBOURS_DURATION=2s is
# its smoke form.
bench-neighbours:
	SEARCHD_BENCH=1 $(GO) test -tags e2e -count=1 -run TestNoisyNeighbourBench -v -timeout 60m ./test/e2e/

# searchd's HTTP starts against a thin echo + pgx handler issuing the same SQL.
bench-http:
	$(GO) -C bench run ./http

# New saved-search starts and replays on one durable PostgreSQL and on a
# durable Citus cluster (a coordinator and two workers) on this machine,
# side by side with the ratio (docs/scaling.md). Needs the citus extension
# (bash ../shared/citus/install.sh). About 2 minutes; its smoke form:
# SEARCHD_BENCH_ROUNDS=1 SEARCHD_BENCH_SECONDS=0.5 make bench-citus.
bench-citus:
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestCitusStartBench -v -timeout 30m ./admission/

# A year of data (issue 35): the real server's new starts and replays over
# HTTP on a database seeded with SCALE_STARTS starts (claims, snapshots, Runs
# and their dispatches; one large organization and 10,000 small ones, copied
# by SQL from real starts) against an empty database, in one run on one
# durable cluster at shared_buffers=128MB; then the bytes and WAL per start,
# the console's list reads of the large organization and one sweep pass.
# SCALE_IDS=v4 mints random keys (server and seed) as before internal/ids,
# for the comparison with time-ordered v7. It needs about 3.7 kB of disk per
# seeded start plus up to 8 GB of WAL while it seeds, and took 8 to 14
# minutes at 1,000,000 starts on a loaded 2-CPU machine (docs/benchmarks.md,
# "A large database"); the default 10,000,000 needs about 45 GB and hours.
# Try SCALE_STARTS=100000 first.
SCALE_STARTS ?= 10000000
SCALE_IDS ?= v7
bench-scale:
	$(GO) -C bench run ./http -scale -starts $(SCALE_STARTS) -ids $(SCALE_IDS)

# Claim latency while the sweeper deletes a million expired rows.
bench-sweep:
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestSweepBench -v -timeout 30m ./sweeper/

# One `searchd sweep` (the binary, at its defaults) draining a million
# expired claims: its wall time and rows/s, alone and under claims, and the
# claims' p50/p99 during the drain against without (docs/benchmarks.md).
bench-sweep-drain:
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestSweepDrainBench -v -timeout 40m ./sweeper/

# The drain of scheduled starts: occurrences started per second, and the
# start path's p99 with the drain running against without (docs/schedules.md).
bench-schedule:
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestDrainBench -v -timeout 30m ./schedule/

# All the benchmarks in one go (starts in process, the plane, the sweeper,
# fairness, HTTP at 1 to 64 clients),
# written to docs/bench-report.md with a chart in docs/bench-report.svg.
# About 20 minutes on a quiet 2-CPU machine (the last report's runs took 18½),
# longer under load; `go -C bench run ./report -quick` takes a few minutes.
# bench/ is a Go module of its own (bench/go.mod), built against this
# checkout's searchd by its replace directive.
bench:
	$(GO) -C bench run ./report

# The console's browser tests (test/console/): Debian's chromium driven by
# playwright-core against a real searchd serve on a throwaway PostgreSQL
# that the Go fixture starts and seeds, beside the tests' OpenID Connect
# provider (test/oidcprovider), through whose login page people sign in.
# Needs chromium and node/npm (.ci/run installs them). SCREENSHOTS=dir also
# writes each page's screenshot there.
.PHONY: test-console console-screenshots bench-console
CONSOLE_BUILD ?= $(CURDIR)/.build/console
test-console:
	mkdir -p $(CONSOLE_BUILD)
	$(GO) build -o $(CONSOLE_BUILD)/searchd ./cmd/searchd
	$(GO) build -o $(CONSOLE_BUILD)/fixture ./test/console/fixture
	$(GO) build -o $(CONSOLE_BUILD)/oidcprovider ./test/oidcprovider
	cd test/console && npm ci --no-audit --no-fund && \
		SEARCHD_BIN=$(CONSOLE_BUILD)/searchd CONSOLE_FIXTURE=$(CONSOLE_BUILD)/fixture \
		SEARCHD_OIDC_PROVIDER=$(CONSOLE_BUILD)/oidcprovider SCREENSHOTS=$(SCREENSHOTS) npm test

# The browser tests, writing docs/console.md's screenshots to docs/console/.
console-screenshots:
	$(MAKE) test-console SCREENSHOTS=$(CURDIR)/docs/console

# Every console page on 10,000 snapshots and 100,000 claims (a benchmark,
# not a timed test): medians and p95 per page against a SELECT 1 baseline;
# then what the console's lease index costs the claim path, with and
# without it in alternating rounds on a durable cluster.
bench-console:
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestConsoleBench -v -timeout 20m ./console/
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestLeaseIndexBench -v -timeout 10m ./operator/
