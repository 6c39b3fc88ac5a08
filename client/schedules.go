package client

import (
	"context"
	"iter"
	"net/http"
	"time"
)

// SetScheduleParams are a schedule, set whole: exactly one of
// IntervalSeconds and Cron. An omitted field takes the server's default,
// but StartAt, which keeps the stored one.
type SetScheduleParams struct {
	// IntervalSeconds is 60 to 31622400.
	IntervalSeconds *int64 `json:"interval_seconds,omitempty"`
	// Cron is five fields or a descriptor (@daily), read in TimeZone.
	Cron *string `json:"cron,omitempty"`
	// TimeZone is an IANA name; empty is UTC.
	TimeZone string `json:"time_zone,omitempty"`
	// StartAt is the first instant it may come due; nil keeps the stored
	// one (a new schedule's is the time it is set).
	StartAt *time.Time `json:"start_at,omitempty"`
	// CatchUpSeconds is 60 to 604800; zero is 86400.
	CatchUpSeconds int64 `json:"catch_up_seconds,omitempty"`
	// Paused sets the schedule paused.
	Paused bool `json:"paused,omitempty"`
	// MaxResults is 1 to 1000 for the Runs it starts; zero is 100.
	MaxResults int `json:"max_results,omitempty"`
	// Note is kept in the options of the Runs it starts, at most 500
	// characters.
	Note string `json:"note,omitempty"`
	// IfVersion, when set, makes the set change exactly that version of
	// the schedule (If-Match), and refuses to create one.
	IfVersion int64 `json:"-"`
}

// OccurrencePage is a page of occurrences, latest due first.
type OccurrencePage = Page[Occurrence]

// scheduleRequest returns the request of method at a saved search's
// schedule, path suffix after "/schedule", as [idRequest].
func scheduleRequest(method, savedSearchID, suffix string, in any, s safety) request {
	return idRequest(method, "/v1/saved-searches/", savedSearchID, "/schedule"+suffix, in, s)
}

// SetSchedule creates or replaces the schedule of a live saved search.
// It carries an Idempotency-Key, minted per call unless
// [WithIdempotencyKey] gives one, and reuses it on every retry, so it is
// retried like a create. Errors: [ErrNotFound] (no live saved search),
// [ErrValidation], [ErrPreconditionFailed] (p.IfVersion is not the current
// version, or there is no schedule), [ErrKeyReused].
func (c *Client) SetSchedule(ctx context.Context, savedSearchID string, p SetScheduleParams, opts ...StartOption) (*Schedule, error) {
	r := keyed(scheduleRequest(http.MethodPut, savedSearchID, "", p, repeatable), opts)
	r.ifMatch = ifVersion(p.IfVersion)
	return fetch[Schedule](ctx, c, r)
}

// GetSchedule reads a saved search's schedule. It returns [ErrNotFound]
// when the saved search has none.
func (c *Client) GetSchedule(ctx context.Context, savedSearchID string) (*Schedule, error) {
	return fetch[Schedule](ctx, c, get("/v1/saved-searches/", savedSearchID, "/schedule"))
}

// PauseSchedule pauses a schedule: it produces no occurrences until
// resumed. ifVersion, when not 0, makes it change exactly that version.
// Pausing is a set, so it is retried like a read; with a version it is
// not retried once the request may have reached the server (a repeat
// after a lost answer would meet the version the pause made). Errors:
// [ErrNotFound], [ErrPreconditionFailed].
func (c *Client) PauseSchedule(ctx context.Context, savedSearchID string, ifVersion int64) (*Schedule, error) {
	return c.changeSchedule(ctx, savedSearchID, "/pause", ifVersion)
}

// ResumeSchedule resumes a paused schedule: it comes due next at the first
// time at or after the resume, nothing back-filled. Retried as
// [Client.PauseSchedule].
func (c *Client) ResumeSchedule(ctx context.Context, savedSearchID string, ifVersion int64) (*Schedule, error) {
	return c.changeSchedule(ctx, savedSearchID, "/resume", ifVersion)
}

func (c *Client) changeSchedule(ctx context.Context, savedSearchID, verb string, version int64) (*Schedule, error) {
	s := repeatable
	if version != 0 {
		s = dialOnly
	}
	r := scheduleRequest(http.MethodPost, savedSearchID, verb, nil, s)
	r.ifMatch = ifVersion(version)
	return fetch[Schedule](ctx, c, r)
}

// RemoveSchedule deletes a saved search's schedule; its occurrences stay.
// version, when not 0, makes it remove exactly that version. It is not
// retried once the request may have reached the server: a repeat after a
// lost answer would say [ErrNotFound] of the removal it made.
func (c *Client) RemoveSchedule(ctx context.Context, savedSearchID string, version int64) error {
	r := scheduleRequest(http.MethodDelete, savedSearchID, "", nil, dialOnly)
	r.ifMatch = ifVersion(version)
	_, err := c.call(ctx, r, nil)
	return err
}

// ListOccurrences returns a page of a saved search's occurrences, latest
// due first. It returns [ErrNotFound] for a saved search the organization
// never had and [ErrValidation] for a limit out of range or a cursor the
// server did not write.
func (c *Client) ListOccurrences(ctx context.Context, savedSearchID string, p ListParams) (*OccurrencePage, error) {
	return fetch[OccurrencePage](ctx, c, get("/v1/saved-searches/", savedSearchID, "/occurrences"+listQuery(nil, p.Limit, p.Cursor)))
}

// Occurrences iterates over a saved search's occurrences, latest due
// first, a page at a time, as [Client.SavedSearches] does.
func (c *Client) Occurrences(ctx context.Context, savedSearchID string, p ListParams) iter.Seq2[Occurrence, error] {
	return pages(func(cursor string) (*OccurrencePage, error) {
		p.Cursor = cursor
		return c.ListOccurrences(ctx, savedSearchID, p)
	}, p.Cursor)
}
