package api

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/schedule"
	"github.com/searchd/searchd/snapshot"
)

func TestProblemForMapsEveryDomainOutcome(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return fmt.Errorf("layer: %w", err) }
	domainInvalid := savedsearch.UpdateParams{Name: new("")}.Validate()
	tests := []struct {
		name       string
		err        error
		status     int // 0: unknown, a 500
		code       string
		retryAfter time.Duration
	}{
		{"saved search not found", wrap(savedsearch.ErrNotFound), 404, CodeNotFound, 0},
		{"start of a missing saved search", admission.ErrNotFound, 404, CodeNotFound, 0},
		{"snapshot not found", snapshot.ErrNotFound, 404, CodeNotFound, 0},
		{"run not found", wrap(runs.ErrNotFound), 404, CodeNotFound, 0},
		{"key reused", admission.ErrKeyReused, 422, CodeKeyReused, 0},
		{"run finished", wrap(&runs.FinishedError{Status: "succeeded", Version: 3}), 409, CodeRunFinished, 0},
		// Retry-After is a readiness hint: at most inProgressRetryAfter,
		// sooner when the lease passes sooner, never the whole lease.
		{"in flight", wrap(&idempotency.InFlightError{RetryAfter: 25 * time.Second}), 409, CodeInProgress, time.Second},
		{"in flight, lease nearly over", wrap(&idempotency.InFlightError{RetryAfter: 300 * time.Millisecond}), 409, CodeInProgress, 300 * time.Millisecond},
		{"in flight, bare sentinel", idempotency.ErrClaimInFlight, 409, CodeInProgress, time.Second},
		{"bad cursor", runs.ErrInvalidCursor, 400, CodeValidationFailed, 0},
		{"plane refuses a key", wrap(&idempotency.InputError{Field: "key", Reason: "x"}), 400, CodeInvalidIdempotencyKey, 0},
		{"domain refuses input", domainInvalid, 400, CodeValidationFailed, 0},
		{"connection refused", wrap(&pgconn.ConnectError{}), 503, CodeUnavailable, unavailableRetryAfter},
		{"session ended idle in its transaction", wrap(&pgconn.PgError{Severity: "FATAL", Code: "25P03"}), 503, CodeUnavailable, unavailableRetryAfter},
		{"server shutting down", wrap(&pgconn.PgError{Code: "57P01"}), 503, CodeUnavailable, unavailableRetryAfter},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, 503, CodeUnavailable, unavailableRetryAfter},
		{"timeout", wrap(context.DeadlineExceeded), 503, CodeUnavailable, unavailableRetryAfter},
		{"value PostgreSQL cannot store", wrap(&pgconn.PgError{Code: "22P05"}), 400, CodeValidationFailed, 0},
		{"unique violation nobody translated", &pgconn.PgError{Code: "23505"}, 0, "", 0},
		{"plain bug", errors.New("nil map"), 0, "", 0},
	}
	for _, tt := range tests {
		// Every error reaches the API through a store's boundary, which
		// translates the driver's errors into kinds (internal/dberr).
		p := problemFor(dberr.Interpret(tt.err))
		switch {
		case tt.status == 0 && p != nil:
			t.Errorf("%s: problemFor = %d %s, want unknown (a 500)", tt.name, p.status, p.code)
		case tt.status != 0 && (p == nil || p.status != tt.status || p.code != tt.code || p.retryAfter != tt.retryAfter):
			t.Errorf("%s: problemFor = %+v, want %d %s retry %s", tt.name, p, tt.status, tt.code, tt.retryAfter)
		}
	}
	if p := problemFor(domainInvalid); len(p.fields) != 1 || p.fields[0].Field != "name" {
		t.Errorf("domain validation fields = %+v, want the JSON name", p.fields)
	}
	if got := snakePath("Baseline.Items[3]"); got != "baseline.items[3]" {
		t.Errorf("snakePath = %q", got)
	}
	if got := snakePath("MaxResults"); got != "max_results" {
		t.Errorf("snakePath = %q", got)
	}
	if got := idempotency.RetryAfterSeconds(1500 * time.Millisecond); got != 2 {
		t.Errorf("idempotency.RetryAfterSeconds(1.5s) = %d, want 2", got)
	}
	if got := idempotency.RetryAfterSeconds(0); got != 1 {
		t.Errorf("idempotency.RetryAfterSeconds(0) = %d, want 1", got)
	}
}

