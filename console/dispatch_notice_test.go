package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/console"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/runs"
)

// TestPagesSayWhenDispatchIsOffAndRunsWait is issue 35.6: while this
// process does not dispatch and Runs are pending (its backlog read from
// the outbox by a dispatch.Watcher), every page carries a notice: the
// operator's overview names the count and the settings to set, an
// auditor's Runs page says their Runs stay queued without counting other
// organizations'. A process that dispatches, or one with nothing pending,
// shows none.
func TestPagesSayWhenDispatchIsOffAndRunsWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		dispatching bool
		pending     bool
		want        bool
	}{
		{"off, Runs pending", false, true, true},
		{"off, nothing pending", false, false, false},
		{"on, Runs pending", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var w *dispatch.Watcher
			b := setupAt(t, 0, nil, func(d *console.Deps) {
				var err error
				if w, err = dispatch.NewWatcher(d.Dispatches, dispatch.WatchConfig{
					Dispatching: tc.dispatching, Interval: time.Hour}); err != nil {
					t.Fatal(err)
				}
				d.Backlog = w
			})
			// The seeded world's Runs have pending dispatches; two more,
			// or none at all.
			store := runs.NewStore(b.pool, runs.Config{})
			for range 2 {
				name := "enrich.company"
				if _, _, err := store.Admit(context.Background(), runs.AdmitParams{OrganizationID: b.world.OrgA,
					Kind: runs.KindCapability, StartKey: runs.DirectStartKey(uuid.NewString()), RequestHash: "h",
					Name: &name, Input: json.RawMessage(`{}`), Actor: "alice"}); err != nil {
					t.Fatal(err)
				}
			}
			if !tc.pending {
				if _, err := b.pool.Exec(context.Background(), `UPDATE agent.run_dispatches
					SET state = 'dispatched', dispatched_at = now() WHERE state = 'pending'`); err != nil {
					t.Fatal(err)
				}
			}
			var pending int64
			if err := b.pool.QueryRow(context.Background(),
				`SELECT count(*) FROM agent.run_dispatches WHERE state = 'pending'`).Scan(&pending); err != nil {
				t.Fatal(err)
			}
			// One read, at once; the next an hour away.
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = w.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			for deadline := time.Now().Add(20 * time.Second); !w.Backlog().Read && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			if got := w.Backlog(); !got.Read || got.Pending != pending {
				t.Fatalf("Backlog = %+v, want %d pending, read", got, pending)
			}
			operator, auditor := b.operatorSignIn(t), b.signIn(t, b.world.OrgA, "alice")
			for _, p := range []struct {
				cookie, path string
				says         []string
			}{
				{operator, "/console/operator/claims", []string{
					fmt.Sprintf("%d Runs are waiting to be handed to the runtime", pending),
					"Set <code>SEARCHD_RUNTIME_URL</code> and <code>SEARCHD_RUNTIME_SECRET</code>"}},
				{auditor, "/console/runs", []string{"this replica has none configured: they stay queued", "Tell your operators."}},
			} {
				rec := b.do("GET", p.path, p.cookie, nil, nil)
				body := rec.Body.String()
				if rec.Code != 200 {
					t.Fatalf("GET %s = %d", p.path, rec.Code)
				}
				if got := strings.Contains(body, `id="dispatch-off"`); got != tc.want {
					t.Errorf("GET %s shows the dispatch-off notice: %v, want %v\n%s", p.path, got, tc.want, notice(body))
				}
				for _, s := range p.says {
					if tc.want && !strings.Contains(body, s) {
						t.Errorf("GET %s: the notice does not say %q:\n%s", p.path, s, notice(body))
					}
				}
				if p.cookie == auditor && strings.Contains(body, fmt.Sprintf("%d Runs", pending)) {
					t.Errorf("GET %s: an auditor is told the count of every organization's Runs:\n%s", p.path, notice(body))
				}
			}
		})
	}
}

// notice returns the part of body from the notice on, or a note that it
// has none.
func notice(body string) string {
	i := strings.Index(body, `id="dispatch-off"`)
	if i < 0 {
		return "(no notice)"
	}
	return string(bytes.TrimSpace([]byte(body[i:min(len(body), i+600)])))
}
