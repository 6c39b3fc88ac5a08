package main

import (
	"cmp"
	"fmt"
	"runtime"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/internal/telemetry"
)

// Environment variables of the seat queue (package seatq), which the
// API, the console and the provider callbacks of one process share.
const (
	envSeats     = "SEARCHD_SEATS"
	envWideSeats = "SEARCHD_WIDE_SEATS"
)

// wideSeats is the default share of the seats wide requests hold
// together: half the seats, at most twice the processors (GOMAXPROCS), at
// least one. Wide requests are bound by the processor, so more of them at
// once only slows every request beside them (issue 36).
func wideSeats(seats, procs int) int {
	return max(min(seats/2, 2*procs), 1)
}

// newSeatQueue builds the process's one seat queue, shared by the API,
// the console and provider callbacks, with as many seats as the pool has
// connections unless set: requests beyond what the database serves wait
// in their organization's queue rather than in the pool's. Its waits,
// refusals, seats and queues are in metrics.
func newSeatQueue(cfg seatq.Config, pool *pgxpool.Pool, metrics *telemetry.Metrics) (*seatq.Queue, error) {
	seats := cmp.Or(cfg.Seats, int(pool.Config().MaxConns))
	cfg.Seats, cfg.WideSeats, cfg.Observer = seats, cmp.Or(cfg.WideSeats, wideSeats(seats, runtime.GOMAXPROCS(0))), metrics
	q, err := seatq.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", envSeats, envWideSeats, err)
	}
	_ = metrics.WatchSeats(q) // one queue per registry; a second server in a test keeps the first's
	return q, nil
}