// TestEveryProblemCodeHasItsPage: the page a problem's type names exists
// for every code the API answers with (problemDocByCode holds them all).
func TestEveryProblemCodeHasItsPage(t *testing.T) {
	for code, doc := range problemDocByCode {
		if doc.Meaning == "" || doc.Action == "" || doc.Status < 400 {
			t.Errorf("problem code %s has no documentation page (problemDocs)", code)
		}
	}
	if len(problemDocs) != len(problemDocByCode) {
		t.Errorf("%d problem pages for %d codes", len(problemDocs), len(problemDocByCode))
	}
}

// TestEveryKindHasOneAnswer: each kind of errs has its row in kindAnswers
// (errs.Internal alone has none: a 500), a row's code has a title and a
// problem page, and every per-case detail belongs to a kind with a row
// whose status it keeps.
func TestEveryKindHasOneAnswer(t *testing.T) {
	t.Parallel()
	for _, k := range errs.Kinds() {
		row, ok := kindAnswers[k]
		switch {
		case k == errs.Internal && ok:
			t.Errorf("kind %q has a row; it must stay a logged 500", k)
		case k == errs.Internal:
		case !ok:
			t.Errorf("kind %q has no row in kindAnswers", k)
		case row.status < 400 || row.detail == "" || problemDocByCode[row.code].Title == "":
			t.Errorf("kind %q answers %+v: want a 4xx or 5xx, a detail and a code with a title", k, row)
		}
		if p := problemFor(errs.New(k, "x")); ok != (p != nil) || (p != nil && (p.status != row.status || p.code != row.code)) {
			t.Errorf("problemFor(a %q error) = %+v, want %d %s", k, p, row.status, row.code)
		}
	}
	if len(kindAnswers) != len(errs.Kinds())-1 {
		t.Errorf("kindAnswers has %d rows for %d kinds", len(kindAnswers), len(errs.Kinds())-1)
	}
	// The details the domain's errors carry: each keeps its kind's status.
	details := []struct {
		err    error
		detail string
	}{
		{savedsearch.ErrNotFound, "no such saved search in your organization"},
		{admission.ErrNotFound, "no such saved search in your organization"},
		{snapshot.ErrNotFound, "no such snapshot in your organization"},
		{runs.ErrNotFound, "no such run in your organization"},
		{providerjobs.ErrNotFound, "no such provider job in your organization"},
		{providerjobs.ErrRunNotFound, "no such run in your organization"},
		{providerjobs.ErrAlreadyRegistered, "your organization registered this provider job id already, for another run; " +
			"a provider's job id names one job of an organization"},
		{&savedsearch.VersionMismatchError{Current: 3},
			"the saved search changed since the version If-Match names; read it again (its ETag) and reapply the change"},
		{schedule.ErrNotFound, "this saved search has no schedule"},
		{schedule.ErrSavedSearchNotFound, "no such saved search in your organization (a schedule is set on a live one)"},
		{&schedule.VersionMismatchError{},
			"the schedule changed since the version If-Match names, or there is none; read it again (its ETag) and reapply the change"},
		{&runs.FinishedError{Status: "failed", Version: 4},
			"the Run finished as failed; a finished Run never changes, and this report would change it"},
	}
	for _, d := range details {
		k := errs.KindOf(d.err)
		if k == errs.Conflict && errs.CodeOf(d.err) == "" {
			t.Errorf("conflict %v names no code of its own", d.err)
		}
		row, ok := kindAnswers[k]
		if !ok {
			t.Errorf("detail for %v: its kind %q has no row", d.err, k)
			continue
		}
		if p := problemFor(fmt.Errorf("layer: %w", d.err)); p == nil || p.status != row.status || p.detail != d.detail {
			t.Errorf("problemFor(%v) = %+v, want %d with detail %q", d.err, p, row.status, d.detail)
		}
	}
}
