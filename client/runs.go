package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
)

// headerIdempotencyKey names a start; headerReplayed marks a replayed one.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerReplayed       = "Idempotent-Replayed"
)

// maxKeyLen is the longest Idempotency-Key the API accepts.
const maxKeyLen = 255

// NewIdempotencyKey returns a fresh Idempotency-Key: a random UUID. Mint
// one, persist it with the intent to start, and pass it with
// [WithIdempotencyKey] on every try, so that a start survives the
// restart of the process that asked for it.
func NewIdempotencyKey() string { return uuid.NewString() }

// StartOption tunes one start, or one create (a saved search, a provider
// job registration): the calls that carry an Idempotency-Key.
type StartOption func(*startConfig)

type startConfig struct {
	key    string
	keySet bool
}

// WithIdempotencyKey sends the start with key instead of a freshly minted
// one. The key is 1 to 255 printable ASCII characters that neither start
// nor end with a space; others fail the call with
// [ErrInvalidIdempotencyKey] before anything is sent. Repeats with the same
// key and an equal request replay the first admission; the same key with a
// different request answers [ErrKeyReused].
func WithIdempotencyKey(key string) StartOption {
	return func(c *startConfig) { c.key, c.keySet = key, true }
}

// keyed returns r carrying the Idempotency-Key opts choose (a fresh one
// by default), and so safe to repeat.
func keyed(r request, opts []StartOption) request {
	var cfg startConfig
	for _, o := range opts {
		o(&cfg)
	}
	if !cfg.keySet {
		cfg.key = NewIdempotencyKey()
	} else if err := checkKey(cfg.key); err != nil && r.err == nil {
		r.err = err
	}
	r.key = cfg.key
	return r
}

// checkKey refuses a key the API would refuse, before it is sent: net/http
// itself refuses some (control characters) with an error that is not the
// server's answer.
func checkKey(key string) error {
	if key == "" || len(key) > maxKeyLen || key[0] == ' ' || key[len(key)-1] == ' ' {
		return fmt.Errorf("client: idempotency key: %w: 1 to %d printable ASCII characters, no space at either end", ErrInvalidIdempotencyKey, maxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return fmt.Errorf("client: idempotency key: %w: byte %#x at %d is not printable ASCII", ErrInvalidIdempotencyKey, key[i], i)
		}
	}
	return nil
}

