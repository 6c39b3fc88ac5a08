package console

import (
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/searchd/searchd/tools"
)

// The "Tool calls to decide" panel: tool calls sent to a vendor without
// idempotency support that ended without an acknowledgement. Nothing
// retries them by itself (a retry is a coin flip between a duplicate and a
// delivery); a person looks at the evidence and marks the call delivered,
// or authorizes one retry with the same key, through tools.Resolver, which
// records the decision with the session's actor.

type uncertainPage struct {
	Calls              []tools.UncertainCall
	Resolutions        []tools.PastResolution
	Org, Scope         string
	Cursor, Next       string
	DecCursor, DecNext string
	Resolved, Refused  string
}

func (c *Console) uncertain(r *http.Request, f *filters) (view, error) {
	org := f.id("org")
	p := uncertainPage{Org: idText(org), Scope: f.text("scope", maxFilterLen), Cursor: f.cursor("cursor"), DecCursor: f.cursor("decisions"),
		Resolved: outcome(r, "resolved", "resolved"), Refused: outcome(r, "resolve-refused", "refused")}
	if err := f.err(); err != nil {
		return view{}, err
	}
	params := tools.InspectParams{OrganizationID: org, Scope: p.Scope, Limit: pageSize, Cursor: p.Cursor}
	var err error
	if p.Calls, p.Next, err = c.d.Uncertain.Uncertain(r.Context(), params); err != nil {
		return view{}, err
	}
	params.Cursor = p.DecCursor
	p.Resolutions, p.DecNext, err = c.d.Uncertain.Resolutions(r.Context(), params)
	return view{"uncertain", "Tool calls to decide", p}, err
}

// resolve records the operator's decision about one uncertain call.
func (c *Console) resolve(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	refused := func(code string) { redirectOutcome(w, r, "/console/operator/uncertain", "refused", code) }
	org, err := uuid.Parse(r.PostFormValue("org"))
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, "Form not understood", "The form did not name the call's organization.")
		return
	}
	p := tools.ResolveParams{OrganizationID: org, Scope: r.PostFormValue("scope"), Key: r.PostFormValue("key"),
		Resolution: tools.Resolution(r.PostFormValue("as")), Actor: s.Actor, Reason: r.PostFormValue("reason")}
	res, err := c.d.Resolver.Resolve(r.Context(), p)
	switch {
	case errors.Is(err, tools.ErrInvalid):
		c.log.InfoContext(r.Context(), "console: a decision about an uncertain call was refused", "error", err.Error())
		refused("invalid")
	case errors.Is(err, tools.ErrNoCall):
		refused("no_call")
	case errors.Is(err, tools.ErrNotUncertain):
		refused("not_uncertain")
	case err != nil:
		c.internal(w, r, err)
	default:
		c.log.WarnContext(r.Context(), "uncertain tool call resolved by an operator in the console",
			"organization_id", org.String(), "scope", p.Scope, "resolution", string(res.Resolution), "actor", s.Actor)
		redirectOutcome(w, r, "/console/operator/uncertain", "resolved", string(res.Resolution))
	}
}
