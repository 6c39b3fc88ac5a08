package api

import (
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/schedule"
)

// Schedules is what the API needs of the schedule store; a
// *schedule.Store has it.
type Schedules interface {
	Get(ctx context.Context, org, id uuid.UUID) (*schedule.Schedule, error)
	Set(ctx context.Context, org, id uuid.UUID, p schedule.SetParams) (sc *schedule.Schedule, created bool, err error)
	// SetOnce sets once per Idempotency-Key.
	SetOnce(ctx context.Context, plane *idempotency.Service, org, id uuid.UUID, key string, p schedule.SetParams) (sc *schedule.Schedule, created, replayed bool, err error)
	Pause(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool) (*schedule.Schedule, error)
	Resume(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool) (*schedule.Schedule, error)
	Remove(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool) error
	Occurrences(ctx context.Context, org, id uuid.UUID, p schedule.ListParams) ([]schedule.Occurrence, string, error)
}

// scheduleRequest is the body of a schedule set.
type scheduleRequest struct {
	IntervalSeconds *int64  `json:"interval_seconds"`
	Cron            *string `json:"cron"`
	TimeZone        *string `json:"time_zone"`
	StartAt         *string `json:"start_at"`
	CatchUpSeconds  *int64  `json:"catch_up_seconds"`
	Paused          *bool   `json:"paused"`
	MaxResults      *int    `json:"max_results"`
	Note            *string `json:"note"`
}

// params returns the domain's inputs of r, or a validation_failed problem
// for a start_at that is not an RFC 3339 time.
func (r scheduleRequest) params() (schedule.SetParams, error) {
	p := schedule.SetParams{IntervalSeconds: r.IntervalSeconds, Cron: r.Cron, TimeZone: r.TimeZone,
		CatchUpSeconds: r.CatchUpSeconds, Paused: r.Paused, MaxResults: r.MaxResults, Note: r.Note}
	if r.StartAt != nil {
		at, err := time.Parse(time.RFC3339Nano, *r.StartAt)
		if err != nil {
			return p, validationFailed(FieldError{Field: "start_at",
				Message: "must be an RFC 3339 time with its offset, such as 2026-12-01T09:00:00Z"})
		}
		p.StartAt = &at
	}
	return p, nil
}

// answerSchedule answers sc, 200, with its version's ETag: to a read or a
// change.
func answerSchedule(c echo.Context, sc *schedule.Schedule) error {
	c.Response().Header().Set(HeaderETag, etag(sc.Version))
	return c.JSON(http.StatusOK, sc)
}

// scheduleIfMatch is [ifMatch] where "*" requires the schedule to exist.
func scheduleIfMatch(h http.Header) func(int64) bool {
	return ifMatchOr(h, func(int64) bool { return true })
}

// setSchedule creates (201) or replaces (200) a schedule, honouring
// If-Match and Idempotency-Key.
func (s *Server) setSchedule(c echo.Context, id uuid.UUID) error {
	key, hasKey, err := s.optionalKey(c)
	if err != nil {
		return err
	}
	req, err := decodeBody[scheduleRequest](c, bodyMandatory)
	if err != nil {
		return err
	}
	p, err := req.params()
	if err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return refusedInput(err)
	}
	pr := principal(c)
	p.Actor, p.IfMatch = pr.Actor, scheduleIfMatch(c.Request().Header)
	ctx := c.Request().Context()
	var (
		sc                *schedule.Schedule
		created, replayed bool
	)
	if hasKey {
		if s.d.Plane == nil {
			return errNoPlane
		}
		sc, created, replayed, err = s.d.Schedules.SetOnce(ctx, s.d.Plane, pr.OrganizationID, id, key, p)
	} else {
		sc, created, err = s.d.Schedules.Set(ctx, pr.OrganizationID, id, p)
	}
	if err != nil {
		return err
	}
	if created {
		c.Response().Header().Set(echo.HeaderLocation, "/v1/saved-searches/"+id.String()+"/schedule")
	}
	c.Response().Header().Set(HeaderETag, etag(sc.Version))
	return c.JSON(keyedStatus(c, created, replayed), sc)
}

// MaxOccurrencePageBytes is the ceiling of an occurrence list answer.
const MaxOccurrencePageBytes = 128 << 10

// listOccurrences lists a saved search's occurrences, latest due first.
func (s *Server) listOccurrences(c echo.Context, id uuid.UUID) error {
	limit, cursor, err := listQuery(c, schedule.MaxListLimit)
	if err != nil {
		return err
	}
	items, next, err := s.d.Schedules.Occurrences(c.Request().Context(), principal(c).OrganizationID, id,
		schedule.ListParams{Limit: limit, Cursor: cursor})
	return answerPage(c, items, next, err)
}
