package api

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/runs"
)

// Dispatches reads Runs' hand-offs to the runtime; a *dispatch.Store is one.
type Dispatches interface {
	Get(ctx context.Context, org, runID uuid.UUID) (*dispatch.Dispatch, error)
}

// statusReportRequest is the body of PUT /v1/runs/{id}/status.
type statusReportRequest struct {
	Status    string             `json:"status"`
	ResultRef *string            `json:"result_ref"`
	Error     *statusReportError `json:"error"`
}

type statusReportError struct {
	Code    string  `json:"code"`
	Message *string `json:"message"`
}

// reportRunStatus applies a runtime's report when it moves the Run
// forward and answers the Run, 200; a repeat answers the same Run. A
// change to a finished Run is 409 run_finished.
func (s *Server) reportRunStatus(c echo.Context, id uuid.UUID) error {
	req, err := decodeBody[statusReportRequest](c, bodyMandatory)
	if err != nil {
		return err
	}
	p := principal(c)
	r := runs.StatusReport{Status: req.Status, Reporter: p.Actor}
	if req.ResultRef != nil {
		if *req.ResultRef == "" {
			return validationFailed(FieldError{Field: "result_ref", Message: "must not be empty: omit it, or send null, for no result"})
		}
		r.ResultRef = *req.ResultRef
	}
	if req.Error != nil {
		r.Error = &runs.RunError{Code: req.Error.Code, Message: req.Error.Message}
	}
	if err := r.Validate(); err != nil {
		return refusedInput(err)
	}
	run, _, err := s.d.Runs.Report(c.Request().Context(), p.OrganizationID, id, r)
	return answerOr(c, run, err, answerOK)
}

// runWithDispatch writes a Run as GET /v1/runs/{id} answers it: the Run,
// and its dispatch to the runtime (null when it has none).
func runWithDispatch(run *runs.Run, d *dispatch.Dispatch) ([]byte, error) {
	b, err := json.Marshal(run)
	if err != nil {
		return nil, err
	}
	b = append(b[:len(b)-1], `,"dispatch":`...)
	dj, err := json.Marshal(d) // null for nil
	if err != nil {
		return nil, err
	}
	b = append(b, dj...)
	return append(b, '}'), nil
}

// cancelRequest is the optional body of POST /v1/runs/{id}/cancel.
type cancelRequest struct {
	// Reason is at most runs.MaxCancelReasonLen characters.
	Reason string `json:"reason"`
}

// cancelRun cancels an undispatched Run at once, or records a cancel
// request for the runtime, and answers 200 with the Run; it is
// idempotent. A succeeded or failed Run is 409 run_finished.
func (s *Server) cancelRun(c echo.Context, id uuid.UUID) error {
	req, err := decodeBody[cancelRequest](c, bodyOptional)
	if err != nil {
		return err
	}
	r := runs.CancelRequest{Actor: principal(c).Actor, Reason: req.Reason}
	if err := r.Validate(); err != nil {
		return refusedInput(err)
	}
	run, err := s.d.Runs.Cancel(c.Request().Context(), principal(c).OrganizationID, id, r)
	return answerOr(c, run, err, answerOK)
}
