package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/toolrun"
	"github.com/searchd/searchd/toolrun/email"
	"github.com/searchd/searchd/toolrun/email/emailtest"
)

func TestRetryableFailureReleasesAndTheNextAttemptExecutes(t *testing.T) {
	t.Parallel()
	for _, status := range []int{429, 500, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			b := setup(t, opts{idempotent: true})
			b.vendor.Script(emailtest.Step{Status: status})
			c := b.call(sendInput, 1)

			res, err := b.runner.Execute(b.ctx, c, toolrun.AllowAll)
			var te *toolrun.ToolError
			if !errors.As(err, &te) || !te.Retryable || te.Uncertain {
				t.Fatalf("Execute after a vendor %d = %+v, %v; want a retryable *ToolError", status, res, err)
			}
			if !equalResults(res, toolrun.Result{}) {
				t.Fatalf("a retryable failure reported the result %+v", res)
			}
			if n := b.rowCount(t); n != 0 {
				t.Fatalf("after a retryable failure %d claims remain, want the claim released", n)
			}

			wantSent(t, b.execute(t, c, toolrun.AllowAll), "msg_1")
			b.wantCounts(t, 2, 1)
			key := b.key(t, c)
			for i, r := range b.vendor.Requests() {
				if r.IdempotencyKey != key {
					t.Errorf("request %d carried Idempotency-Key %q, want %q", i, r.IdempotencyKey, key)
				}
			}
		})
	}
}

func TestBusinessFailureCompletesAndTheRepeatReturnsTheStoredAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		status   int // the vendor's answer; 0: the input never reaches it
		input    string
		outcome  string
		requests int
	}{
		{"vendor 400", 400, sendInput, toolrun.OutcomeInvalidInput, 1},
		{"vendor 404", 404, sendInput, toolrun.OutcomeNotFound, 1},
		{"vendor 422", 422, sendInput, toolrun.OutcomeInvalidInput, 1},
		{"vendor 410", 410, sendInput, email.CodeRejected, 1},
		{"no subject", 0, `{"to":"ada@example.com","body":"Hi"}`, toolrun.OutcomeInvalidInput, 0},
		{"unknown field", 0, `{"to":"ada@example.com","subject":"s","body":"b","cc":"x"}`, toolrun.OutcomeInvalidInput, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, opts{idempotent: true})
			if tc.status != 0 {
				b.vendor.Script(emailtest.Step{Status: tc.status})
			}
			c := b.call(tc.input, 1)
			live := b.execute(t, c, toolrun.AllowAll)
			if live.OK || live.Outcome != tc.outcome || live.Replayed || live.Message == "" || live.ResourceID != "" {
				t.Fatalf("Execute = %+v, want a fresh %s business failure with a message", live, tc.outcome)
			}
			if rec := b.row(t, c); rec == nil || rec.Status != idempotency.StatusCompleted {
				t.Fatalf("claim after a business failure = %+v, want completed", rec)
			}
			wantReplay(t, b.execute(t, c, toolrun.AllowAll), live)
			b.wantCounts(t, tc.requests, 0)
		})
	}
}

