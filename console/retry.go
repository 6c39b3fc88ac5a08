package console

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/searchd/searchd/dispatch"
)

// retryForm is the state of the Run page's retry form after a refused
// retry: the message of why (one of the fixed texts below) and the reason
// typed, kept in the field.
type retryForm struct {
	Error  string
	Reason string
}

// The refusals of a retry, fixed texts: nothing of the request is echoed
// in them.
var (
	retryNoReason = fmt.Sprintf("A reason is required: say, in one line of at most %d characters, what was fixed so that the runtime "+
		"will take the Run now. It is recorded with your name.", dispatch.MaxReasonLen)
	retryBadReason = fmt.Sprintf("The reason must be one line of at most %d characters of text, without control characters.",
		dispatch.MaxReasonLen)
	retryNoActor = "Your session carries no name (the token's sub) to record with the retry, " +
		"or one longer than 255 bytes; sign in with a credential that names you."
	retryNotFailed = "Only a failed dispatch is retried, and this one is not failed (any more): a pending one is delivered again " +
		"by itself and a delivered one is done. Nothing was retried."
)

// checkRetryReason returns reason trimmed, or the message of why it is
// refused: empty, over dispatch.MaxReasonLen characters, not UTF-8, or
// more than one line.
func checkRetryReason(reason string) (string, string) {
	why := strings.TrimSpace(reason)
	switch {
	case why == "":
		return "", retryNoReason
	case !utf8.ValidString(why) || utf8.RuneCountInString(why) > dispatch.MaxReasonLen || strings.ContainsFunc(why, unicode.IsControl):
		return "", retryBadReason
	}
	return why, ""
}

// retryDispatch retries the failed dispatch of a Run of the session's
// organization, as `searchd runs dispatch retry` does
// (dispatch.Store.Retry): the dispatch is pending and due now, and the
// retry is recorded with the session's actor, the reason and the answer
// that had failed it, which the Run page's timeline then shows.
//
// It answers 403 to a person without the operator role (an
// organization's member sees the Run, but retrying is the operator's
// call); 400 with the Run's page and the message for a reason missing,
// too long or of more than one line, or a session without an actor; 409
// with the Run's page for a dispatch that is not failed (nothing is
// written); 404 for a Run the organization does not have or without a
// dispatch. A retry made redirects to the Run's page (post, redirect,
// get).
func (c *Console) retryDispatch(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	id := pathID(r)
	if !s.IsOperator() {
		c.fail(w, r, http.StatusForbidden, "Operators only",
			"Retrying a failed dispatch is for operators of the platform: it needs the operator role, which an organization's member never has.")
		return
	}
	typed := r.PostFormValue("reason")
	reason, problem := checkRetryReason(typed)
	if problem != "" {
		c.retryRefused(w, r, http.StatusBadRequest, problem, typed)
		return
	}
	d, err := c.d.Dispatches.Retry(r.Context(), dispatch.RetryParams{RunID: id, OrganizationID: s.OrganizationID, Actor: s.Actor, Reason: reason})
	switch {
	case errors.Is(err, dispatch.ErrNotFound):
		c.notFound(w, r)
		return
	case errors.Is(err, dispatch.ErrNotFailed):
		c.retryRefused(w, r, http.StatusConflict, retryNotFailed, "")
		return
	case errors.Is(err, dispatch.ErrInvalid):
		// The reason passed above: the session's actor was refused.
		c.retryRefused(w, r, http.StatusBadRequest, retryNoActor, typed)
		return
	case err != nil:
		c.internal(w, r, err)
		return
	}
	c.log.LogAttrs(r.Context(), slog.LevelWarn, "dispatch retried by an operator in the console",
		slog.String("run_id", d.RunID.String()), slog.String("organization_id", d.OrganizationID.String()),
		slog.String("actor", s.Actor), slog.String("reason", reason), slog.Int("attempts", d.Attempts), slog.Int("retries", d.Retries))
	redirectOutcome(w, r, "/console/runs/"+id.String(), "dispatch", "retried")
}

// retryRefused renders the Run's page with status and the message of why
// the retry was refused beside its form, the reason typed kept.
func (c *Console) retryRefused(w http.ResponseWriter, r *http.Request, status int, msg, typed string) {
	v, err := c.run(r, newFilters(r))
	if c.readFailed(w, r, err) {
		return
	}
	p := v.data.(runPage)
	p.Retry = &retryForm{Error: msg, Reason: typed}
	c.render(w, r, status, v.name, v.title, p)
}
