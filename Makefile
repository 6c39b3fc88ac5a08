# The README names these targets; .ci/run calls `make ci`.
GO ?= go

.PHONY: setup test ci bench-plane bench-http bench-sweep run

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

ci: test

# Runs searchd against a local default database under .searchd-dev/.
run:
	$(GO) run ./cmd/searchd dev

# The idempotency plane against raw pgx issuing the same SQL.
bench-plane:
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestBenchReport -v ./idempotency/

# searchd's HTTP starts against a thin echo + pgx handler issuing the same SQL.
bench-http:
	$(GO) run ./bench/http

# Claim latency while the sweeper deletes a million expired rows.
bench-sweep:
	SEARCHD_BENCH=1 $(GO) test -count=1 -run TestSweepBench -v -timeout 30m ./sweeper/