func TestCrashAfterVendorAcceptedIsReclaimedWithTheSameVendorKey(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idempotent: true})
	c := b.call(sendInput, 1)
	key := b.key(t, c)
	hash, err := toolrun.RequestHash(c.Spec.Name, c.Input)
	if err != nil {
		t.Fatal(err)
	}

	// The crashed worker: it claims the call as Execute would and the
	// vendor accepts its send, then it dies before Complete.
	out, err := b.plane.Claim(b.ctx, b.org, c.Spec.Scope(), key, hash, c.Spec.Lease())
	if err != nil || out.Kind != idempotency.KindClaimed {
		t.Fatalf("Claim = %v, %v; want claimed", out.Kind, err)
	}
	crashed := out.Claim
	if _, err := b.sender.Call(b.ctx, toolrun.CallContext{IdempotencyKey: key}, c.Input); err != nil {
		t.Fatalf("the crashed worker's send: %v", err)
	}
	b.wantCounts(t, 1, 1)

	// Inside its lease the claim is in flight: the retry neither sends nor
	// reports a result.
	b.clock.Advance(c.Spec.Lease() - time.Second)
	res, err := b.runner.Execute(b.ctx, c, toolrun.AllowAll)
	wantInFlight(t, res, err)
	b.wantCounts(t, 1, 1)

	// After it, the retry reclaims and sends with the same key, and the
	// vendor answers with the message it already sent.
	b.clock.Advance(time.Second)
	live := b.execute(t, c, toolrun.AllowAll)
	wantSent(t, live, "msg_1")
	b.wantCounts(t, 2, 1)
	for i, r := range b.vendor.Requests() {
		if r.IdempotencyKey != key {
			t.Fatalf("request %d carried Idempotency-Key %q, want %q", i, r.IdempotencyKey, key)
		}
	}
	rec := b.row(t, c)
	if rec.ID != crashed.ID || rec.LeaseToken == crashed.LeaseToken || rec.Status != idempotency.StatusCompleted || rec.ResourceID != "msg_1" {
		t.Fatalf("claim = %+v, want the crashed claim reclaimed and completed with msg_1", rec)
	}
	wantReplay(t, b.execute(t, c, toolrun.AllowAll), live)
	b.wantCounts(t, 2, 1)
}

// stalling wraps a tool: it makes the call, then stalls, ignoring its
// deadline, until the test wakes it, and answers what the test says.
type stalling struct {
	sent  chan struct{}
	wake  chan struct{}
	inner toolrun.Tool
	fail  error // answered instead of the inner result, when set
}

func (s *stalling) Call(ctx context.Context, cc toolrun.CallContext, input json.RawMessage) (toolrun.Result, error) {
	res, err := s.inner.Call(ctx, cc, input)
	close(s.sent)
	<-s.wake
	if s.fail != nil {
		return toolrun.Result{}, s.fail
	}
	return res, err
}

func TestStalledWorkerLosesTheFenceAfterAReclaim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fail error
	}{
		{"its send succeeds", nil},
		{"its send fails retryably", &toolrun.ToolError{Code: "rate_limited", Retryable: true}},
		{"its send is uncertain", &toolrun.ToolError{Code: "no_answer", Uncertain: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, opts{idempotent: true})
			stalled := &stalling{sent: make(chan struct{}), wake: make(chan struct{}), inner: b.sender, fail: tc.fail}
			c := b.call(sendInput, 1)
			stalledCall := c
			stalledCall.Tool = stalled

			type answer struct {
				res toolrun.Result
				err error
			}
			done := make(chan answer, 1)
			go func() {
				res, err := b.runner.Execute(b.ctx, stalledCall, toolrun.AllowAll)
				done <- answer{res, err}
			}()
			<-stalled.sent

			b.clock.Advance(c.Spec.Lease())
			live := b.execute(t, c, toolrun.AllowAll)
			wantSent(t, live, "msg_1")

			close(stalled.wake)
			a := <-done
			if !errors.Is(a.err, toolrun.ErrFenceLost) || !equalResults(a.res, toolrun.Result{}) {
				t.Fatalf("the stalled worker's Execute = %+v, %v; want ErrFenceLost and no result", a.res, a.err)
			}
			// The stalled worker wrote nothing over the new owner's answer.
			rec := b.row(t, c)
			if rec == nil || rec.Status != idempotency.StatusCompleted || rec.ResourceID != "msg_1" {
				t.Fatalf("claim = %+v, want the reclaimer's completed answer", rec)
			}
			wantReplay(t, b.execute(t, c, toolrun.AllowAll), live)
			b.wantCounts(t, 2, 1)
		})
	}
}

