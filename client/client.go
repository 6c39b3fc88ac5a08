package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Options configure a [Client]. Exactly one of Token and TokenSource is
// required.
type Options struct {
	// HTTPClient sends the requests. Default: a client of the package's own
	// with a clone of http.DefaultTransport and no overall timeout (each
	// attempt is bounded by Retry.AttemptTimeout).
	HTTPClient *http.Client
	// Token is the bearer token of every request: an access token of the
	// company's identity provider, an HS256 JWT such as `searchd token`
	// prints, or a service key (sdk_...) of the organization with the
	// scopes of the calls made (see docs/auth.md).
	Token string
	// TokenSource returns the bearer token of each attempt, for tokens that
	// expire and are renewed while a call retries. An error it returns ends
	// the call; the error is wrapped.
	TokenSource func(ctx context.Context) (string, error)
	// Retry says how often and how long calls retry. The zero value is the
	// default policy; see [RetryPolicy].
	Retry RetryPolicy
	// UserAgent is the User-Agent header. Default [DefaultUserAgent].
	UserAgent string
}

// DefaultUserAgent is the User-Agent of a client whose Options name none.
const DefaultUserAgent = "searchd-go-client/1"

// Client calls one searchd. It is safe for concurrent use.
type Client struct {
	base      string // scheme://host[/prefix], without a trailing slash
	http      *http.Client
	token     func(ctx context.Context) (string, error)
	retry     RetryPolicy // with its defaults
	userAgent string

	// sleep waits d or until ctx ends, when it returns ctx's error. Tests
	// replace it to see the waits without spending them.
	sleep func(ctx context.Context, d time.Duration) error
}

