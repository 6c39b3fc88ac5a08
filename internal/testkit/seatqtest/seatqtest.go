// Package seatqtest builds seat queues (internal/seatq) for tests.
package seatqtest

import (
	"testing"

	"github.com/searchd/searchd/internal/seatq"
)

// New returns a seat queue of cfg; an error fails t.
func New(t testing.TB, cfg seatq.Config) *seatq.Queue {
	t.Helper()
	q, err := seatq.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
