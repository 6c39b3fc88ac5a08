package email_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/searchd/searchd/toolrun"
	"github.com/searchd/searchd/toolrun/email"
	"github.com/searchd/searchd/toolrun/email/emailtest"
)

const input = `{"to":"ada@example.com","subject":"Hello","body":"Hi Ada"}`

func newSender(t *testing.T, baseURL string, timeout time.Duration) *email.Sender {
	t.Helper()
	s, err := email.New(email.Config{BaseURL: baseURL, APIKey: "k-1", Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// call runs one send to the vendor under the sender's timeout, as the
// journal would.
func call(s *email.Sender, key string) (toolrun.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.Spec().Timeout)
	defer cancel()
	return s.Call(ctx, toolrun.CallContext{IdempotencyKey: key}, json.RawMessage(input))
}

func TestSendPassesTheKeyAndNamesTheMessage(t *testing.T) {
	t.Parallel()
	v := emailtest.NewVendor(t, emailtest.Options{Idempotent: true})
	s := newSender(t, v.URL()+"/", 5*time.Second)

	res, err := call(s, "tk1_abc")
	if err != nil || !res.OK || res.ResourceType != email.ResourceType || res.ResourceID != "msg_1" || string(res.Output) != `{"message_id":"msg_1"}` {
		t.Fatalf("Call = %+v, %v; want an ok send of msg_1", res, err)
	}
	// The vendor dedupes the same key: the same message, no second send.
	if res, err := call(s, "tk1_abc"); err != nil || res.ResourceID != "msg_1" {
		t.Fatalf("repeat Call = %+v, %v; want msg_1 again", res, err)
	}
	reqs := v.Requests()
	if len(reqs) != 2 || len(v.Messages()) != 1 {
		t.Fatalf("vendor saw %d requests and sent %d messages, want 2 and 1", len(reqs), len(v.Messages()))
	}
	if reqs[0].IdempotencyKey != "tk1_abc" || reqs[0].Authorization != "Bearer k-1" {
		t.Fatalf("request headers = %+v, want Idempotency-Key tk1_abc and the bearer key", reqs[0])
	}
	var body map[string]string
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil || body["to"] != "ada@example.com" || body["subject"] != "Hello" || body["body"] != "Hi Ada" {
		t.Fatalf("request body = %s (%v)", reqs[0].Body, err)
	}

	// Without a key, none is sent.
	if _, err := call(s, ""); err != nil {
		t.Fatal(err)
	}
	if k := v.Requests()[2].IdempotencyKey; k != "" {
		t.Fatalf("a call without a key sent Idempotency-Key %q", k)
	}
}

func TestVendorAnswersMapToEndings(t *testing.T) {
	t.Parallel()
	type ending struct {
		code      string
		retryable bool
		uncertain bool
	}
	for _, tc := range []struct {
		status int
		want   ending
	}{
		{400, ending{toolrun.OutcomeInvalidInput, false, false}},
		{422, ending{toolrun.OutcomeInvalidInput, false, false}},
		{404, ending{toolrun.OutcomeNotFound, false, false}},
		{410, ending{email.CodeRejected, false, false}},
		{401, ending{email.CodeUnauthorized, true, false}},
		{403, ending{email.CodeUnauthorized, true, false}},
		{408, ending{email.CodeVendorError, true, false}},
		{409, ending{email.CodeVendorError, true, false}},
		{429, ending{email.CodeRateLimited, true, false}},
		// The vendor read the request and failed: without a key nothing
		// dedupes a retry, so the send is uncertain.
		{500, ending{email.CodeVendorError, false, true}},
		{502, ending{email.CodeVendorError, false, true}},
		{503, ending{email.CodeVendorError, false, true}},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			t.Parallel()
			v := emailtest.NewVendor(t, emailtest.Options{})
			v.Script(emailtest.Step{Status: tc.status})
			res, err := call(newSender(t, v.URL(), 5*time.Second), "")
			var te *toolrun.ToolError
			if !errors.As(err, &te) {
				t.Fatalf("Call after %d = %+v, %v; want a *ToolError", tc.status, res, err)
			}
			if got := (ending{te.Code, te.Retryable, te.Uncertain}); got != tc.want {
				t.Fatalf("Call after %d = %+v, want %+v", tc.status, got, tc.want)
			}
		})
	}
}

func TestVendorFailureIsRetryableOnlyWithAKey(t *testing.T) {
	t.Parallel()
	for _, status := range []int{500, 502, 503, 599} {
		failsAs(t, status, email.CodeVendorError)
	}
}

func TestGatewayTimeoutIsNoAnswer(t *testing.T) {
	t.Parallel()
	failsAs(t, 504, email.CodeNoAnswer)
}