// keyHeader returns the Idempotency-Key header value that names key. The
// server reads a value that starts with a double quote as a
// structured-field string (RFC 8941), and a bare value with a comma as a
// list it refuses, so such keys are sent as a string, escaped; any other
// key is sent as it is.
func keyHeader(key string) string {
	if !strings.HasPrefix(key, `"`) && !strings.Contains(key, ",") {
		return key
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
}

// StartSavedSearch starts a Run on a frozen snapshot of the saved search
// id, or replays the Run its key already started. The call mints one
// Idempotency-Key, unless [WithIdempotencyKey] gives it, and sends every
// retry with it, so however many attempts it makes, the saved search is
// started at most once for the key.
//
// Errors: [ErrNotFound] for a saved search the organization does not have
// live; [ErrKeyReused] when the key started a different request;
// [ErrValidation] for options out of range; [ErrInProgress] when another
// request with the key was still being prepared after the retries ran out;
// [ErrInvalidIdempotencyKey]. After a connection error or ErrInProgress
// the start may or may not be admitted; only a repeat with the same key
// settles it, so a caller that must know mints the key itself
// ([NewIdempotencyKey]) and passes it with WithIdempotencyKey.
func (c *Client) StartSavedSearch(ctx context.Context, id string, o StartOptions, opts ...StartOption) (*StartResult, error) {
	return c.start(ctx, keyed(idRequest(http.MethodPost, "/v1/saved-searches/", id, "/start", o, repeatable), opts))
}

// StartRun starts a capability or definition Run, or replays the Run its
// key already started, with the key rules of [Client.StartSavedSearch].
//
// Errors: [ErrValidation] for a kind, name or input the API refuses;
// [ErrKeyReused] when the key started a Run for a different kind, name or
// input; [ErrInvalidIdempotencyKey].
func (c *Client) StartRun(ctx context.Context, d DirectStart, opts ...StartOption) (*StartResult, error) {
	return c.start(ctx, keyed(newRequest(http.MethodPost, "/v1/runs", d, repeatable), opts))
}

func (c *Client) start(ctx context.Context, r request) (*StartResult, error) {
	r.preferWait = c.retry.PreferWait
	var out StartResult
	res, err := c.call(ctx, r, &out)
	if err != nil {
		return nil, err
	}
	out.Created = res.status == http.StatusCreated
	out.Replayed = res.header.Get(headerReplayed) == "true"
	out.IdempotencyKey = r.key
	out.Attempts = res.attempts
	return &out, nil
}

// GetRun reads a Run, with its dispatch to the runtime. It returns
// [ErrNotFound] for one of another organization or none.
func (c *Client) GetRun(ctx context.Context, id string) (*RunDetail, error) {
	return fetch[RunDetail](ctx, c, get("/v1/runs/", id, ""))
}

// ListRuns returns a page of Runs, newest first, kept by p's filters. It
// returns [ErrValidation] for a SavedSearchID that is not a UUID, an
// unknown Status, an IdempotencyKey the API refuses, a CreatedAfter later
// than CreatedBefore or outside the years 1 to 9999, a limit out of range
// or a cursor the server did not write.
func (c *Client) ListRuns(ctx context.Context, p ListRunsParams) (*RunPage, error) {
	q := url.Values{}
	for name, v := range map[string]string{"saved_search_id": p.SavedSearchID, "status": p.Status,
		"idempotency_key": p.IdempotencyKey} {
		if v != "" {
			q.Set(name, v)
		}
	}
	for name, t := range map[string]time.Time{"created_after": p.CreatedAfter, "created_before": p.CreatedBefore} {
		if !t.IsZero() {
			q.Set(name, t.Format(time.RFC3339Nano))
		}
	}
	return fetch[RunPage](ctx, c, newRequest(http.MethodGet, "/v1/runs"+listQuery(q, p.Limit, p.Cursor), nil, repeatable))
}

// ReportRunStatus reports the status of Run id, for a runtime: the client
// must carry a runtime credential of the Run's organization (a token
// minted by `searchd token --runtime`); a user token is refused with
// [ErrInsufficientScope]. The report is a value to set, so it is retried
// like a read: the same report twice changes the Run once, and answers the
// Run as it is, whether this call or an earlier one changed it. It returns
// the Run after the report.
//
// Errors: [ErrValidation] for a report the API refuses (a status other
// than running, succeeded, failed or cancelled; a result with another
// status than succeeded; an error with another than failed or cancelled);
// [ErrNotFound] for a Run of another organization or none;
// [ErrRunFinished] when the Run finished otherwise (the [APIError]'s
// CurrentStatus says how), which is final: do not retry it.
func (c *Client) ReportRunStatus(ctx context.Context, id string, r StatusReport) (*Run, error) {
	return fetch[Run](ctx, c, idRequest(http.MethodPut, "/v1/runs/", id, "/status", r, repeatable))
}

// CancelRun cancels Run id. A Run not yet handed to the runtime (queued)
// is cancelled at once and never dispatched; a Run the runtime has
// (dispatched or running) gets its CancelRequestedAt set and searchd asks
// the runtime to stop it: it becomes cancelled when the runtime reports
// it, and one that succeeds or fails first keeps how it finished. Poll
// [Client.GetRun] until its status is final. A cancel is idempotent, so it
// is retried like a read: cancelling a Run cancelled (or whose cancel was
// requested) already answers the Run as it is and sends nothing again.
//
// Errors: [ErrValidation] for a reason the API refuses; [ErrNotFound]
// for a Run of another organization or none; [ErrRunFinished] for a Run
// that succeeded or failed (the [APIError]'s CurrentStatus says which),
// which is final.
func (c *Client) CancelRun(ctx context.Context, id string, r CancelRequest) (*Run, error) {
	return fetch[Run](ctx, c, idRequest(http.MethodPost, "/v1/runs/", id, "/cancel", r, repeatable))
}
