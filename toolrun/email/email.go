// Package email is the email.send tool: a client of an HTTP email vendor that
// sends one message per call.
//
// The vendor API: POST {BaseURL}/v1/messages with the JSON body
// {"to", "subject", "body"}, an optional Authorization: Bearer header and,
// when the vendor honours one, an Idempotency-Key header carrying the call's
// key from the journal. It answers 200 or 201 with {"id": "msg_..."}.
//
// The package's job is to say which ending each answer takes (see
// [toolrun.ToolError]); [toolrun.Runner] does the rest. The one hard case is a
// call that ended without an acknowledgement once the request was on the
// wire (a timeout, a reset, a 5xx): the vendor may have sent. With the key
// the vendor dedupes a retry, so it is retryable; without one it is
// uncertain and stays so until a person resolves it ([tools.Resolver]).
package email

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/mail"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/searchd/searchd/toolrun"
)

const (
	// Name is the tool's name; its claims live in scope "tool.email.send".
	Name = "email.send"
	// ResourceType names what a sent call made: its resource id is the
	// vendor's message id.
	ResourceType = "email_message"
)

// Failure codes of the tool's [toolrun.ToolError]s beside the business
// outcomes toolrun.OutcomeInvalidInput and toolrun.OutcomeNotFound.
const (
	// CodeRejected: the vendor refused the message with a 4xx that names
	// no other failure. A business failure.
	CodeRejected = "rejected"
	// CodeRateLimited: 429. Retryable.
	CodeRateLimited = "rate_limited"
	// CodeUnauthorized: 401 or 403, a configuration fault. Retryable, so
	// no failure is stored for a call a fixed key would make.
	CodeUnauthorized = "unauthorized"
	// CodeVendorError: the vendor failed (5xx) or asked to come back (408,
	// 409, 425). Retryable, but for a 5xx without an idempotency key: the
	// vendor read the request and may have sent, so it is uncertain.
	CodeVendorError = "vendor_error"
	// CodeUnreachable: the request never reached the wire. Retryable.
	CodeUnreachable = "unreachable"
	// CodeNoAnswer: the request was sent and no answer came (a timeout, a
	// reset, a 504). Retryable with a vendor idempotency key, uncertain
	// without.
	CodeNoAnswer = "no_answer"
)

// maxAnswerBody bounds how much of the vendor's answer is read.
const maxAnswerBody = 1 << 20

// Config configures a [Sender].
type Config struct {
	// BaseURL is the vendor's API root, such as "https://api.vendor.test".
	// Required.
	BaseURL string
	// APIKey, when set, is sent as Authorization: Bearer.
	APIKey string
	// Timeout bounds one call; it is the tool spec's Timeout, so the lease
	// derives from it. At most toolrun.StepBudget. Default 30 s.
	Timeout time.Duration
	// VendorIdempotency reports whether the vendor dedupes requests by the
	// Idempotency-Key header. Set it only for a vendor that documents the
	// guarantee. Default false: an unanswered send is then uncertain.
	VendorIdempotency bool
	// HTTPClient makes the requests. Default: a client with no timeout of
	// its own; the call's context carries the deadline.
	HTTPClient *http.Client
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Timeout = cmp.Or(c.Timeout, 30*time.Second)
	c.HTTPClient = cmp.Or(c.HTTPClient, &http.Client{})
	return c
}

// Validate returns an error naming the field that cannot be used.
func (c Config) Validate() error {
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("email: BaseURL %q must be an absolute http or https URL", c.BaseURL)
	}
	return c.Spec().Validate()
}

// Spec returns the tool spec of a sender with this configuration.
func (c Config) Spec() toolrun.ToolSpec {
	return toolrun.ToolSpec{Name: Name, Timeout: c.Timeout, VendorIdempotency: c.VendorIdempotency}
}

// Sender is the email.send [toolrun.Tool]. It is safe for concurrent use.
type Sender struct {
	cfg      Config
	endpoint string
}

// New returns a sender for cfg, with defaults applied, or the error of
// [Config.Validate].
func New(cfg Config) (*Sender, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Sender{cfg: cfg, endpoint: strings.TrimSuffix(cfg.BaseURL, "/") + "/v1/messages"}, nil
}

// Spec returns the sender's tool spec, for [toolrun.Call].
func (s *Sender) Spec() toolrun.ToolSpec { return s.cfg.Spec() }