// failsAs checks that a vendor answering status fails a call with a key
// as code, retryable, and one without as code, uncertain.
func failsAs(t *testing.T, status int, code string) {
	t.Helper()
	v := emailtest.NewVendor(t, emailtest.Options{})
	v.Script(emailtest.Step{Status: status}, emailtest.Step{Status: status})
	s := newSender(t, v.URL(), 5*time.Second)
	for _, tc := range []struct {
		key                  string
		retryable, uncertain bool
	}{
		{"tk1_abc", true, false},
		{"", false, true},
	} {
		_, err := call(s, tc.key)
		var te *toolrun.ToolError
		if !errors.As(err, &te) || te.Code != code || te.Retryable != tc.retryable || te.Uncertain != tc.uncertain {
			t.Fatalf("Call(key %q) after %d = %v, want %s retryable %v uncertain %v", tc.key, status, err, code, tc.retryable, tc.uncertain)
		}
	}
}

func TestTimeoutAfterSendingIsRetryableOnlyWithAKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key                  string
		retryable, uncertain bool
	}{
		{"tk1_abc", true, false},
		{"", false, true},
	} {
		t.Run(fmt.Sprintf("key %q", tc.key), func(t *testing.T) {
			t.Parallel()
			v := emailtest.NewVendor(t, emailtest.Options{Idempotent: tc.key != ""})
			v.Script(emailtest.Step{SendThenHang: true})
			// The vendor hangs until the sender gives up, so the timeout
			// only has to outlast sending on a busy machine (200 ms did
			// not, once, at load average 29).
			_, err := call(newSender(t, v.URL(), 2*time.Second), tc.key)
			var te *toolrun.ToolError
			if !errors.As(err, &te) || te.Code != email.CodeNoAnswer || te.Retryable != tc.retryable || te.Uncertain != tc.uncertain {
				t.Fatalf("Call after a lost acknowledgement = %v, want no_answer retryable %v uncertain %v", err, tc.retryable, tc.uncertain)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v does not wrap the deadline", err)
			}
			if n := len(v.Messages()); n != 1 {
				t.Fatalf("vendor sent %d messages, want 1", n)
			}
		})
	}
}

func TestUnreachableVendorIsRetryableEvenWithoutAKey(t *testing.T) {
	t.Parallel()
	// A loopback port nobody listens on: the connection is refused before
	// a byte of the request is written.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = call(newSender(t, "http://"+addr, 2*time.Second), "")
	var te *toolrun.ToolError
	if !errors.As(err, &te) || te.Code != email.CodeUnreachable || !te.Retryable || te.Uncertain {
		t.Fatalf("Call to a closed port = %v, want a retryable unreachable", err)
	}
}

func TestInvalidInputNeverReachesTheVendor(t *testing.T) {
	t.Parallel()
	v := emailtest.NewVendor(t, emailtest.Options{})
	s := newSender(t, v.URL(), 5*time.Second)
	for _, in := range []string{
		`{"to":"not an address","subject":"s","body":"b"}`,
		`{"to":"ada@example.com","subject":" ","body":"b"}`,
		`{"to":"ada@example.com","subject":"s","body":""}`,
		`{"to":"ada@example.com","subject":"s","body":"b","bcc":"x@y.z"}`,
		`[]`,
		`null`,
	} {
		_, err := s.Call(context.Background(), toolrun.CallContext{}, json.RawMessage(in))
		var te *toolrun.ToolError
		if !errors.As(err, &te) || te.Code != toolrun.OutcomeInvalidInput || te.Retryable || te.Uncertain {
			t.Errorf("Call(%s) = %v, want an invalid_input business failure", in, err)
		}
	}
	if n := len(v.Requests()); n != 0 {
		t.Fatalf("vendor saw %d requests, want 0", n)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg email.Config
		ok  bool
	}{
		{email.Config{BaseURL: "https://api.vendor.test"}, true},
		{email.Config{BaseURL: "http://127.0.0.1:8080/base", Timeout: toolrun.StepBudget}, true},
		{email.Config{}, false},
		{email.Config{BaseURL: "api.vendor.test"}, false},
		{email.Config{BaseURL: "ftp://api.vendor.test"}, false},
		{email.Config{BaseURL: "https://api.vendor.test", Timeout: toolrun.StepBudget + time.Second}, false},
	} {
		_, err := email.New(tc.cfg)
		if (err == nil) != tc.ok {
			t.Errorf("New(%+v) = %v, want ok %v", tc.cfg, err, tc.ok)
		}
	}
	s, err := email.New(email.Config{BaseURL: "https://api.vendor.test", VendorIdempotency: true})
	if err != nil {
		t.Fatal(err)
	}
	if spec := s.Spec(); spec.Name != email.Name || spec.Timeout != 30*time.Second || !spec.VendorIdempotency || spec.Scope() != "tool.email.send" {
		t.Fatalf("Spec() = %+v, want email.send, 30 s, vendor idempotency", spec)
	}
}
