package sqlarg

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

func TestUnsetValuesAreNull(t *testing.T) {
	t.Parallel()
	id, at := uuid.New(), time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"empty string", Null(""), nil},
		{"string", Null("x"), "x"},
		{"nil uuid", Null(uuid.Nil), nil},
		{"uuid", Null(id), id},
		{"zero time", Null(time.Time{}), nil},
		{"zero time elsewhere", Null(time.Time{}.In(time.FixedZone("X", 3600))), nil},
		{"time", Null(at), at},
		{"empty JSON", JSON(nil), nil},
		{"JSON", JSON(json.RawMessage(`{"a":1}`)), `{"a":1}`},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

func TestRowErrorIsNotFoundForNoRowAndWrapsTheRest(t *testing.T) {
	t.Parallel()
	notFound, other := errors.New("x: not found"), errors.New("boom")
	if got := RowError(fmt.Errorf("scan: %w", pgx.ErrNoRows), notFound, "x: get"); got != notFound {
		t.Errorf("no row: got %v, want %v", got, notFound)
	}
	got := RowError(other, notFound, "x: get")
	if !errors.Is(got, other) || got.Error() != "x: get: boom" {
		t.Errorf("other error: got %v, want x: get: boom wrapping it", got)
	}
}
