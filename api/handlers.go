package api

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
)

// HeaderIdempotentReplayed marks a start answered from an earlier admission.
const HeaderIdempotentReplayed = "Idempotent-Replayed"

// page is a page of a list; NextCursor is null on the last page.
type page[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// startResponse answers a start; Snapshot is null for a direct start.
type startResponse struct {
	Run      *runs.Run         `json:"run"`
	Snapshot *snapshot.Summary `json:"snapshot"`
}

// startRequest is the optional body of a saved-search start; pointers
// tell omitted fields from zero values.
type startRequest struct {
	MaxResults *int    `json:"max_results"`
	Note       *string `json:"note"`
}

// directStartRequest is the body of a direct start.
type directStartRequest struct {
	Kind  string          `json:"kind"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// refusedInput turns an errs.Invalid error into a validation_failed
// problem naming its fields; other errors pass through.
func refusedInput(err error) error {
	if !errs.Is(err, errs.Invalid) {
		return err
	}
	return validationFailed(invalidFields(err)...)
}

var errNoSuchPath = &apiError{status: http.StatusNotFound, code: CodeNotFound, detail: "no such resource"}

// withID passes h the route's :id; a non-UUID answers 404.
func withID(h func(c echo.Context, id uuid.UUID) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := uuid.Parse(c.Param("id"))
		if err != nil {
			return errNoSuchPath
		}
		return h(c, id)
	}
}

// readByID returns a handler that reads :id for the caller's organization
// with get and writes it with answer.
func readByID[T any](get func(ctx context.Context, org, id uuid.UUID) (T, error), answer func(echo.Context, T) error) echo.HandlerFunc {
	return withID(func(c echo.Context, id uuid.UUID) error {
		v, err := get(c.Request().Context(), principal(c).OrganizationID, id)
		return answerOr(c, v, err, answer)
	})
}

// answerOr writes v with answer, or returns err.
func answerOr[T any](c echo.Context, v T, err error, answer func(echo.Context, T) error) error {
	if err != nil {
		return err
	}
	return answer(c, v)
}

// conditional is a store's change of one resource; ifMatch is nil
// without a precondition.
type conditional[T any] func(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool) (T, error)

// changeByID is readByID for a change conditional on If-Match (cond).
func changeByID[T any](change conditional[T], cond func(http.Header) func(int64) bool, answer func(echo.Context, T) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		return readByID(func(ctx context.Context, org, id uuid.UUID) (T, error) {
			return change(ctx, org, id, cond(c.Request().Header))
		}, answer)(c)
	}
}

// removal adapts a store's removal to changeByID.
func removal(remove func(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool) error) conditional[struct{}] {
	return func(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool) (struct{}, error) {
		return struct{}{}, remove(ctx, org, id, ifMatch)
	}
}

// answerNoContent answers a removal, 204.
func answerNoContent(c echo.Context, _ struct{}) error { return c.NoContent(http.StatusNoContent) }

// answerOK answers v, 200.
func answerOK[T any](c echo.Context, v T) error { return c.JSON(http.StatusOK, v) }

// answerItems answers an unpaged list, 200: a job's dropped deliveries,
// an organization's webhook endpoints, an endpoint's deliveries.
func answerItems[T any](c echo.Context, items []T) error {
	return answerOK(c, struct {
		Items []T `json:"items"`
	}{items})
}

// Ceilings of list answers in bytes, as docs/api.md states them: the
// items' bounded fields, fully escaped, times MaxListLimit.
const (
	MaxSavedSearchPageBytes = 3 << 20
	MaxRunPageBytes         = 1 << 20
	MaxSnapshotPageBytes    = 512 << 10
)

// listQuery reads ?limit= (1 to maxLimit; omitted is 0, the store's
// default) and ?cursor=.
func listQuery(c echo.Context, maxLimit int) (limit int, cursor string, err error) {
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return 0, "", validationFailed(FieldError{Field: "limit",
				Message: "must be an integer from 1 to " + strconv.Itoa(maxLimit)})
		}
		limit = n
	}
	return limit, c.QueryParam("cursor"), nil
}

// answerPage answers a page of items (never null) and the next cursor,
// or err.
func answerPage[T any](c echo.Context, items []T, next string, err error) error {
	if err != nil {
		return err
	}
	if items == nil {
		items = []T{}
	}
	var cursor *string
	if next != "" {
		cursor = &next
	}
	return c.JSON(http.StatusOK, page[T]{Items: items, NextCursor: cursor})
}

// createSavedSearch answers 201 with the ETag. With an Idempotency-Key, a
// repeat answers the saved search as it is now, 200 with
// Idempotent-Replayed; another body with the key is 422 key_reused, and a
// repeat while the first runs is 409 in_progress.
func (s *Server) createSavedSearch(c echo.Context) error {
	key, hasKey, err := s.optionalKey(c)
	if err != nil {
		return err
	}
	req, err := decodeBody[savedsearch.CreateParams](c, bodyMandatory)
	if err != nil {
		return err
	}
	p := principal(c)
	req.Actor = p.Actor
	ctx := c.Request().Context()
	var ss *savedsearch.SavedSearch
	created := true
	if hasKey {
		if s.d.Plane == nil {
			return errNoPlane
		}
		ss, created, err = s.d.SavedSearches.CreateOnce(ctx, s.d.Plane, p.OrganizationID, key, req)
	} else {
		ss, err = s.d.SavedSearches.Create(ctx, p.OrganizationID, req)
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/saved-searches/"+ss.ID.String())
	c.Response().Header().Set(HeaderETag, etag(ss.Version))
	return c.JSON(keyedStatus(c, created, !created), ss)
}

// archivedQuery reads ?archived=: true or false (the default).
func archivedQuery(c echo.Context) (bool, error) {
	switch c.QueryParam("archived") {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, validationFailed(FieldError{Field: "archived", Message: "must be true or false"})
}

// listSavedSearches lists live (or ?archived=true archived) saved
// searches, newest first.
func (s *Server) listSavedSearches(c echo.Context) error {
	limit, cursor, err := listQuery(c, savedsearch.MaxListLimit)
	if err != nil {
		return err
	}
	archived, err := archivedQuery(c)
	if err != nil {
		return err
	}
	items, next, err := s.d.SavedSearches.List(c.Request().Context(), principal(c).OrganizationID,
		savedsearch.ListParams{Limit: limit, Cursor: cursor, Archived: archived})
	return answerPage(c, items, next, err)
}

// getSavedSearch reads a saved search with its ETag; ?archived=true also
// finds archived ones.
func (s *Server) getSavedSearch(c echo.Context, id uuid.UUID) error {
	archived, err := archivedQuery(c)
	if err != nil {
		return err
	}
	get := s.d.SavedSearches.Get
	if archived {
		get = s.d.SavedSearches.GetAny
	}
	ss, err := get(c.Request().Context(), principal(c).OrganizationID, id)
	return answerSavedSearch(c, ss, err)
}

// MediaTypeMergePatch is the Content-Type of an RFC 7396 merge patch.
const MediaTypeMergePatch = "application/merge-patch+json"

// updateSavedSearch changes the name and/or brief: application/json
// replaces each member given (at least one), application/merge-patch+json
// applies an RFC 7396 patch, anything else is 415. If-Match makes it
// conditional (412); the answer carries the new ETag.
func (s *Server) updateSavedSearch(c echo.Context, id uuid.UUID) error {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if mt, _, _ := mime.ParseMediaType(ct); mt == MediaTypeMergePatch {
		return s.mergePatchSavedSearch(c, id)
	} else if ct != "" && mt != echo.MIMEApplicationJSON {
		return &apiError{status: http.StatusUnsupportedMediaType, code: CodeUnsupportedMediaType,
			detail: "PATCH takes application/json (name and/or brief replaced whole) or application/merge-patch+json (RFC 7396)"}
	}
	req, err := decodeBody[savedsearch.UpdateParams](c, bodyMandatory)
	if err != nil {
		return err
	}
	if req.Name == nil && req.Brief == nil {
		return errNeitherNameNorBrief
	}
	req.IfMatch = ifMatch(c.Request().Header)
	ss, err := s.d.SavedSearches.Update(c.Request().Context(), principal(c).OrganizationID, id, req)
	return answerSavedSearch(c, ss, err)
}

// errNeitherNameNorBrief refuses a change that sets neither.
var errNeitherNameNorBrief = validationFailed(
	FieldError{Field: "name", Message: "is required when brief is absent"},
	FieldError{Field: "brief", Message: "is required when name is absent"})

// answerSavedSearch answers ss with its ETag, or err.
func answerSavedSearch(c echo.Context, ss *savedsearch.SavedSearch, err error) error {
	if err != nil {
		return err
	}
	c.Response().Header().Set(HeaderETag, etag(ss.Version))
	return c.JSON(http.StatusOK, ss)
}

// savedSearchPatch holds a merge patch's members as written, null
// included.
type savedSearchPatch struct {
	Name  json.RawMessage `json:"name,omitempty"`
	Brief json.RawMessage `json:"brief,omitempty"`
}

// mergePatchSavedSearch applies an RFC 7396 patch under the row lock, so
// concurrent patches serialize and If-Match is judged under the lock.
func (s *Server) mergePatchSavedSearch(c echo.Context, id uuid.UUID) error {
	body, err := decodeBody[savedSearchPatch](c, bodyMandatory)
	if err != nil {
		return err
	}
	if body.Name == nil && body.Brief == nil {
		return errNeitherNameNorBrief
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	ss, err := s.d.SavedSearches.UpdateFunc(c.Request().Context(), principal(c).OrganizationID, id,
		ifMatch(c.Request().Header), func(cur *savedsearch.SavedSearch) (savedsearch.UpdateParams, error) {
			return mergePatch(cur, raw)
		})
	return answerSavedSearch(c, ss, err)
}

// mergePatch returns the change patch raw makes to cur, checked as a
// request body; its errors are API answers.
func mergePatch(cur *savedsearch.SavedSearch, raw []byte) (savedsearch.UpdateParams, error) {
	var req savedsearch.UpdateParams
	doc, err := json.Marshal(struct {
		Name  string            `json:"name"`
		Brief savedsearch.Brief `json:"brief"`
	}{cur.Name, cur.Brief})
	if err != nil {
		return req, err
	}
	merged, err := jsonpatch.MergePatch(doc, raw)
	if err != nil {
		return req, malformedJSON("the merge patch could not be applied: " + err.Error())
	}
	if err := decodeJSON(merged, new(*savedsearch.UpdateParams)); err != nil {
		return req, err
	}
	if err := json.Unmarshal(merged, &req); err != nil {
		return req, validationFailed(FieldError{Field: "", Message: "the patched saved search is invalid"})
	}
	switch {
	case req.Name == nil:
		return req, validationFailed(FieldError{Field: "name", Message: "is required: the patch may not remove it"})
	case req.Brief == nil:
		return req, validationFailed(FieldError{Field: "brief", Message: "is required: the patch may not remove it"})
	}
	if err := validate.Struct(&req); err != nil {
		return req, validationProblem(err)
	}
	return req, nil
}

// replaceBaseline replaces the whole baseline, honouring If-Match; the
// answer carries the new ETag.
func (s *Server) replaceBaseline(c echo.Context, id uuid.UUID) error {
	req, err := decodeBody[savedsearch.Baseline](c, bodyMandatory)
	if err != nil {
		return err
	}
	ss, err := s.d.SavedSearches.ReplaceBaselineIf(c.Request().Context(), principal(c).OrganizationID, id, req,
		ifMatch(c.Request().Header))
	return answerSavedSearch(c, ss, err)
}

func (s *Server) listSnapshots(c echo.Context, id uuid.UUID) error {
	limit, cursor, err := listQuery(c, snapshot.MaxListLimit)
	if err != nil {
		return err
	}
	items, next, err := s.d.Snapshots.ListBySavedSearch(c.Request().Context(), principal(c).OrganizationID, id,
		snapshot.ListParams{Limit: limit, Cursor: cursor})
	return answerPage(c, items, next, err)
}

// startSavedSearch admits a Run on a frozen copy of the saved search,
// checking path, key and body before any claim. Prefer: wait=N waits for
// an in-flight start of the same key instead of answering 409.
func (s *Server) startSavedSearch(c echo.Context, id uuid.UUID) error {
	key, err := idempotencyKey(c.Request().Header)
	if err != nil {
		return err
	}
	req, err := decodeBody[startRequest](c, bodyOptional)
	if err != nil {
		return err
	}
	opts, err := admission.NewStartOptions(req.MaxResults, req.Note)
	if err != nil {
		return refusedInput(err)
	}
	wait, applied := s.waitPreference(c.Request().Header)
	p := principal(c)
	res, err := s.d.Starter.StartSavedSearch(c.Request().Context(), admission.SavedSearchStart{
		Org:            p.OrganizationID,
		SavedSearchID:  id,
		IdempotencyKey: key,
		Options:        opts,
		Actor:          p.Actor,
		Wait:           wait,
	})
	markPreferenceApplied(c, applied, err)
	if err != nil {
		return err
	}
	return startAnswer(c, res)
}

// MaxDirectInputBytes bounds a direct start's input JSON, as sent.
const MaxDirectInputBytes = admission.MaxInputBytes

// startDirect admits a capability or definition Run.
func (s *Server) startDirect(c echo.Context) error {
	key, err := idempotencyKey(c.Request().Header)
	if err != nil {
		return err
	}
	req, err := decodeBody[directStartRequest](c, bodyMandatory)
	if err != nil {
		return err
	}
	p := principal(c)
	start := admission.DirectStart{Org: p.OrganizationID, Kind: req.Kind, Name: req.Name, Input: req.Input,
		IdempotencyKey: key, Actor: p.Actor}
	if err := start.Validate(); err != nil {
		return refusedInput(err)
	}
	res, err := s.d.Starter.StartDirect(c.Request().Context(), start)
	if err != nil {
		return err
	}
	return startAnswer(c, res)
}

// startAnswer writes a start's answer: 201 for the admission, 200 with
// Idempotent-Replayed: true and the same body for every repeat.
func startAnswer(c echo.Context, res admission.Result) error {
	h := c.Response().Header()
	h.Set(echo.HeaderLocation, "/v1/runs/"+res.Run.ID.String())
	status := http.StatusCreated
	if !res.Created {
		status = http.StatusOK
		h.Set(HeaderIdempotentReplayed, "true")
	}
	body := startResponse{Run: res.Run, Snapshot: res.Snapshot}
	if c.Request().URL.RawQuery != "" || c.Echo().Debug {
		return c.JSON(status, body) // ?pretty and debug indent it
	}
	buf := answerBuffers.Get().(*[]byte)
	b, err := body.appendJSON((*buf)[:0])
	if err == nil {
		err = c.Blob(status, echo.MIMEApplicationJSON, b)
	}
	if cap(b) <= maxPooledAnswer {
		*buf = b[:0]
		answerBuffers.Put(buf)
	}
	return err
}

// answerBuffers are the buffers start answers are written in. One larger
// than maxPooledAnswer (a direct Run's input is up to
// admission.MaxInputBytes) is left to the garbage collector.
var answerBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledAnswer = 8 << 10

// appendJSON appends the answer as c.JSON writes it (encoding/json,
// ending with a newline), the Run without reflection: every start and
// replay answers with it (docs/benchmarks.md, "Hand-tuned JSON paths").
func (r startResponse) appendJSON(b []byte) (_ []byte, err error) {
	b = append(b, `{"run":`...)
	if r.Run == nil {
		b = append(b, "null"...)
	} else if b, err = r.Run.AppendJSON(b); err != nil {
		return nil, err
	}
	sj, err := json.Marshal(r.Snapshot) // null for nil
	if err != nil {
		return nil, err
	}
	b = append(b, `,"snapshot":`...)
	b = append(b, sj...)
	return append(b, "}\n"...), nil
}

// listRuns answers GET /v1/runs: a page of the organization's Runs, newest
// first, kept by the filters the query sets. Every filter is checked before
// any SQL runs; a bad one is 400 validation_failed naming it: a
// saved_search_id that is not a UUID, a status that is not a Run status, an
// idempotency_key that is not 1 to MaxIdempotencyKeyLen printable ASCII
// characters (no space at either end), a created_after or created_before
// that is not an RFC 3339 instant of the years 1 to 9999 (in UTC), and
// created_after later than created_before.
func (s *Server) listRuns(c echo.Context) error {
	limit, cursor, err := listQuery(c, runs.MaxListLimit)
	if err != nil {
		return err
	}
	params := runs.ListParams{Limit: limit, Cursor: cursor}
	if v := c.QueryParam("saved_search_id"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			return validationFailed(FieldError{Field: "saved_search_id", Message: "must be a UUID"})
		}
		params.SavedSearchID = &id
	}
	if v := c.QueryParam("status"); v != "" {
		if runs.Rank(v) < 0 {
			return validationFailed(FieldError{Field: "status",
				Message: "must be one of queued, dispatched, running, succeeded, failed, cancelled"})
		}
		params.Status = v
	}
	if v := c.QueryParam("idempotency_key"); v != "" {
		if k, err := ParseIdempotencyKey(v); err != nil || k != v {
			return validationFailed(FieldError{Field: "idempotency_key",
				Message: "must be 1 to 255 printable ASCII characters, with no space at either end"})
		}
		params.IdempotencyKey = v
	}
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"created_after", &params.CreatedAfter}, {"created_before", &params.CreatedBefore}} {
		if v := c.QueryParam(f.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil || t.Before(keyset.MinInstant) || t.After(keyset.MaxInstant) {
				return validationFailed(FieldError{Field: f.name,
					Message: "must be an RFC 3339 instant of the years 0001 to 9999 in UTC, such as 2026-12-01T09:31:12Z"})
			}
			*f.dst = t
		}
	}
	if !params.CreatedAfter.IsZero() && !params.CreatedBefore.IsZero() && params.CreatedAfter.After(params.CreatedBefore) {
		return validationFailed(FieldError{Field: "created_after", Message: "must not be later than created_before"})
	}
	items, next, err := s.d.Runs.List(c.Request().Context(), principal(c).OrganizationID, params)
	return answerPage(c, items, next, err)
}

func (s *Server) getRun(c echo.Context, id uuid.UUID) error {
	ctx, org := c.Request().Context(), principal(c).OrganizationID
	run, err := s.d.Runs.Get(ctx, org, id)
	if err != nil {
		return err
	}
	d, err := s.d.Dispatches.Get(ctx, org, id)
	if err != nil && !errors.Is(err, dispatch.ErrNotFound) {
		return err
	}
	b, err := runWithDispatch(run, d)
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b)
}
