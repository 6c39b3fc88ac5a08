package toolrun_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/toolrun"
)

var (
	runA = uuid.MustParse("0195f3a4-5b6c-7d8e-9f00-111122223333")
	runB = uuid.MustParse("0195f3a4-5b6c-7d8e-9f00-444455556666")
)

const sendInput = `{"to":"ada@example.com","subject":"Hello","body":"Hi Ada"}`

func mustKey(t *testing.T, run uuid.UUID, name, input string, occurrence int) string {
	t.Helper()
	k, err := toolrun.Key(run, name, json.RawMessage(input), occurrence)
	if err != nil {
		t.Fatalf("Key(%s, %q, %s, %d) error: %v", run, name, input, occurrence, err)
	}
	return k
}

func TestKeyIsStableAndPassesThePlane(t *testing.T) {
	t.Parallel()
	k1 := mustKey(t, runA, "email.send", sendInput, 1)
	k2 := mustKey(t, runA, "email.send", sendInput, 1)
	if k1 != k2 {
		t.Fatalf("Key of the same call = %q and %q, want equal", k1, k2)
	}
	if !strings.HasPrefix(k1, toolrun.KeyPrefix) || len(k1) != len(toolrun.KeyPrefix)+64 {
		t.Fatalf("Key = %q, want %q and 64 hex digits", k1, toolrun.KeyPrefix)
	}
	if err := idempotency.ValidateKey(k1); err != nil {
		t.Fatalf("ValidateKey(%q) = %v, want nil", k1, err)
	}
	// The longest tool name still gives a key of the same length.
	long := strings.Repeat("a", 100)
	if k := mustKey(t, runA, long, sendInput, 1); len(k) != len(k1) {
		t.Fatalf("Key with a 100-byte name has %d bytes, want %d", len(k), len(k1))
	}
}

func TestKeyIgnoresKeyOrderAndWhiteSpace(t *testing.T) {
	t.Parallel()
	want := mustKey(t, runA, "email.send", sendInput, 1)
	for _, input := range []string{
		`{"body":"Hi Ada","subject":"Hello","to":"ada@example.com"}`,
		"{\n  \"subject\" : \"Hello\",\n\t\"to\": \"ada@example.com\", \"body\":\"Hi Ada\" }\n",
	} {
		if got := mustKey(t, runA, "email.send", input, 1); got != want {
			t.Errorf("Key(%s) = %q, want %q (the same call written differently)", input, got, want)
		}
	}
}

func TestKeyTellsDifferentCallsApart(t *testing.T) {
	t.Parallel()
	base := mustKey(t, runA, "email.send", sendInput, 1)
	for _, tc := range []struct {
		name       string
		run        uuid.UUID
		tool       string
		input      string
		occurrence int
	}{
		{"second identical call", runA, "email.send", sendInput, 2},
		{"another run", runB, "email.send", sendInput, 1},
		{"another tool", runA, "email.draft", sendInput, 1},
		{"another recipient", runA, "email.send", `{"to":"bob@example.com","subject":"Hello","body":"Hi Ada"}`, 1},
		// canonjson keeps numbers as written: 1 and 1.0 are two requests.
		{"a number written otherwise", runA, "email.send", `{"n":1.0}`, 1},
	} {
		if got := mustKey(t, tc.run, tc.tool, tc.input, tc.occurrence); got == base {
			t.Errorf("%s: Key = %q, the same as the first call's", tc.name, got)
		}
	}
	if mustKey(t, runA, "email.send", `{"n":1}`, 1) == mustKey(t, runA, "email.send", `{"n":1.0}`, 1) {
		t.Error("Key of {n:1} = Key of {n:1.0}, want different")
	}
}

func TestKeyRefusesWhatCannotBeKeyed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		run        uuid.UUID
		tool       string
		input      string
		occurrence int
	}{
		{"nil run", uuid.Nil, "email.send", sendInput, 1},
		{"occurrence 0", runA, "email.send", sendInput, 0},
		{"negative occurrence", runA, "email.send", sendInput, -1},
		{"empty tool", runA, "", sendInput, 1},
		{"upper-case tool", runA, "Email.Send", sendInput, 1},
		{"tool name too long", runA, strings.Repeat("a", 101), sendInput, 1},
		{"empty input", runA, "email.send", ``, 1},
		{"broken input", runA, "email.send", `{"to":`, 1},
		{"two values", runA, "email.send", `{} {}`, 1},
	} {
		k, err := toolrun.Key(tc.run, tc.tool, json.RawMessage(tc.input), tc.occurrence)
		if !errors.Is(err, toolrun.ErrInvalid) || k != "" {
			t.Errorf("%s: Key = %q, %v; want an error wrapping ErrInvalid", tc.name, k, err)
		}
	}
}

func TestRequestHashCoversToolAndCanonicalInput(t *testing.T) {
	t.Parallel()
	hash := func(tool, input string) string {
		t.Helper()
		h, err := toolrun.RequestHash(tool, json.RawMessage(input))
		if err != nil {
			t.Fatalf("RequestHash(%q, %s) error: %v", tool, input, err)
		}
		return h
	}
	h := hash("email.send", sendInput)
	if len(h) != 64 {
		t.Fatalf("RequestHash = %q, want 64 hex digits", h)
	}
	if got := hash("email.send", `{ "body":"Hi Ada", "to":"ada@example.com", "subject":"Hello" }`); got != h {
		t.Errorf("RequestHash of reordered input = %q, want %q", got, h)
	}
	if hash("email.draft", sendInput) == h || hash("email.send", `{"to":"bob@example.com"}`) == h {
		t.Error("RequestHash of another tool or input equals the first's")
	}
}

