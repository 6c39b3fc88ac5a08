//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/runs"
)

// verdict is what the checks of a scenario found.
type verdict struct {
	violations []string

	requests, keys, retries          int
	conflicts, unavailable, other5xx int
	transport                        int
	duplicates, stuck, failed        int
	slowKeys                         int // keys with a call slower than slowCall
	slowest                          time.Duration
}

type runRow struct{ id, snapshotID, savedSearchID string }

type claimRow struct {
	status, resourceType, resourceID string
	leaseToken                       string
	leasePassedBy                    time.Duration // negative while the lease holds
}

// verify checks the invariants of the scenario, from the database and from
// every answer a client saw:
//   - each key has exactly one Run and one snapshot, of the key's saved
//     search, and the key's claim is completed naming that snapshot;
//   - every snapshot of the organization is the snapshot of exactly one Run
//     (none orphaned, none shared) and no Run exists for a key nobody sent;
//   - no claim is processing: every key was finished;
//   - every 2xx answer for a key named its Run and its snapshot;
//   - every call ended in success within its deadline (but the probes'
//     pinned starts, whose replica the harness broke on purpose);
//   - no answer was a 5xx but 503 unavailable while the database was down,
//     and no 4xx but 409 in_progress.
func (s *scenarioRun) verify(ctx context.Context) verdict {
	var v verdict
	fail := func(format string, args ...any) { v.violations = append(v.violations, fmt.Sprintf(format, args...)) }

	s.mu.Lock()
	keys := make(map[string]keySpec, len(s.keys))
	for k, spec := range s.keys {
		keys[k] = spec
	}
	calls := append([]call(nil), s.calls...)
	wedged := make(map[string]string, len(s.wedged))
	for k, tok := range s.wedged {
		wedged[k] = tok
	}
	downs := append([]window(nil), s.downs...)
	s.mu.Unlock()
	v.keys = len(keys)

	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	runsByKey := map[string]runRow{}
	rows, err := s.h.db.Query(ctx, `SELECT start_key, id::text, coalesce(snapshot_id::text, ''), coalesce(saved_search_id::text, '')
		FROM agent.runs WHERE organization_id = $1`, s.org)
	if err == nil {
		for rows.Next() {
			var k string
			var r runRow
			if err = rows.Scan(&k, &r.id, &r.snapshotID, &r.savedSearchID); err != nil {
				break
			}
			runsByKey[k] = r
		}
		rows.Close()
		err = rows.Err()
	}
	if err != nil {
		fail("reading the Runs: %v", err)
		return v
	}
	claims := map[string]claimRow{}
	rows, err = s.h.db.Query(ctx, `SELECT key, status, coalesce(resource_type, ''), coalesce(resource_id, ''), lease_token::text,
			extract(epoch FROM now() - lease_expires_at)::float8
		FROM agent.idempotency_keys
		WHERE organization_id = $1 AND scope = 'surface.saved_search.start'`, s.org)
	if err == nil {
		for rows.Next() {
			var k string
			var c claimRow
			var passed float64
			if err = rows.Scan(&k, &c.status, &c.resourceType, &c.resourceID, &c.leaseToken, &passed); err != nil {
				break
			}
			c.leasePassedBy = time.Duration(passed * float64(time.Second))
			claims[k] = c
		}
		rows.Close()
		err = rows.Err()
	}
	if err != nil {
		fail("reading the claims: %v", err)
		return v
	}
	snapshots := map[string]string{} // id -> saved search
	rows, err = s.h.db.Query(ctx, `SELECT id::text, saved_search_id::text FROM agent.saved_search_snapshots
		WHERE organization_id = $1`, s.org)
	if err == nil {
		for rows.Next() {
			var id, ss string
			if err = rows.Scan(&id, &ss); err != nil {
				break
			}
			snapshots[id] = ss
		}
		rows.Close()
		err = rows.Err()
	}
	if err != nil {
		fail("reading the snapshots: %v", err)
		return v
	}

	// The database: one Run, one snapshot, one completed claim per key.
	runOf := map[string]runRow{}
	for key, spec := range keys {
		r, ok := runsByKey[runs.SavedSearchStartKey(key)]
		if !ok {
			fail("key %s: no Run", key)
			continue
		}
		runOf[key] = r
		if r.savedSearchID != spec.savedSearch {
			fail("key %s: Run %s is of saved search %s, want %s", key, r.id, r.savedSearchID, spec.savedSearch)
		}
		if ss, ok := snapshots[r.snapshotID]; !ok || ss != spec.savedSearch {
			fail("key %s: Run %s names snapshot %s, which is not a snapshot of saved search %s", key, r.id, r.snapshotID, spec.savedSearch)
		}
		c, ok := claims[key]
		switch {
		case !ok:
			fail("key %s: no claim", key)
		case c.status != "completed":
			// Counted below with every processing claim.
		case c.resourceType != admission.ResourceType || c.resourceID != r.snapshotID:
			fail("key %s: claim completed with %s %s, but its Run names snapshot %s", key, c.resourceType, c.resourceID, r.snapshotID)
		}
	}
	for key, tok := range wedged {
		if c, ok := claims[key]; ok && c.leaseToken == tok {
			fail("probe %s: the claim still carries the lease token of the replica the harness broke; nobody reclaimed it", key)
		}
	}
	if len(runsByKey) != len(runOf) {
		for sk, r := range runsByKey {
			if _, ok := keys[sk[len(runs.SavedSearchStartKey("")):]]; !ok {
				fail("Run %s under start key %q, which no client sent", r.id, sk)
				v.duplicates++
			}
		}
	}
	refs := map[string]int{}
	for _, r := range runsByKey {
		refs[r.snapshotID]++
	}
	for id, ss := range snapshots {
		switch n := refs[id]; {
		case n == 0:
			fail("snapshot %s of saved search %s is an orphan: no Run refers to it (a second freeze of a key)", id, ss)
			v.duplicates++
		case n > 1:
			fail("snapshot %s is the snapshot of %d Runs", id, n)
			v.duplicates += n - 1
		}
	}
	for key, c := range claims {
		if _, ok := keys[key]; !ok {
			fail("claim of key %q, which no client sent", key)
		}
		if c.status != "processing" {
			continue
		}
		v.stuck++
		if c.leasePassedBy > stuckMargin {
			fail("key %s: claim still processing %s after its lease passed", key, c.leasePassedBy.Round(time.Millisecond))
		} else {
			fail("key %s: claim still processing after every key finished (lease passed by %s)", key, c.leasePassedBy.Round(time.Millisecond))
		}
	}

	// The clients: every call succeeded in time, and every 2xx named the
	// key's Run.
	slow := map[string]bool{}
	for _, c := range calls {
		v.slowest = max(v.slowest, c.end.Sub(c.start))
		if c.end.Sub(c.start) >= s.h.cfg.slowCall() && !slow[c.key] {
			slow[c.key] = true
			v.slowKeys++
		}
		if c.end.After(c.deadline) {
			fail("key %s: %s's call ended %s past its deadline", c.key, c.client, c.end.Sub(c.deadline))
		}
		if c.err != nil {
			if !c.pinned {
				v.failed++
				fail("key %s: %s's call failed after %s: %v", c.key, c.client, c.end.Sub(c.start).Round(time.Millisecond), c.err)
			}
			continue
		}
		r, ok := runOf[c.key]
		switch {
		case !ok:
			fail("key %s: %s was answered Run %s, but the key has no Run", c.key, c.client, c.runID)
		case c.runID != r.id || c.snapshotID != r.snapshotID || c.runSnap != r.snapshotID:
			fail("key %s: %s was answered Run %s with snapshot %s (run.snapshot_id %s); the key's Run is %s with snapshot %s",
				c.key, c.client, c.runID, c.snapshotID, c.runSnap, r.id, r.snapshotID)
		}
	}

	// Every attempt: only the answers a fault excuses.
	attempts := s.rec.all()
	v.requests = len(attempts)
	v.retries = len(attempts) - len(calls)
	isDown := func(at time.Time) bool {
		for _, w := range downs {
			if !at.Before(w.from) && !at.After(w.to) {
				return true
			}
		}
		return false
	}
	for _, a := range attempts {
		switch {
		case a.status == 0:
			v.transport++
		case a.status == http.StatusConflict && a.code == "in_progress":
			v.conflicts++
		case a.status == http.StatusServiceUnavailable && a.code == "unavailable":
			v.unavailable++
			// Excused when it was answered, or sent, while the database
			// was down (or within downMargin after): a request that met
			// the outage may wait for it up to the answer timeout, and
			// on a busy machine end in 503 after the margin.
			if !isDown(a.at) && !isDown(a.sent) && !s.sessionEnded(a.replica, a.at) {
				fail("key %s: %s answered 503 unavailable at %s, while the database was up",
					a.key, a.replica, a.at.Format("15:04:05.000"))
			}
		case a.status >= 500:
			v.other5xx++
			fail("key %s: %s answered %d %s", a.key, a.replica, a.status, a.code)
		case a.status >= 300:
			fail("key %s: %s answered %d %s", a.key, a.replica, a.status, a.code)
		}
	}
	return v
}

