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

// answerBytes is how much of a receiver's answer is read and kept.
const answerBytes = 1 << 10

// Client returns the default client of a sender of concurrency deliveries
// at once: it follows no redirects.
func Client(concurrency int) *http.Client {
	return &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: concurrency,
			IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true},
	}
}

// Answer is how a receiver answered one POST.
type Answer struct {
	// Sent reports whether the request was sent: false when it could not
	// be built or signed (Text says why).
	Sent bool
	// Status is the answer's HTTP status; 0 when none came (Text says
	// why: a timeout, a refused connection).
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