func TestClaimSurvivesARunThatWaitedOnApprovalForDays(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idempotent: true})
	first := b.call(sendInput, 1)
	second := b.call(sendInput, 2)
	p := &policy{decision: toolrun.DecisionAllow}

	live := b.execute(t, first, p.check)
	wantSent(t, live, "msg_1")
	// The Run's next identical call needs a person's approval.
	p.set(toolrun.DecisionNeedsApproval)
	if _, err := b.runner.Execute(b.ctx, second, p.check); !errors.Is(err, toolrun.ErrApprovalRequired) {
		t.Fatalf("Execute(second) = %v, want ErrApprovalRequired", err)
	}

	// The approval arrives a day and an hour later. The resumed segment
	// replays the Run from its first call: the first is answered by the
	// journal, without the policy, the second runs.
	b.clock.Advance(25 * time.Hour)
	asked := p.count()
	wantReplay(t, b.execute(t, first, p.check), live)
	if p.count() != asked {
		t.Fatal("a replay asked the policy checkpoint")
	}
	p.set(toolrun.DecisionAllow)
	second2 := b.execute(t, second, p.check)
	wantSent(t, second2, "msg_2")
	b.wantCounts(t, 2, 2)

	// 29 days after the first send, both calls still replay.
	b.clock.Advance(28*24*time.Hour - 25*time.Hour)
	p.set(toolrun.DecisionDeny)
	wantReplay(t, b.execute(t, first, p.check), live)
	wantReplay(t, b.execute(t, second, p.check), second2)
	b.wantCounts(t, 2, 2)
}

func TestLiveClaimRaisesClaimInFlightAndNoResult(t *testing.T) {
	t.Parallel()
	t.Run("held before the read", func(t *testing.T) {
		t.Parallel()
		b := setup(t, opts{idempotent: true})
		c := b.call(sendInput, 1)
		hash, _ := toolrun.RequestHash(c.Spec.Name, c.Input)
		held, err := b.plane.Claim(b.ctx, b.org, c.Spec.Scope(), b.key(t, c), hash, c.Spec.Lease())
		if err != nil || held.Kind != idempotency.KindClaimed {
			t.Fatalf("Claim = %v, %v", held.Kind, err)
		}
		p := &policy{decision: toolrun.DecisionAllow}
		res, err := b.runner.Execute(b.ctx, c, p.check)
		wantInFlight(t, res, err)
		if p.count() != 0 {
			t.Error("an in-flight call asked the policy checkpoint")
		}
		if rec := b.row(t, c); rec.LeaseToken != held.Claim.LeaseToken || rec.Status != idempotency.StatusProcessing {
			t.Fatalf("claim = %+v, want the holder's, untouched", rec)
		}
		b.wantCounts(t, 0, 0)
	})
	t.Run("taken between the read and the claim", func(t *testing.T) {
		t.Parallel()
		b := setup(t, opts{idempotent: true})
		c := b.call(sendInput, 1)
		hash, _ := toolrun.RequestHash(c.Spec.Name, c.Input)
		// Another worker claims the call while this one is at its
		// checkpoint.
		racer := func(ctx context.Context, _ toolrun.Call) (toolrun.Decision, error) {
			out, err := b.plane.Claim(ctx, b.org, c.Spec.Scope(), b.key(t, c), hash, c.Spec.Lease())
			if err != nil || out.Kind != idempotency.KindClaimed {
				return 0, fmt.Errorf("racer: %v, %v", out.Kind, err)
			}
			return toolrun.DecisionAllow, nil
		}
		res, err := b.runner.Execute(b.ctx, c, racer)
		wantInFlight(t, res, err)
		b.wantCounts(t, 0, 0)
	})
}

