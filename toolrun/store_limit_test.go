package toolrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/toolrun"
)

// jsonOfSize is a JSON string value of exactly n bytes made of c, or none
// for n = 0.
func jsonOfSize(n int, c string) json.RawMessage {
	if n == 0 {
		return nil
	}
	return json.RawMessage(`"` + strings.Repeat(c, n-2) + `"`)
}

// TestEveryOutputSizeReplaysWhatTheLiveCallAnswered runs a tool whose output
// is 0, limit-1, limit, limit+1 and 1 MiB bytes (the limit is
// toolrun.MaxStoredOutput), with and without a resource, and with a message at
// its own limit that escapes to six bytes a character: at every size the
// claim completes (a refused completion would strand it processing) and the
// replay answers exactly what the live call did, never a reference the replay
// cannot read.
func TestEveryOutputSizeReplaysWhatTheLiveCallAnswered(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	heavyMessage := strings.Repeat("\x01", 4<<10) // cut to 2 KiB, each \u0001 in JSON
	i := 0
	for _, size := range []int{0, toolrun.MaxStoredOutput - 1, toolrun.MaxStoredOutput, toolrun.MaxStoredOutput + 1, 1 << 20} {
		for _, tc := range []struct {
			name     string
			char     string
			resource bool
			ok       bool
			message  string
		}{
			{"plain", "x", false, true, ""},
			{"with a resource", "x", true, true, ""},
			{"HTML characters", "<", false, true, ""},
			{"a failure with a heavy message", "&", true, false, heavyMessage},
			{"a failure with a heavy message, no resource", "x", false, false, heavyMessage},
		} {
			name := fmt.Sprintf("%d bytes, %s", size, tc.name)
			i++
			c := b.call(fmt.Sprintf(`{"case":%d}`, i), 1)
			c.Spec = toolrun.ToolSpec{Name: "custom.call", Timeout: time.Second}
			res := toolrun.Result{OK: tc.ok, Output: jsonOfSize(size, tc.char), Message: tc.message}
			if !tc.ok {
				res.Outcome = "quota_exceeded"
			}
			if tc.resource {
				res.ResourceType, res.ResourceID = "blob", fmt.Sprintf("blob-%d", i)
			}
			c.Tool = toolFunc(func(context.Context, toolrun.CallContext, json.RawMessage) (toolrun.Result, error) { return res, nil })

			live, err := b.runner.Execute(b.ctx, c, toolrun.AllowAll)
			if err != nil {
				t.Fatalf("%s: Execute error: %v", name, err)
			}
			kept := size <= toolrun.MaxStoredOutput
			if kept != (string(live.Output) == string(res.Output)) || live.OutputOmitted == kept || (!kept && len(live.Output) != 0) {
				t.Fatalf("%s: live output of %d bytes (omitted %v), want the output kept %v", name, len(live.Output), live.OutputOmitted, kept)
			}
			if live.OK != tc.ok || live.ResourceID != res.ResourceID || (tc.message != "" && live.Message == "") {
				t.Fatalf("%s: live = ok %v, resource %q, message of %d bytes; want ok %v, resource %q and a message",
					name, live.OK, live.ResourceID, len(live.Message), tc.ok, res.ResourceID)
			}
			rec := b.row(t, c)
			if rec == nil || rec.Status != idempotency.StatusCompleted || strings.HasPrefix(string(rec.Response), `{"resource_ref"`) {
				t.Fatalf("%s: claim = %+v, want completed with the answer itself", name, rec)
			}
			replay, err := b.runner.Execute(b.ctx, c, toolrun.AllowAll)
			if err != nil {
				t.Fatalf("%s: replay error: %v", name, err)
			}
			wantReplay(t, replay, live)
		}
	}
}

