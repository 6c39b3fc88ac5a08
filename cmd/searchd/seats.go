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
// together: half the seats, and at most twice the processors the
// runtime schedules on (GOMAXPROCS, its container's), at least one. Wide
// requests (long lists, large bodies and answers, the console's heavy
// pages) are bound by the processor, not by commits: more of them at once
// than the processors can run only slows every request beside them (issue
// 36: on 2 processors, 4 heavy console pages at once took a light
// organization's p99 start to 5.2 times its p99 alone).
func wideSeats(seats, procs int) int {
	return max(min(seats/2, 2*procs), 1)
}

// newSeatQueue builds the one seat queue of the process, shared by
// the API and the console, its seats by default as many as pool has
// connections: a seated request then rarely waits for one, and requests
// beyond what the database can serve wait in their own organization's
// queue rather than in the pool's, which serves whoever comes first. Its
// waits and refusals count in metrics, and its seats and queues are read
// there at each scrape.
func newSeatQueue(cfg seatq.Config, pool *pgxpool.Pool, metrics *telemetry.Metrics) (*seatq.Queue, error) {
	seats := cmp.Or(cfg.Seats, int(pool.Config().MaxConns))
	if cfg.WideSeats > seats {
		return nil, fmt.Errorf("%s is %d, more than the %d seats (%s)", envWideSeats, cfg.WideSeats, seats, envSeats)
	}
	cfg.Seats, cfg.WideSeats, cfg.Observer = seats, cmp.Or(cfg.WideSeats, wideSeats(seats, runtime.GOMAXPROCS(0))), metrics
	q, err := seatq.New(cfg)
	if err != nil {
		return nil, err
	}
	_ = metrics.WatchSeats(q) // one queue per registry; a second server in a test keeps the first's
	return q, nil
}
