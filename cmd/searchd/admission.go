package main

import (
	"cmp"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/fairq"
	"github.com/searchd/searchd/internal/telemetry"
)

// Environment variables of the admission queue (package fairq), which
// the API, the console and the provider callbacks of one process share.
const (
	EnvAdmissionSeats       = "SEARCHD_ADMISSION_SEATS"
	EnvAdmissionQueueLength = "SEARCHD_ADMISSION_QUEUE_LENGTH"
	EnvAdmissionMaxWait     = "SEARCHD_ADMISSION_MAX_WAIT"
)

// admissionConfig is the admission queue's configuration; a zero field is
// its default (Seats: the pool's size).
type admissionConfig struct {
	Seats       int
	QueueLength int
	MaxWait     time.Duration
}

// newAdmission builds the one admission queue of the process, shared by
// the API and the console, its seats by default as many as pool has
// connections: a seated request then rarely waits for one, and requests
// beyond what the database can serve wait in their own organization's
// queue rather than in the pool's, which serves whoever comes first. Its
// waits and refusals count in metrics, and its seats and queues are read
// there at each scrape.
func newAdmission(cfg admissionConfig, pool *pgxpool.Pool, metrics *telemetry.Metrics) (*fairq.Queue, error) {
	q, err := fairq.New(fairq.Config{Seats: cmp.Or(cfg.Seats, int(pool.Config().MaxConns)),
		QueueLength: cfg.QueueLength, MaxWait: cfg.MaxWait, Observer: metrics})
	if err != nil {
		return nil, err
	}
	_ = metrics.WatchAdmission(q) // one queue per registry; a second server in a test keeps the first's
	return q, nil
}
