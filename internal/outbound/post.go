package outbound

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

const answerBytes = 1 << 10

// Client returns a client for concurrency deliveries at once that follows
// no redirects.
func Client(concurrency int) *http.Client {
	return &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: concurrency,
			IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true},
	}
}

// Answer is how a receiver answered one POST.
type Answer struct {
	// Sent is false when the request could not be built or signed.
	Sent bool
	// Status is 0 when no answer came (a timeout, a refused connection).
	Status int
	// Text is the status line and the answer's first KiB, or why there is
	// none.
	Text string
	// RetryAfter is the answer's Retry-After when its status is not 2xx.
	RetryAfter time.Duration
}

// Post POSTs body to the URL to as the Standard Webhooks message id, signed by
// signer, within timeout, and reads the answer.
func Post(ctx context.Context, client *http.Client, signer *standardwebhooks.Webhook, to, userAgent, id string,
	body []byte, timeout time.Duration) Answer {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to, bytes.NewReader(body))
	if err != nil {
		return Answer{Text: "the request could not be built: " + err.Error()}
	}
	now := time.Now()
	sig, err := signer.Sign(id, now, body)
	if err != nil {
		return Answer{Text: "the message could not be signed: " + err.Error()}
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", userAgent)
	h.Set(standardwebhooks.HeaderWebhookID, id)
	h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(standardwebhooks.HeaderWebhookSignature, sig)
	res, err := client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Answer{Sent: true, Text: fmt.Sprintf("no answer within %s (timeout)", timeout)}
		}
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return Answer{Sent: true, Text: "no answer: " + err.Error()}
	}
	defer res.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(res.Body, answerBytes))
	a := Answer{Sent: true, Status: res.StatusCode, Text: strings.TrimSpace(res.Status + " " + string(head))}
	if !a.Delivered() {
		a.RetryAfter = RetryAfter(res.Header.Get("Retry-After"), now)
	}
	return a
}

// Delivered reports whether the receiver answered 2xx.
func (a Answer) Delivered() bool { return a.Status >= 200 && a.Status < 300 }

// Message is the body of a Standard Webhooks message: its type, its
// timestamp and the data D of its type.
type Message[D any] struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      D         `json:"data"`
}
