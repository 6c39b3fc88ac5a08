package main

import (
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/fairq"
	"github.com/searchd/searchd/internal/telemetry"
)

// Environment variables of the admission queue (package fairq), which
// the API, the console and the provider callbacks of one process share.
const (
	// EnvAdmissionSeats is how many requests the process serves at once.
	EnvAdmissionSeats = "SEARCHD_ADMISSION_SEATS"
	// EnvAdmissionQueueLength is how many requests of one organization
	// (operator, provider) may wait for a seat.
	EnvAdmissionQueueLength = "SEARCHD_ADMISSION_QUEUE_LENGTH"
	// EnvAdmissionMaxWait is how long a request may wait for a seat.
	EnvAdmissionMaxWait = "SEARCHD_ADMISSION_MAX_WAIT"
)

// removedSettings are the variables of the limits the admission queue
// replaced: no longer read, so a deployment that still sets them is told.
var removedSettings = []string{"SEARCHD_ORG_MAX_IN_FLIGHT", "SEARCHD_MAX_IN_FLIGHT"}

// warnRemovedSettings logs a warning for each of removedSettings that is
// set.
func warnRemovedSettings(logger *slog.Logger, getenv func(string) string) {
	for _, name := range removedSettings {
		if getenv(name) != "" {
			logger.Warn(name+" is no longer read: the admission queue replaced it; see "+EnvAdmissionSeats+
				" and docs/admission-control.md", slog.String("setting", name))
		}
	}
}

// admissionConfig is the admission queue's configuration; a zero field is
// its default (Seats: the pool's size).
type admissionConfig struct {
	Seats       int
	QueueLength int
	MaxWait     time.Duration
}

// admissionOptions are the settings above, for --help.
func admissionOptions() []option {
	return []option{
		{"admission-seats", EnvAdmissionSeats, "the pool's size (--db-max-conns)",
			fmt.Sprintf("requests served at once by the API, the console and provider callbacks together, 1 to %d; "+
				"a free seat is taken at once by whoever asks, and when all are taken each organization (operator, provider) "+
				"waits in its own queue, served in turn", fairq.MaxSeats)},
		{"admission-queue-length", EnvAdmissionQueueLength, strconv.Itoa(fairq.DefaultQueueLength),
			fmt.Sprintf("most requests of one organization (operator, provider) waiting for a seat, 1 to %d; "+
				"one more answers 429 rate_limited with Retry-After", fairq.MaxQueueLength)},
		{"admission-max-wait", EnvAdmissionMaxWait, fairq.DefaultMaxWait.String(),
			"longest a request waits for a seat, then 429 rate_limited with Retry-After; more than 0s and at most " +
				fairq.MaxMaxWait.String()},
	}
}

// readAdmissionSettings reads the settings above and returns what is
// wrong with them, one message per setting.
func readAdmissionSettings(fs *flag.FlagSet, getenv func(string) string) (admissionConfig, []string) {
	var ac admissionConfig
	var problems []string
	count := func(fl, env string, hi int) int {
		s := lookup(fs, fl, env, getenv)
		if s.value == "" {
			return 0
		}
		n, err := strconv.Atoi(s.value)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %q is not a whole number of requests", s.name, s.value))
		case n < 1 || n > hi:
			problems = append(problems, fmt.Sprintf("%s: %d is out of range: from 1 to %d", s.name, n, hi))
		default:
			return n
		}
		return 0
	}
	ac.Seats = count("admission-seats", EnvAdmissionSeats, fairq.MaxSeats)
	ac.QueueLength = count("admission-queue-length", EnvAdmissionQueueLength, fairq.MaxQueueLength)
	if s := lookup(fs, "admission-max-wait", EnvAdmissionMaxWait, getenv); s.value != "" {
		d, err := time.ParseDuration(s.value)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %q is not a duration (write it like 10s or 500ms)", s.name, s.value))
		case d <= 0 || d > fairq.MaxMaxWait:
			problems = append(problems, fmt.Sprintf("%s: %s is out of range: more than 0s and at most %s", s.name, d, fairq.MaxMaxWait))
		default:
			ac.MaxWait = d
		}
	}
	return ac, problems
}

// newAdmission builds the one admission queue of the process, shared by
// the API and the console, its seats by default as many as pool has
// connections: a seated request then rarely waits for one, and requests
// beyond what the database can serve wait in their own organization's
// queue rather than in the pool's, which serves whoever comes first. Its
// waits and refusals count in metrics, and its seats and queues are read
// there at each scrape.
func newAdmission(cfg admissionConfig, pool *pgxpool.Pool, metrics *telemetry.Metrics) (*fairq.Queue, error) {
	seats := cfg.Seats
	if seats == 0 {
		seats = int(pool.Config().MaxConns)
	}
	qc := fairq.Config{Seats: seats, QueueLength: cfg.QueueLength, MaxWait: cfg.MaxWait}
	if metrics != nil {
		qc.Observer = metrics
	}
	q, err := fairq.New(qc)
	if err != nil {
		return nil, err
	}
	if metrics != nil {
		_ = metrics.WatchAdmission(q) // one queue per registry; a second server in a test keeps the first's
	}
	return q, nil
}