func TestPolicyCheckpointClaimsNothingUntilItAllows(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idempotent: true})
	c := b.call(sendInput, 1)
	for _, tc := range []struct {
		name     string
		decision toolrun.Decision
		err      error
		want     error
	}{
		{"needs approval", toolrun.DecisionNeedsApproval, nil, toolrun.ErrApprovalRequired},
		{"deny", toolrun.DecisionDeny, nil, toolrun.ErrDenied},
		{"policy error", toolrun.DecisionAllow, context.DeadlineExceeded, context.DeadlineExceeded},
		{"no decision", 0, nil, nil},
	} {
		p := &policy{decision: tc.decision, err: tc.err}
		res, err := b.runner.Execute(b.ctx, c, p.check)
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !equalResults(res, toolrun.Result{}) {
			t.Fatalf("%s: Execute = %+v, %v; want no result and %v", tc.name, res, err, tc.want)
		}
		if p.count() != 1 {
			t.Fatalf("%s: the checkpoint was asked %d times, want once", tc.name, p.count())
		}
		if n := b.rowCount(t); n != 0 {
			t.Fatalf("%s: %d claims written, want none", tc.name, n)
		}
	}
	b.wantCounts(t, 0, 0)

	p := &policy{decision: toolrun.DecisionAllow}
	live := b.execute(t, c, p.check)
	wantSent(t, live, "msg_1")
	p.set(toolrun.DecisionNeedsApproval)
	wantReplay(t, b.execute(t, c, p.check), live)
	b.wantCounts(t, 1, 1)
}

func TestKeyIsIndependentOfTheModelToolCallID(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idempotent: true})
	c := b.call(sendInput, 1)
	c.ToolCallID = "call_first_segment"
	live := b.execute(t, c, toolrun.AllowAll)
	wantSent(t, live, "msg_1")

	// A restarted segment: the model mints a new id and writes the same
	// input in another order.
	again := c
	again.ToolCallID = "call_restarted_segment"
	again.Input = json.RawMessage(`{ "body": "Hi Ada", "subject": "Hello", "to": "ada@example.com" }`)
	wantReplay(t, b.execute(t, again, toolrun.AllowAll), live)
	b.wantCounts(t, 1, 1)

	// A genuine second identical call is another occurrence: it sends.
	wantSent(t, b.execute(t, b.call(sendInput, 2), toolrun.AllowAll), "msg_2")
	b.wantCounts(t, 2, 2)
	if k := b.vendor.Requests(); k[0].IdempotencyKey == k[1].IdempotencyKey {
		t.Fatalf("two occurrences sent the same key %q", k[0].IdempotencyKey)
	}
}

func TestUncertainSendIsStoredAndNeverRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idempotent: false, timeout: 300 * time.Millisecond})
	b.vendor.Script(emailtest.Step{SendThenHang: true})
	c := b.call(sendInput, 1)

	live := b.execute(t, c, toolrun.AllowAll)
	if live.OK || !live.Uncertain() || live.Outcome != toolrun.OutcomeUncertain || live.Replayed || live.Message == "" {
		t.Fatalf("Execute after a send that was never acknowledged = %+v, want an uncertain result", live)
	}
	if rec := b.row(t, c); rec == nil || rec.Status != idempotency.StatusCompleted {
		t.Fatalf("claim = %+v, want completed", rec)
	}
	b.wantCounts(t, 1, 1)
	if k := b.vendor.Requests()[0].IdempotencyKey; k != "" {
		t.Fatalf("a vendor without idempotency support was sent Idempotency-Key %q", k)
	}

	// The repeat, even after the lease and a day, answers uncertain and
	// does not call the vendor.
	b.clock.Advance(25 * time.Hour)
	wantReplay(t, b.execute(t, c, toolrun.AllowAll), live)
	b.wantCounts(t, 1, 1)
}

func TestVendorFailureWithoutIdempotencyIsUncertainAndNeverRetried(t *testing.T) {
	t.Parallel()
	for _, status := range []int{500, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			b := setup(t, opts{idempotent: false})
			b.vendor.Script(emailtest.Step{Status: status})
			c := b.call(sendInput, 1)
			live := b.execute(t, c, toolrun.AllowAll)
			if live.OK || !live.Uncertain() || live.Replayed || !strings.Contains(live.Message, "may have been sent") {
				t.Fatalf("Execute after a vendor %d without idempotency = %+v, want an uncertain result", status, live)
			}
			if rec := b.row(t, c); rec == nil || rec.Status != idempotency.StatusCompleted {
				t.Fatalf("claim = %+v, want completed as uncertain", rec)
			}
			// Neither a repeat nor one after the lease sends again.
			b.clock.Advance(c.Spec.Lease() + time.Hour)
			wantReplay(t, b.execute(t, c, toolrun.AllowAll), live)
			b.wantCounts(t, 1, 0)
		})
	}
}