// TestAPlaneWithASmallLimitStillStoresAnswersWhole: the Runner fits answers
// to the limit of the plane it runs on, not to a constant, so a plane
// configured under MaxStoredOutput omits outputs that do not fit rather than
// refusing the completion (no resource: the claim would stay processing) or
// storing a reference (a resource: the replay would read nothing).
func TestAPlaneWithASmallLimitStillStoresAnswersWhole(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	plane := idempotency.NewService(b.pool, idempotency.Config{Clock: b.clock.Clock(), MaxResponseBytes: 1 << 10})
	runner := toolrun.NewRunner(plane, toolrun.Config{})
	for i, tc := range []struct {
		size     int
		resource bool
		kept     bool
	}{
		{900, false, true},
		{2000, false, false},
		{2000, true, false},
		{1 << 20, true, false},
	} {
		c := b.call(fmt.Sprintf(`{"small":%d}`, i), 1)
		c.Spec = toolrun.ToolSpec{Name: "custom.call", Timeout: time.Second}
		res := toolrun.Result{OK: true, Output: jsonOfSize(tc.size, "y"), Message: strings.Repeat("m", 300)}
		if tc.resource {
			res.ResourceType, res.ResourceID = "blob", fmt.Sprintf("b-%d", i)
		}
		c.Tool = toolFunc(func(context.Context, toolrun.CallContext, json.RawMessage) (toolrun.Result, error) { return res, nil })
		live, err := runner.Execute(b.ctx, c, toolrun.AllowAll)
		if err != nil {
			t.Fatalf("%d bytes: Execute error: %v", tc.size, err)
		}
		if kept := len(live.Output) == tc.size; kept != tc.kept || live.OutputOmitted == tc.kept {
			t.Fatalf("%d bytes: live output of %d bytes, omitted %v; want kept %v", tc.size, len(live.Output), live.OutputOmitted, tc.kept)
		}
		rec, err := plane.Repository().Get(b.ctx, b.org, c.Spec.Scope(), b.key(t, c))
		if err != nil || rec == nil || rec.Status != idempotency.StatusCompleted || strings.HasPrefix(string(rec.Response), `{"resource_ref"`) {
			t.Fatalf("%d bytes: claim = %+v, %v; want completed with the answer itself", tc.size, rec, err)
		}
		replay, err := runner.Execute(b.ctx, c, toolrun.AllowAll)
		if err != nil {
			t.Fatalf("%d bytes: replay error: %v", tc.size, err)
		}
		wantReplay(t, replay, live)
	}
}

// TestAStoredReferenceIsAnErrorNeverAResult: an answer some other writer
// stored over the plane's limit holds a reference in place of the body. A
// replay cannot answer what the live call did from it, so it is an error,
// never the zero Result (not OK, no outcome) that would report a failure
// nobody observed, and the tool is not called again.
func TestAStoredReferenceIsAnErrorNeverAResult(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	c := b.call(`{"ref":1}`, 1)
	c.Spec = toolrun.ToolSpec{Name: "custom.call", Timeout: time.Second}
	called := 0
	c.Tool = toolFunc(func(context.Context, toolrun.CallContext, json.RawMessage) (toolrun.Result, error) {
		called++
		return toolrun.Result{OK: true}, nil
	})
	hash, err := toolrun.RequestHash(c.Spec.Name, c.Input)
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.plane.Claim(b.ctx, b.org, c.Spec.Scope(), b.key(t, c), hash, c.Spec.Lease())
	if err != nil || out.Kind != idempotency.KindClaimed {
		t.Fatalf("Claim = %v, %v", out.Kind, err)
	}
	big := json.RawMessage(`{"ok":true,"outcome":"ok","output":"` + strings.Repeat("z", idempotency.DefaultMaxResponseBytes) + `"}`)
	if ok, err := b.plane.Complete(b.ctx, out.Claim, idempotency.Completion{ResourceType: "blob", ResourceID: "b-1", Response: big}); !ok || err != nil {
		t.Fatalf("Complete = %v, %v", ok, err)
	}
	res, err := b.runner.Execute(b.ctx, c, toolrun.AllowAll)
	if err == nil || !strings.Contains(err.Error(), "reference to blob b-1") || !equalResults(res, toolrun.Result{}) {
		t.Fatalf("Execute over a stored reference = %+v, %v; want an error naming the reference and no result", res, err)
	}
	if called != 0 {
		t.Fatalf("the tool was called %d times, want 0", called)
	}
}