func TestOccurrencesCountIdenticalCallsInOrder(t *testing.T) {
	t.Parallel()
	reordered := `{"subject":"Hello","body":"Hi Ada","to":"ada@example.com"}`
	other := `{"to":"bob@example.com","subject":"Hello","body":"Hi Bob"}`
	calls := []struct {
		tool, input string
		want        int
	}{
		{"email.send", sendInput, 1},
		{"email.send", other, 1},
		{"email.send", reordered, 2}, // the same call as the first
		{"email.draft", sendInput, 1},
		{"email.send", sendInput, 3},
	}
	// A restarted segment replays the Run's calls through a new counter and
	// must derive the same keys.
	var segments [2][]string
	for s := range segments {
		var occ toolrun.Occurrences
		for _, c := range calls {
			n, err := occ.Next(c.tool, json.RawMessage(c.input))
			if err != nil {
				t.Fatalf("Next(%q, %s) error: %v", c.tool, c.input, err)
			}
			if n != c.want {
				t.Fatalf("segment %d: Next(%q, %s) = %d, want %d", s, c.tool, c.input, n, c.want)
			}
			segments[s] = append(segments[s], mustKey(t, runA, c.tool, c.input, n))
		}
	}
	seen := map[string]bool{}
	for i, k := range segments[0] {
		if segments[1][i] != k {
			t.Errorf("call %d: restarted segment key %q, want %q", i, segments[1][i], k)
		}
		if seen[k] {
			t.Errorf("call %d: key %q repeats an earlier call's", i, k)
		}
		seen[k] = true
	}

	var occ toolrun.Occurrences
	if _, err := occ.Next("email.send", json.RawMessage(`{`)); !errors.Is(err, toolrun.ErrInvalid) {
		t.Fatalf("Next(broken input) = %v, want ErrInvalid", err)
	}
	if n, _ := occ.Next("email.send", json.RawMessage(sendInput)); n != 1 {
		t.Fatalf("Next after a refused call = %d, want 1", n)
	}
}

func TestOccurrencesIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	var occ toolrun.Occurrences
	var wg sync.WaitGroup
	got := make([]int, 50)
	for i := range got {
		wg.Go(func() {
			n, err := occ.Next("email.send", json.RawMessage(sendInput))
			if err != nil {
				t.Error(err)
			}
			got[i] = n
		})
	}
	wg.Wait()
	seen := map[int]bool{}
	for _, n := range got {
		if n < 1 || n > len(got) || seen[n] {
			t.Fatalf("concurrent occurrences = %v, want 1..%d once each", got, len(got))
		}
		seen[n] = true
	}
}

func TestSpecLeaseIsTimeoutPlusMargin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		timeout, want time.Duration
	}{
		{time.Second, 16 * time.Second},
		{30 * time.Second, 45 * time.Second},
		{60 * time.Second, 75 * time.Second},
		{100 * time.Second, 125 * time.Second},
		{toolrun.StepBudget, 150 * time.Second},
	} {
		s := toolrun.ToolSpec{Name: "email.send", Timeout: tc.timeout}
		if got := s.Lease(); got != tc.want {
			t.Errorf("Lease() with Timeout %v = %v, want %v", tc.timeout, got, tc.want)
		}
		if s.Lease()-s.Timeout < toolrun.MinLeaseMargin {
			t.Errorf("Lease() with Timeout %v leaves a margin under %v", tc.timeout, toolrun.MinLeaseMargin)
		}
	}
	if s := (toolrun.ToolSpec{Name: "email.send"}); s.Scope() != "tool.email.send" {
		t.Errorf("Scope() = %q, want tool.email.send", s.Scope())
	}
	if r, err := idempotency.Retention(toolrun.ToolSpec{Name: "email.send"}.Scope()); err != nil || r != 30*24*time.Hour {
		t.Errorf("Retention(tool scope) = %v, %v; want 30 days", r, err)
	}
}

func TestSpecValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec toolrun.ToolSpec
		ok   bool
	}{
		{toolrun.ToolSpec{Name: "email.send", Timeout: 30 * time.Second}, true},
		{toolrun.ToolSpec{Name: "email.send", Timeout: toolrun.StepBudget, VendorIdempotency: true}, true},
		{toolrun.ToolSpec{Name: "email.send", Timeout: toolrun.StepBudget + time.Millisecond}, false},
		{toolrun.ToolSpec{Name: "email.send"}, false},
		{toolrun.ToolSpec{Name: "email.send", Timeout: -time.Second}, false},
		{toolrun.ToolSpec{Name: "", Timeout: time.Second}, false},
		{toolrun.ToolSpec{Name: "email..send", Timeout: time.Second}, false},
		{toolrun.ToolSpec{Name: "email send", Timeout: time.Second}, false},
	} {
		err := tc.spec.Validate()
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, toolrun.ErrInvalid)) {
			t.Errorf("Validate(%+v) = %v, want ok %v", tc.spec, err, tc.ok)
		}
	}
}