func TestUnansweredSendToAnIdempotentVendorIsRetriedWithTheSameKey(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idempotent: true, timeout: 300 * time.Millisecond})
	b.vendor.Script(emailtest.Step{SendThenHang: true})
	c := b.call(sendInput, 1)

	res, err := b.runner.Execute(b.ctx, c, toolrun.AllowAll)
	var te *toolrun.ToolError
	if !errors.As(err, &te) || !te.Retryable || te.Code != email.CodeNoAnswer {
		t.Fatalf("Execute after an unanswered send = %+v, %v; want a retryable no_answer", res, err)
	}
	if n := b.rowCount(t); n != 0 {
		t.Fatalf("%d claims remain, want the claim released", n)
	}
	wantSent(t, b.execute(t, c, toolrun.AllowAll), "msg_1")
	b.wantCounts(t, 2, 1)
}

func TestReclaimWithoutVendorIdempotencyIsUncertainAndNotCalled(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idempotent: false})
	c := b.call(sendInput, 1)
	hash, _ := toolrun.RequestHash(c.Spec.Name, c.Input)
	// A worker claimed the call and died; whether it sent, nobody knows.
	if out, err := b.plane.Claim(b.ctx, b.org, c.Spec.Scope(), b.key(t, c), hash, c.Spec.Lease()); err != nil || out.Kind != idempotency.KindClaimed {
		t.Fatalf("Claim = %v, %v", out.Kind, err)
	}
	b.clock.Advance(c.Spec.Lease())
	live := b.execute(t, c, toolrun.AllowAll)
	if !live.Uncertain() || live.Replayed {
		t.Fatalf("Execute after a reclaim without vendor idempotency = %+v, want uncertain", live)
	}
	wantReplay(t, b.execute(t, c, toolrun.AllowAll), live)
	b.wantCounts(t, 0, 0)
}

func TestConcurrentExecutesOfOneCallSendOnce(t *testing.T) {
	t.Parallel()
	// The database clock and real commits: 20 workers race one call.
	b := setup(t, opts{idempotent: true, delay: 300 * time.Millisecond, dbClock: true})
	c := b.call(sendInput, 1)
	const n = 20
	results := make([]toolrun.Result, n)
	errs := make([]error, n)
	b.race(t, n, func(i int) { results[i], errs[i] = b.runner.Execute(b.ctx, c, toolrun.AllowAll) })

	var fresh, replayed, inFlight int
	for i := range n {
		switch {
		case errs[i] != nil:
			wantInFlight(t, results[i], errs[i])
			inFlight++
		case results[i].Replayed:
			replayed++
			if results[i].ResourceID != "msg_1" {
				t.Errorf("replay %d = %+v, want msg_1", i, results[i])
			}
		default:
			fresh++
			wantSent(t, results[i], "msg_1")
		}
	}
	if fresh != 1 || fresh+replayed+inFlight != n {
		t.Fatalf("%d concurrent Executes: %d sent, %d replayed, %d in flight; want 1 sent", n, fresh, replayed, inFlight)
	}
	b.wantCounts(t, 1, 1)
	t.Logf("%d in flight, %d replayed", inFlight, replayed)
}

func TestUnclassifiedErrorEndsByTheVendorsGuarantee(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	broken := toolFunc(func(context.Context, toolrun.CallContext, json.RawMessage) (toolrun.Result, error) {
		return toolrun.Result{}, errors.New("connection reset by peer")
	})
	for _, tc := range []struct {
		idempotent bool
		released   bool
	}{
		{true, true},
		{false, false},
	} {
		c := b.call(sendInput, 1)
		c.Tool = broken
		c.Spec = toolrun.ToolSpec{Name: "custom.call", Timeout: time.Second, VendorIdempotency: tc.idempotent}
		res, err := b.runner.Execute(b.ctx, c, toolrun.AllowAll)
		switch {
		case tc.released:
			var te *toolrun.ToolError
			if !errors.As(err, &te) || !te.Retryable || b.row(t, c) != nil {
				t.Fatalf("idempotent vendor: Execute = %+v, %v; want released and a retryable error", res, err)
			}
		default:
			if err != nil || !res.Uncertain() || b.row(t, c) == nil {
				t.Fatalf("vendor without idempotency: Execute = %+v, %v; want completed as uncertain", res, err)
			}
		}
	}
}

func TestLiveResultIsWhatTheReplayAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	big := `{"blob":"` + strings.Repeat("x", toolrun.MaxStoredOutput) + `"}`
	for _, tc := range []struct {
		name    string
		res     toolrun.Result
		output  string
		omitted bool
	}{
		{"output in canonical form", toolrun.Result{OK: true, Output: json.RawMessage(`{ "b": [1, 2.50], "a": "<&>" }`)}, `{"a":"<&>","b":[1,2.50]}`, false},
		{"output too large", toolrun.Result{OK: true, Output: json.RawMessage(big)}, ``, true},
		{"output not JSON", toolrun.Result{OK: true, Output: json.RawMessage(`{nope`)}, ``, true},
		{"failure without an outcome", toolrun.Result{OK: false}, ``, false},
		{"half a resource", toolrun.Result{OK: true, ResourceID: "r-1"}, ``, false},
	} {
		c := b.call(fmt.Sprintf(`{"case":%q}`, tc.name), 1)
		c.Spec = toolrun.ToolSpec{Name: "custom.call", Timeout: time.Second}
		c.Tool = toolFunc(func(context.Context, toolrun.CallContext, json.RawMessage) (toolrun.Result, error) {
			return tc.res, nil
		})
		live := b.execute(t, c, toolrun.AllowAll)
		if string(live.Output) != tc.output || live.OutputOmitted != tc.omitted || live.ResourceID != "" {
			t.Fatalf("%s: live = %+v, want output %s (omitted %v) and no resource", tc.name, live, tc.output, tc.omitted)
		}
		if !tc.res.OK && live.Outcome != toolrun.OutcomeFailed {
			t.Fatalf("%s: outcome = %q, want %q", tc.name, live.Outcome, toolrun.OutcomeFailed)
		}
		wantReplay(t, b.execute(t, c, toolrun.AllowAll), live)
	}
}

func TestExecuteRefusesACallItCannotKey(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	for _, tc := range []struct {
		name   string
		mutate func(*toolrun.Call)
	}{
		{"no tool", func(c *toolrun.Call) { c.Tool = nil }},
		{"no organization", func(c *toolrun.Call) { c.OrganizationID = [16]byte{} }},
		{"no run", func(c *toolrun.Call) { c.RunID = [16]byte{} }},
		{"occurrence 0", func(c *toolrun.Call) { c.Occurrence = 0 }},
		{"broken input", func(c *toolrun.Call) { c.Input = json.RawMessage(`{`) }},
		{"timeout over the step budget", func(c *toolrun.Call) { c.Spec.Timeout = 121 * time.Second }},
		{"no timeout", func(c *toolrun.Call) { c.Spec.Timeout = 0 }},
		{"bad name", func(c *toolrun.Call) { c.Spec.Name = "Email" }},
	} {
		c := b.call(sendInput, 1)
		tc.mutate(&c)
		if _, err := b.runner.Execute(b.ctx, c, toolrun.AllowAll); !errors.Is(err, toolrun.ErrInvalid) {
			t.Errorf("%s: Execute = %v, want ErrInvalid", tc.name, err)
		}
	}
	if _, err := b.runner.Execute(b.ctx, b.call(sendInput, 1), nil); !errors.Is(err, toolrun.ErrInvalid) {
		t.Errorf("nil checkpoint: Execute = %v, want ErrInvalid", err)
	}
	if n := b.rowCount(t); n != 0 {
		t.Fatalf("%d claims written, want none", n)
	}
	b.wantCounts(t, 0, 0)
}