// Input is the tool's input.
type Input struct {
	// To is one address, as net/mail parses it.
	To      string `json:"to"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

// Output is the tool's output for a sent message.
type Output struct {
	// MessageID is the vendor's id; empty when the vendor accepted without
	// naming one.
	MessageID string `json:"message_id,omitempty"`
}

// Call sends the message input describes. It answers:
//   - 200, 201 or another 2xx: an OK result naming the email_message the
//     vendor reports;
//   - an input that does not decode or validate, 400 or 422: a business
//     failure, toolrun.OutcomeInvalidInput; 404: toolrun.OutcomeNotFound;
//     another 4xx: CodeRejected;
//   - 401, 403, 408, 409, 425 and 429: retryable, for the vendor refused
//     before acting;
//   - a 5xx but 504: retryable when cc carries an idempotency key, and
//     uncertain when it does not: the vendor read the request, and its
//     failure does not say it did not send;
//   - no answer after the request was written (a timeout, a reset, a 504, an
//     unreadable status): retryable when cc carries an idempotency key, for
//     the vendor dedupes the retry, and uncertain when it does not;
//   - no request written (a refused connection, a timeout while dialing):
//     retryable, for the vendor never saw it.
func (s *Sender) Call(ctx context.Context, cc toolrun.CallContext, input json.RawMessage) (toolrun.Result, error) {
	in, err := decodeInput(input)
	if err != nil {
		return toolrun.Result{}, &toolrun.ToolError{Code: toolrun.OutcomeInvalidInput, Err: err}
	}
	body, _ := json.Marshal(in) // three strings: it cannot fail
	// written turns true once the request headers went out: from then on
	// the vendor may act on the request even if no answer comes back.
	var written atomic.Bool
	req, err := s.request(ctx, cc, body, &written)
	if err != nil {
		return toolrun.Result{}, &toolrun.ToolError{Code: CodeUnreachable, Retryable: true, Err: err}
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		if !written.Load() {
			return toolrun.Result{}, &toolrun.ToolError{Code: CodeUnreachable, Retryable: true, Err: err}
		}
		return toolrun.Result{}, unsure(cc, CodeNoAnswer, err)
	}
	defer resp.Body.Close()
	raw, readErr := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBody))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// The vendor acknowledged the send; an unreadable body costs the
		// id, not the acknowledgement.
		if readErr != nil {
			raw = nil
		}
		return acknowledged(raw), nil
	}
	return toolrun.Result{}, refused(cc, resp, raw)
}

// request is the POST of body to the vendor, which sets written once its
// headers went out.
func (s *Sender) request(ctx context.Context, cc toolrun.CallContext, body []byte, written *atomic.Bool) (*http.Request, error) {
	trace := &httptrace.ClientTrace{WroteHeaders: func() { written.Store(true) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if s.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.APIKey)
	}
	if cc.IdempotencyKey != "" {
		// The header also lets net/http retry the POST on a connection
		// that died before answering, which the key makes safe; without
		// it net/http never retries a POST.
		req.Header.Set("Idempotency-Key", cc.IdempotencyKey)
	}
	return req, nil
}

// acknowledged is the result of a send the vendor acknowledged with the
// answer raw (nil when unreadable), naming the message it reports.
func acknowledged(raw []byte) toolrun.Result {
	var ack struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &ack)
	out, _ := json.Marshal(Output{MessageID: ack.ID}) // one string: it cannot fail
	res := toolrun.Result{OK: true, Output: out}
	if ack.ID != "" {
		res.ResourceType, res.ResourceID = ResourceType, ack.ID
	}
	return res
}

// refused is the failure of a request the vendor answered with resp, not
// a 2xx, whose body is raw.
func refused(cc toolrun.CallContext, resp *http.Response, raw []byte) error {
	err := vendorError(resp, raw)
	switch code := resp.StatusCode; {
	case code == http.StatusBadRequest || code == http.StatusUnprocessableEntity:
		return &toolrun.ToolError{Code: toolrun.OutcomeInvalidInput, Err: err}
	case code == http.StatusNotFound:
		return &toolrun.ToolError{Code: toolrun.OutcomeNotFound, Err: err}
	case code == http.StatusTooManyRequests:
		return &toolrun.ToolError{Code: CodeRateLimited, Retryable: true, Err: err}
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return &toolrun.ToolError{Code: CodeUnauthorized, Retryable: true, Err: err}
	case code == http.StatusRequestTimeout || code == http.StatusConflict || code == http.StatusTooEarly:
		// 408: the vendor gave up reading the request; 409 and 425: it is
		// still working on an earlier request with this key.
		return &toolrun.ToolError{Code: CodeVendorError, Retryable: true, Err: err}
	case code == http.StatusGatewayTimeout:
		// A gateway that timed out says nothing about whether the vendor
		// behind it sent.
		return unsure(cc, CodeNoAnswer, err)
	case code >= 400 && code < 500:
		return &toolrun.ToolError{Code: CodeRejected, Err: err}
	case code >= 500:
		// The vendor failed after it read the request, and a 5xx does not
		// say it did not send: the state is uncertain until it
		// acknowledges.
		return unsure(cc, CodeVendorError, err)
	}
	return unsure(cc, CodeNoAnswer, err)
}

// unsure is the failure, as code, of a request that was written and got
// no acknowledgement (CodeNoAnswer) or a 5xx but 504 (CodeVendorError):
// retryable with the key, which the vendor dedupes the retry by; without
// one it is uncertain and stays so.
func unsure(cc toolrun.CallContext, code string, err error) *toolrun.ToolError {
	if cc.IdempotencyKey != "" {
		return &toolrun.ToolError{Code: code, Retryable: true, Err: err}
	}
	return &toolrun.ToolError{Code: code, Uncertain: true, Err: fmt.Errorf("the message may have been sent: %w", err)}
}

func vendorError(resp *http.Response, raw []byte) error {
	const maxShown = 512
	msg := strings.TrimSpace(string(raw))
	if len(msg) > maxShown {
		msg = strings.ToValidUTF8(msg[:maxShown], "") + "..."
	}
	if msg == "" {
		return fmt.Errorf("email vendor answered %s", resp.Status)
	}
	return fmt.Errorf("email vendor answered %s: %s", resp.Status, msg)
}

func decodeInput(input json.RawMessage) (Input, error) {
	var in Input
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return Input{}, fmt.Errorf("email.send input: %w", err)
	}
	if _, err := mail.ParseAddress(in.To); err != nil {
		return Input{}, fmt.Errorf("email.send input: to %q is not an address: %w", in.To, err)
	}
	if strings.TrimSpace(in.Subject) == "" {
		return Input{}, errors.New("email.send input: subject is empty")
	}
	if strings.TrimSpace(in.Body) == "" {
		return Input{}, errors.New("email.send input: body is empty")
	}
	return in, nil
}