// testChecksCatchPlantedViolations proves the checks can fail: on a
// scenario whose one key started cleanly it plants each kind of violation
// the suite hunts for, and wants verify to report every one of them.
func testChecksCatchPlantedViolations(t *testing.T, h *harness) {
	ctx := t.Context()
	s, err := newScenarioRun(ctx, t, h, "Planted")
	if err != nil {
		t.Fatal(err)
	}
	c, err := newClient("planted", s.token, h.replicas, 0, loadPolicy, s.rec)
	if err != nil {
		t.Fatal(err)
	}
	good := s.start(ctx, c, "planted", "Planted-ok", s.register("Planted-ok", 0), false)
	if good.err != nil {
		t.Fatalf("the clean start: %v", good.err)
	}
	if v := s.verify(ctx); len(v.violations) > 0 {
		t.Fatalf("verify of a clean start = %q, want no violations", v.violations)
	}

	// A second freeze of the key's saved search that no Run refers to.
	if _, err := h.db.Exec(ctx, `INSERT INTO agent.saved_search_snapshots
			(id, organization_id, saved_search_id, saved_search_version, saved_search_name,
			 brief, baseline, content_hash, created_at)
		SELECT gen_random_uuid(), organization_id, saved_search_id, saved_search_version, saved_search_name,
			brief, baseline, content_hash, now()
		FROM agent.saved_search_snapshots WHERE organization_id = $1`, s.org); err != nil {
		t.Fatal(err)
	}
	// A key a client sent whose claim was left processing long ago.
	s.register("Planted-stuck", 1)
	if _, err := h.db.Exec(ctx, `INSERT INTO agent.idempotency_keys
			(id, organization_id, scope, key, request_hash, status, lease_token,
			 claimed_at, lease_expires_at, retain_until)
		VALUES (gen_random_uuid(), $1, 'surface.saved_search.start', 'Planted-stuck', 'x', 'processing',
			gen_random_uuid(), now() - interval '2 minutes', now() - interval '1 minute', now() + interval '1 day')`,
		s.org); err != nil {
		t.Fatal(err)
	}
	// An answer that names another Run, a call that failed, a 500, and a
	// 503 while the database was up.
	wrong := good
	wrong.client, wrong.runID = "liar", uuid.NewString()
	failed := good
	failed.client, failed.err = "quitter", errors.New("planted failure")
	s.mu.Lock()
	s.calls = append(s.calls, wrong, failed)
	s.mu.Unlock()
	s.rec.add(attempt{at: time.Now(), client: "planted", replica: "searchd-r1", key: "Planted-ok", status: 500, code: "internal"})
	s.rec.add(attempt{at: time.Now(), sent: time.Now(), client: "planted", replica: "searchd-r2", key: "Planted-ok", status: 503, code: "unavailable"})

	v := s.verify(ctx)
	for _, want := range []string{
		"is an orphan",
		"key Planted-stuck: no Run",
		"key Planted-stuck: claim still processing 1m",
		"liar was answered Run " + wrong.runID,
		"quitter's call failed",
		"answered 500 internal",
		"answered 503 unavailable at",
	} {
		if !slices.ContainsFunc(v.violations, func(msg string) bool { return strings.Contains(msg, want) }) {
			t.Errorf("verify of planted violations missed %q; it reported %q", want, v.violations)
		}
	}
	if v.duplicates != 1 || v.stuck != 1 || v.failed != 1 || v.other5xx != 1 || v.unavailable != 1 {
		t.Errorf("verify counted %d duplicates, %d stuck, %d failed, %d other 5xx, %d 503s; want 1 of each",
			v.duplicates, v.stuck, v.failed, v.other5xx, v.unavailable)
	}
}
