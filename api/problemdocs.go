package api

import (
	"html/template"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// problemsPath serves the documentation of the problem codes: the "type"
// of every problem is problemsPath/<code>, a page that says what the code
// means and what a client does about it.
const problemsPath = "/problems"

// problemDoc documents one problem code.
type problemDoc struct {
	Code, Title string
	Status      int
	// What the code means, and what a client does about it.
	Meaning, Action string
}

// problemDocs documents every code the API answers with. A test checks
// that every code constant has an entry.
var problemDocs = []problemDoc{
	{CodeTooManyStreams, "Too many event streams", 503, "This server has the most Run event streams open that it serves at once (GET /v1/runs/{id}/events; SEARCHD_EVENT_STREAMS_MAX, 1000 by default). Nothing was read.",
		"Retry after Retry-After (another replica may have room), or poll GET /v1/runs/{id} meanwhile."},
	{CodeMissingIdempotencyKey, "Idempotency-Key header missing", 400, "A start (POST /v1/saved-searches/{id}/start, POST /v1/runs) was sent without an Idempotency-Key header.",
		"Mint one key per user action (a UUID) and send it on the request and on every retry of it."},
	{CodeInvalidIdempotencyKey, "Idempotency-Key header invalid", 400, "The Idempotency-Key header is not 1 to 255 printable ASCII characters (bare, or as a structured-field string), or it holds more than one key: it was sent twice, or one bare value holds a comma (a list).",
		"Send exactly one key of printable ASCII, such as a UUID."},
	{CodeMalformedJSON, "Malformed JSON body", 400, "The request body is not one well-formed UTF-8 JSON object, or it is empty where a body is required.",
		"Fix the body; the detail names the byte where parsing stopped."},
	{CodeValidationFailed, "Validation failed", 400, "The body or a query parameter holds fields the API refuses; errors lists each field (a JSON path) and what is wrong with it.",
		"Fix the named fields. Limits are in the OpenAPI document."},
	{CodeUnauthorized, "Unauthorized", 401, "No valid bearer token: none was sent, or the token sent is not an unexpired JWT that names an organization, signed with the server's HS256 secret or by its OpenID Connect provider for its audience, within the maximum lifetime (WWW-Authenticate then says error=\"invalid_token\"). On a provider callback: the Standard Webhooks signature or timestamp did not verify.",
		"Get a new token (from your identity provider, or searchd token) and retry; do not retry with the same token."},
	{CodeNotFound, "Not found", 404, "No such resource in your organization: it does not exist, belongs to another organization, is archived (for a saved search read without ?archived=true), or its path id is not a UUID.",
		"Check the id; list the resources to find it."},
	{CodeMethodNotAllowed, "Method not allowed", 405, "The path exists but does not support the request method. The Allow header lists the methods it does support.",
		"Use one of the methods in Allow."},
	{CodeInProgress, "Request in progress", 409, "Another request with the same Idempotency-Key is still being processed: its answer is not ready yet. Retry-After is a hint of when it is likely to be (about a second).",
		"Retry the same request with the same key after Retry-After, or send Prefer: wait=N on a start to wait for the answer in one request. Never mint a new key for it."},
	{CodeAlreadyRegistered, "Already registered", 409, "The provider job id is registered in your organization already, for another Run.",
		"A provider job id names one job of an organization: read the existing job, or register the provider's id of the other job."},
	{CodePreconditionFailed, "Precondition failed", 412, "The If-Match header names a version of the saved search that is no longer current: someone changed it since you read it. current_version and the ETag header carry the version it is at.",
		"Read the saved search again, reapply your change to what it is now, and send it with the new ETag in If-Match."},
	{CodeInsufficientScope, "Credential not allowed here", 403, "The bearer token is valid but does not open this route: a runtime credential (role \"runtime\") on any route but PUT /v1/runs/{id}/status, or an organization's user token on that route; a service key without the scope the route needs (runs:report, starts:write or read); or, on /v1/service-keys, any caller but an organization's admin or an operator. WWW-Authenticate says error=\"insufficient_scope\".",
		"Use the credential the route takes: a user token for the API, a runtime credential (searchd token --runtime) for status reports."},
	{CodeRunFinished, "Run finished", 409, "The status report would change a Run that finished (succeeded, failed or cancelled): another terminal status, another result or error, or running after the end; or a cancel (POST /v1/runs/{id}/cancel) found the Run succeeded or failed. current_status and current_version say how it finished. A report of exactly how it finished is answered 200, changing nothing.",
		"Do not retry: the Run's outcome is recorded and final. Read the Run to see it."},
	{CodeScheduleLimit, "Schedule limit reached", 409, "Setting a schedule on one more saved search would give your organization more schedules than the server allows (SEARCHD_SCHEDULE_MAX_PER_ORG, 1000 by default). Changing an existing schedule is not refused.",
		"Remove a schedule you no longer need (DELETE /v1/saved-searches/{id}/schedule), or ask the operator for a higher limit."},
	{CodeWebhookEndpointLimit, "Webhook endpoint limit reached", 409, "Creating one more webhook endpoint would give your organization more than the 100 it may have.",
		"Delete an endpoint you no longer need (DELETE /v1/webhook-endpoints/{id}); an endpoint receives every event type unless it names some, so one endpoint may serve several consumers."},
	{CodeRateLimited, "Too many requests waiting", 429, "Every seat of the server was taken and your request could not be served in time: your organization (or, for a callback, the provider) already had the most requests waiting that the server queues for one, or the request waited the longest a request waits (SEARCHD_SEAT_QUEUE_LENGTH, SEARCHD_SEAT_MAX_WAIT). Nothing was done. Retry-After is estimated from how fast the server is serving.",
		"Retry after Retry-After with the same Idempotency-Key. A server with free seats never answers this, whoever sends the request: it means the server is full."},
	{CodePayloadTooLarge, "Payload too large", 413, "The request body is larger than the server's limit (SEARCHD_MAX_BODY_BYTES, 4 MiB by default), or the route takes no body (DELETE, pause, resume) and one was sent.",
		"Send a smaller body; a baseline holds at most 10,000 items."},
	{CodeUnsupportedMediaType, "Unsupported media type", 415, "The body's Content-Type is not one the operation takes: application/json everywhere, and application/merge-patch+json (RFC 7396) on PATCH /v1/saved-searches/{id}.",
		"Send Content-Type: application/json (or application/merge-patch+json for a merge patch)."},
	{CodeKeyReused, "Idempotency-Key reused", 422, "The Idempotency-Key was used before for a different request (another body, saved search or kind). A key names one request.",
		"Mint a new key for a new request; reuse a key only to retry the very same request."},
	{CodeUnavailable, "Service unavailable", 503, "The service cannot reach its database, or is not ready; Retry-After says when to try again.",
		"Retry after Retry-After with the same Idempotency-Key."},
	{CodeInternal, "Internal server error", 500, "The server failed to answer. The failure is logged with the problem's request_id.",
		"Retry later; report the request_id if it persists."},
	{CodeMissingDeliveryID, "webhook-id header missing", 400, "A provider callback came without a webhook-id header (Standard Webhooks).",
		"The provider must send webhook-id, webhook-timestamp and webhook-signature."},
	{CodeInvalidDeliveryID, "webhook-id header invalid", 400, "A provider callback's webhook-id is not 1 to 255 printable ASCII characters.",
		"The provider must send one printable webhook-id per delivery, the same on every redelivery."},
}

// problemDocByCode indexes problemDocs by code; its Title is every
// problem's title.
var problemDocByCode = func() map[string]problemDoc {
	m := make(map[string]problemDoc, len(problemDocs))
	for _, d := range problemDocs {
		m[d.Code] = d
	}
	return m
}()

var problemPages = template.Must(template.New("page").Funcs(template.FuncMap{
	"status": http.StatusText,
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{if .One}}{{.One.Code}} — {{end}}searchd problem types</title>
<style>body{font-family:sans-serif;max-width:46em;margin:2em auto;padding:0 1em;line-height:1.45}code{background:#f3f3f3;padding:0 .2em}section{border-top:1px solid #ddd;padding:.4em 0}</style>
</head><body>
<h1>{{if .One}}<code>{{.One.Code}}</code>{{else}}searchd problem types{{end}}</h1>
<p>Every error of the searchd API is an RFC 9457 problem (<code>application/problem+json</code>) whose <code>type</code> is the page of its <code>code</code> here, and whose <code>request_id</code> is the request's <code>X-Request-Id</code>.</p>
{{range .Docs}}<section id="{{.Code}}"><h2><a href="{{$.Base}}/{{.Code}}"><code>{{.Code}}</code></a> — {{.Status}} {{status .Status}}: {{.Title}}</h2>
<p>{{.Meaning}}</p><p><strong>What to do:</strong> {{.Action}}</p></section>
{{end}}{{if .One}}<p><a href="{{.Base}}">All problem types</a></p>{{end}}
</body></html>
`))

type problemPage struct {
	One  *problemDoc
	Docs []problemDoc
	Base string
}

// serveProblemIndex serves the page of every problem type.
func (s *Server) serveProblemIndex(c echo.Context) error {
	return renderProblems(c, problemPage{Docs: problemDocs, Base: problemsPath})
}

// serveProblemPage serves the page a problem's type names; an unknown code
// is a 404 problem.
func (s *Server) serveProblemPage(c echo.Context) error {
	doc, ok := problemDocByCode[strings.TrimSuffix(c.Param("code"), ".html")]
	if !ok {
		return errNoSuchPath
	}
	return renderProblems(c, problemPage{One: &doc, Docs: []problemDoc{doc}, Base: problemsPath})
}

func renderProblems(c echo.Context, p problemPage) error {
	var b strings.Builder
	if err := problemPages.Execute(&b, p); err != nil {
		return err
	}
	return c.HTML(http.StatusOK, b.String())
}
