package console

import (
	"errors"
	"net/http"
	"net/url"
)

// Outcomes of the operator's forms. A form redirects back with a code in
// the query; the page prints only the fixed message of a known code, so a
// crafted link cannot make the console say anything it did not write.

// outcomeMessages are the messages of the codes, by the parameter that
// carries them.
var outcomeMessages = map[string]map[string]string{
	// Why a force-release was refused.
	"release-refused": {
		"reason":    "a reason is required: say, in one line of at most 500 characters, why the claim is released; it is recorded",
		"gone":      "the claim is gone already: it was released, or reclaimed and completed, since the page was loaded",
		"changed":   "the claim changed since the page was loaded (a worker reclaimed it); look again before releasing",
		"completed": "the claim is completed: it is the answer every repeat of its key replays, and is never released",
		"live":      "the claim's lease is live again: a worker holds it",
		"raced":     "the claim changed as it was being released; nothing was released",
	},
	// Why a decision about an uncertain call was refused.
	"resolve-refused": {
		"invalid": "a reason is required, in one line of at most 500 characters (it is recorded), " +
			"and the form must name the call and a decision as the page did",
		"no_call":       "no answer is stored under that key any more",
		"not_uncertain": "the call is not uncertain (any more): it is in flight, answered, or a person decided already",
	},
	// A service key revoked, or why not.
	"key-revoked": {
		"revoked": "the key is revoked: every replica refuses it within 3 seconds",
		"gone":    "no such key in this organization",
	},
	// A webhook endpoint changed, or why not.
	"webhook-changed": {
		"enabled":  "the endpoint is enabled: its pending deliveries are due at once",
		"disabled": "the endpoint is disabled: nothing is sent to it until it is enabled",
		"deleted":  "the endpoint is deleted, with its deliveries",
		"gone":     "no such endpoint in this organization",
	},
	// A decision recorded.
	"resolved": {
		"delivered": "the call was marked delivered",
		"retry":     "one retry with the same key is authorized",
	},
}

// outcome returns the message of the code in parameter param of r, read as
// one of kind's codes; "" when the parameter is absent or names no code.
func outcome(r *http.Request, kind, param string) string {
	return outcomeMessages[kind][r.URL.Query().Get(param)]
}

// redirectOutcome sends the browser back to page with code in param.
func redirectOutcome(w http.ResponseWriter, r *http.Request, page, param, code string) {
	http.Redirect(w, r, page+"?"+url.Values{param: {code}}.Encode(), http.StatusSeeOther)
}

// redirectChange answers a form that changed a record: back to page with
// code in param, or "gone" when err is notFound; another error is a
// logged 500.
func (c *Console) redirectChange(w http.ResponseWriter, r *http.Request, err, notFound error, page, param, code string) {
	switch {
	case errors.Is(err, notFound):
		redirectOutcome(w, r, page, param, "gone")
	case err != nil:
		c.internal(w, r, err)
	default:
		redirectOutcome(w, r, page, param, code)
	}
}