// New returns a client of the searchd at baseURL, such as
// "https://searchd.example.com" (a path prefix is kept: requests go to
// baseURL + "/v1/..."). It returns an error when baseURL is not an absolute
// http or https URL, when not exactly one of opts.Token and
// opts.TokenSource is set, or when opts.Retry fails [RetryPolicy.Validate].
func New(baseURL string, opts Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("client: base URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return nil, fmt.Errorf("client: base URL %q: must be an absolute http or https URL", baseURL)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return nil, fmt.Errorf("client: base URL %q: must have no query, fragment or user info", baseURL)
	case (opts.Token == "") == (opts.TokenSource == nil):
		return nil, errors.New("client: exactly one of Options.Token and Options.TokenSource is required")
	}
	if err := opts.Retry.Validate(); err != nil {
		return nil, err
	}
	c := &Client{
		base:      strings.TrimRight(u.String(), "/"),
		http:      opts.HTTPClient,
		token:     opts.TokenSource,
		retry:     opts.Retry.WithDefaults(),
		userAgent: cmp.Or(opts.UserAgent, DefaultUserAgent),
		sleep:     sleep,
	}
	if c.http == nil {
		c.http = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if c.token == nil {
		tok := opts.Token
		c.token = func(context.Context) (string, error) { return tok, nil }
	}
	return c, nil
}

// request is one call to the API, sent as often as its retries need.
type request struct {
	method string
	// path is the escaped path and query, from "/v1/...".
	path string
	// body is the JSON body, kept whole so every attempt sends it again;
	// nil for none.
	body []byte
	// key is the Idempotency-Key header; empty for none.
	key    string
	safety safety
	// preferWait, when positive, is sent as Prefer: wait=N (whole seconds).
	preferWait time.Duration
	// ifMatch is the If-Match header; empty for none.
	ifMatch string
	// err, when set, fails the call before anything is sent: an empty id,
	// a body that would not encode, a key the API would refuse.
	err error
}

// response is the answer of the attempt that succeeded.
type response struct {
	status   int
	header   http.Header
	body     []byte
	attempts int
}

// newRequest returns a request with in encoded as its JSON body (nil for
// no body).
func newRequest(method, path string, in any, s safety) request {
	r := request{method: method, path: path, safety: s}
	if in != nil {
		if r.body, r.err = json.Marshal(in); r.err != nil {
			r.err = fmt.Errorf("client: encoding the %s %s body: %w", method, path, r.err)
		}
	}
	return r
}

// errEmptyID refuses a call naming no resource, which would otherwise
// address another route.
var errEmptyID = errors.New("client: the id is empty")

// idRequest returns the request of method at prefix + the escaped id +
// suffix, failing with errEmptyID for an empty id.
func idRequest(method, prefix, id, suffix string, in any, s safety) request {
	if id == "" {
		return request{err: errEmptyID}
	}
	return newRequest(method, prefix+url.PathEscape(id)+suffix, in, s)
}

// get returns the read of prefix + the escaped id + suffix, as
// [idRequest].
func get(prefix, id, suffix string) request {
	return idRequest(http.MethodGet, prefix, id, suffix, nil, repeatable)
}

// fetch sends r and returns its answer decoded into a new T.
func fetch[T any](ctx context.Context, c *Client, r request) (*T, error) {
	var out T
	if _, err := c.call(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// call sends r, retrying as its safety and the policy allow, and decodes
// the answer into out unless out is nil.
func (c *Client) call(ctx context.Context, r request, out any) (*response, error) {
	if r.err != nil {
		return nil, r.err
	}
	res, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	if out != nil {
		dec := json.NewDecoder(bytes.NewReader(res.body))
		// Filters are free-form JSON whose numbers must survive exactly.
		dec.UseNumber()
		if err := dec.Decode(out); err != nil {
			return nil, fmt.Errorf("searchd client: %s %s: decoding the %d answer: %w", r.method, r.path, res.status, err)
		}
	}
	return res, nil
}

// do sends r until an attempt succeeds, one fails for good, the attempts
// run out or the next wait would end past ctx's deadline; then it returns
// the last attempt's error. When ctx ends, it returns an error wrapping
// both ctx's error and the last attempt's.
func (c *Client) do(ctx context.Context, r request) (*response, error) {
	for n := 1; ; n++ {
		res, err := c.attempt(ctx, r)
		if err == nil {
			res.attempts = n
			return res, nil
		}
		if ctx.Err() != nil {
			if errors.Is(err, ctx.Err()) {
				return nil, err
			}
			return nil, fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		}
		retry, serverDelay := retryable(r.safety, err)
		if !retry || n >= c.retry.MaxAttempts {
			return nil, err
		}
		wait := c.retry.delay(n, serverDelay)
		if deadline, ok := ctx.Deadline(); ok && !time.Now().Add(wait).Before(deadline) {
			// Waiting would only end in the deadline's error; the
			// server's answer says more.
			return nil, err
		}
		if serr := c.sleep(ctx, wait); serr != nil {
			return nil, fmt.Errorf("%w (last attempt: %w)", serr, err)
		}
	}
}

// attempt sends r once. It returns an *APIError for an answer other than
// 2xx, a *transportError when no whole answer came, and other errors for
// failures before sending (the token source's).
func (c *Client) attempt(ctx context.Context, r request) (*response, error) {
	actx, cancel := context.WithTimeout(ctx, c.retry.AttemptTimeout)
	defer cancel()
	token, err := c.token(actx)
	switch {
	case err != nil:
		return nil, fmt.Errorf("client: token source: %w", err)
	case token == "":
		return nil, errors.New("client: token source returned an empty token")
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(actx, r.method, c.base+r.path, body)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
	}
	if r.body != nil {
		// Lets the transport itself resend the body on a connection that
		// turned out dead before the request was written.
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(r.body)), nil }
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("User-Agent", c.userAgent)
	if r.key != "" {
		req.Header.Set(headerIdempotencyKey, keyHeader(r.key))
	}
	if r.preferWait >= time.Second {
		req.Header.Set("Prefer", "wait="+strconv.Itoa(int(r.preferWait/time.Second)))
	}
	if r.ifMatch != "" {
		req.Header.Set("If-Match", r.ifMatch)
	}

	res, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, actx, r, err)
	}
	defer res.Body.Close()
	var answer io.Reader = res.Body
	if res.StatusCode >= 300 {
		answer = io.LimitReader(answer, maxErrorBody)
	}
	data, err := io.ReadAll(answer)
	if err != nil {
		return nil, c.transportError(ctx, actx, r, err)
	}
	if res.StatusCode < 200 || res.StatusCode >= 300 {
		return nil, newAPIError(res.StatusCode, res.Header, data)
	}
	return &response{status: res.StatusCode, header: res.Header, body: data}, nil
}

// transportError wraps err, an attempt's failure to get a whole answer,
// noting whether the attempt's own timeout caused it.
func (c *Client) transportError(ctx, actx context.Context, r request, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		// A *url.Error is a net.Error whatever it wraps; classify what it
		// wraps.
		err = ue.Err
	}
	return &transportError{
		method: r.method, path: r.path, err: err,
		attemptTimedOut: ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded),
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
