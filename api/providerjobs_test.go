package api_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
)

// The providers every test server holds a callback secret for.
const (
	acme          = "acme"
	otherProvider = "other.vendor"
)

var (
	acmeSecret  = []byte("acme-callback-secret")
	otherSecret = []byte("other-callback-secret")
)

// dropCounter is an Observer that counts drops by provider and reason.
type dropCounter struct {
	providerjobs.NopObserver
	mu sync.Mutex
	n  map[string]int
}

func (d *dropCounter) ObserveDrop(provider, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[provider+"/"+reason]++
}

// counts returns a copy of the counts, keyed "provider/reason".
func (d *dropCounter) counts() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for k, v := range d.n {
		out[k] = v
	}
	return out
}

// seedRun admits a direct Run in org through the store and returns its id.
func (b *bundle) seedRun(org uuid.UUID) uuid.UUID {
	b.t.Helper()
	name := "seeded capability"
	run, _, err := runs.NewStore(b.pool, runs.Config{}).Admit(context.Background(), runs.AdmitParams{
		OrganizationID: org,
		Kind:           runs.KindCapability,
		StartKey:       runs.DirectStartKey(uuid.NewString()),
		RequestHash:    "seed",
		Name:           &name,
	})
	if err != nil {
		b.t.Fatalf("seeding a Run: %v", err)
	}
	return run.ID
}

// seedJob registers an acme job with providerJobID for a new Run of the
// bundle's organization, through the service, not the API.
func (b *bundle) seedJob(providerJobID string) *providerjobs.Job {
	b.t.Helper()
	job, created, err := providerjobs.New(b.pool, idempotency.NewService(b.pool, idempotency.Config{}), providerjobs.Config{}).
		Register(context.Background(), b.org, providerjobs.RegisterParams{
			RunID: b.seedRun(b.org), Provider: acme, ProviderJobID: providerJobID,
		})
	if err != nil || !created {
		b.t.Fatalf("seeding a provider job: created %v, %v", created, err)
	}
	return job
}

// jobState is what a delivery may change of a job.
type jobState struct {
	status  string
	result  string // the jsonb text, "" for NULL
	version int64
}

func (b *bundle) jobState(id uuid.UUID) jobState {
	b.t.Helper()
	var s jobState
	var result *string
	if err := b.pool.QueryRow(context.Background(),
		`SELECT status, result::text, version FROM agent.provider_jobs WHERE id = $1`, id).
		Scan(&s.status, &result, &s.version); err != nil {
		b.t.Fatalf("reading job %s: %v", id, err)
	}
	if result != nil {
		s.result = *result
	}
	return s
}

// dropRow is one row of agent.webhook_drops.
type dropRow struct {
	provider, pathJobID, deliveryID, requestHash, reason string
	org                                                  *uuid.UUID
}

func (b *bundle) drops() []dropRow {
	b.t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		SELECT provider, path_job_id, delivery_id, request_hash, reason, organization_id
		FROM agent.webhook_drops ORDER BY received_at, id`)
	if err != nil {
		b.t.Fatal(err)
	}
	defer rows.Close()
	var out []dropRow
	for rows.Next() {
		var d dropRow
		if err := rows.Scan(&d.provider, &d.pathJobID, &d.deliveryID, &d.requestHash, &d.reason, &d.org); err != nil {
			b.t.Fatal(err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		b.t.Fatal(err)
	}
	return out
}

// claimRow is the stored claim of a delivery.
type claimRow struct {
	status, resourceType, resourceID, response string
}

// claims returns the stored claims of provider's deliveries, by delivery id.
func (b *bundle) claims(provider string) map[string]claimRow {
	b.t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		SELECT key, status, coalesce(resource_type, ''), coalesce(resource_id, ''), coalesce(response::text, '')
		FROM agent.idempotency_keys WHERE scope = $1`, providerjobs.Scope(provider))
	if err != nil {
		b.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]claimRow{}
	for rows.Next() {
		var key string
		var c claimRow
		if err := rows.Scan(&key, &c.status, &c.resourceType, &c.resourceID, &c.response); err != nil {
			b.t.Fatal(err)
		}
		out[key] = c
	}
	return out
}

// sign returns the webhook-signature of a delivery, signed with the
// reference library: "v1," and the base64 HMAC-SHA256 of
// "<deliveryID>.<unix seconds of ts>.<body>" under secret.
func sign(secret []byte, deliveryID string, ts time.Time, body []byte) string {
	wh, err := standardwebhooks.NewWebhookRaw(secret)
	if err != nil {
		panic(err)
	}
	sig, err := wh.Sign(deliveryID, ts, body)
	if err != nil {
		panic(err)
	}
	return sig
}

// unix is the webhook-timestamp of ts.
func unix(ts time.Time) string { return strconv.FormatInt(ts.Unix(), 10) }

// signedHeaders returns the Standard Webhooks headers of a delivery signed
// with secret now.
func signedHeaders(secret []byte, deliveryID string, body []byte) map[string]string {
	now := time.Now()
	return map[string]string{
		api.HeaderDeliveryID: deliveryID,
		api.HeaderTimestamp:  unix(now),
		api.HeaderSignature:  sign(secret, deliveryID, now, body),
	}
}

// callbackBody returns the raw body of a delivery about jobID.
func callbackBody(jobID, status string, result any) []byte {
	m := map[string]any{"job_id": jobID, "status": status}
	if result != nil {
		m["result"] = result
	}
	b, _ := json.Marshal(m)
	return b
}

// delivery describes one provider callback; callback sends it.
type delivery struct {
	provider   string // default acme
	jobID      string // the path's job id: searchd's id of the job
	deliveryID string // "" sends no webhook-id
	body       []byte
	// at is the time the delivery is signed, sent as webhook-timestamp;
	// zero is now.
	at time.Time
	// timestamp overrides the webhook-timestamp header; "-" sends none.
	timestamp string
	// signature overrides the webhook-signature header; "" signs the
	// delivery id, at and body with the provider's secret, "-" sends none.
	signature string
	header    map[string]string
}

// pathOf is the path's job id of job: searchd's id.
func pathOf(job *providerjobs.Job) string { return job.ID.String() }

func (b *bundle) callbackReq(d delivery) req {
	if d.provider == "" {
		d.provider = acme
	}
	if d.at.IsZero() {
		d.at = time.Now()
	}
	h := map[string]string{}
	if d.deliveryID != "" {
		h[api.HeaderDeliveryID] = d.deliveryID
	}
	switch d.timestamp {
	case "":
		h[api.HeaderTimestamp] = unix(d.at)
	case "-":
	default:
		h[api.HeaderTimestamp] = d.timestamp
	}
	switch d.signature {
	case "":
		secret := acmeSecret
		if d.provider == otherProvider {
			secret = otherSecret
		}
		h[api.HeaderSignature] = sign(secret, d.deliveryID, d.at, d.body)
	case "-":
	default:
		h[api.HeaderSignature] = d.signature
	}
	for k, v := range d.header {
		h[k] = v
	}
	return req{method: http.MethodPost, noAuth: true, body: d.body, header: h,
		path: "/v1/callbacks/" + url.PathEscape(d.provider) + "/jobs/" + url.PathEscape(d.jobID)}
}

func (b *bundle) callback(d delivery) *response {
	b.t.Helper()
	return b.do(b.callbackReq(d))
}

// answer decodes the 200 answer of a callback.
func (r *response) answer(t *testing.T) (status, reason string) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("callback = %d %s, want 200", r.status, r.body)
	}
	var a struct{ Status, Reason string }
	r.decode(t, &a)
	return a.Status, a.Reason
}

// callbackFixture is a server on a stubbed clock with one pending acme job
// and an observer of its drops.
type callbackFixture struct {
	*bundle
	clk   *dbclocktest.Stub
	obs   *dropCounter
	plane *idempotency.Service // on the same clock as the server's
	job   *providerjobs.Job
}

func newCallbackFixture(t *testing.T) *callbackFixture {
	t.Helper()
	clk := dbclocktest.New(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	obs := &dropCounter{}
	b := setup(t, setupOpts{clock: clk.Clock(), observer: obs})
	return &callbackFixture{
		bundle: b,
		clk:    clk,
		obs:    obs,
		plane:  idempotency.NewService(b.pool, idempotency.Config{Clock: clk.Clock()}),
		job:    b.seedJob("job-" + uuid.NewString()[:8]),
	}
}

// wantDropped checks that res dropped the delivery for reason, that the
// only drop recorded is it, with the job's organization (none for
// unknown_job), that the observer counted it once, and that the job is
// still as it was.
func (f *callbackFixture) wantDropped(t *testing.T, res *response, d delivery, reason string, before jobState) {
	t.Helper()
	if status, got := res.answer(t); status != "dropped" || got != reason {
		t.Fatalf("callback answered %s, want dropped %s", res.body, reason)
	}
	drops := f.drops()
	if len(drops) != 1 {
		t.Fatalf("drops = %+v, want exactly one", drops)
	}
	dr := drops[0]
	wantOrg := reason != "unknown_job"
	if dr.reason != reason || dr.deliveryID != d.deliveryID || dr.provider != acme || dr.pathJobID != d.jobID ||
		dr.requestHash != providerjobs.RequestHash(d.body) || (dr.org != nil) != wantOrg ||
		(wantOrg && *dr.org != f.org) {
		t.Errorf("drop = %+v, want reason %s for delivery %s of the organization (%v)", dr, reason, d.deliveryID, wantOrg)
	}
	if got := f.obs.counts(); len(got) != 1 || got[acme+"/"+reason] != 1 {
		t.Errorf("observer counted %v, want one %s/%s", got, acme, reason)
	}
	if after := f.jobState(f.job.ID); after != before {
		t.Errorf("job = %+v after a dropped delivery, want it unchanged %+v", after, before)
	}
}

func TestCallbackAcceptedAppliesTheUpdate(t *testing.T) {
	t.Parallel()
	f := newCallbackFixture(t)
	d := delivery{jobID: pathOf(f.job), deliveryID: "d-1",
		body: callbackBody(f.job.ProviderJobID, "running", map[string]any{"progress": 0.5})}
	if status, reason := f.callback(d).answer(t); status != "accepted" || reason != "" {
		t.Fatalf("callback = %s %s, want accepted", status, reason)
	}
	if got, want := f.jobState(f.job.ID), (jobState{"running", `{"progress": 0.5}`, 2}); got != want {
		t.Errorf("job = %+v, want %+v", got, want)
	}
	claim, ok := f.claims(acme)["d-1"]
	if !ok || claim.status != "completed" || claim.resourceType != "provider_job" || claim.resourceID != f.job.ID.String() ||
		claim.response != `{"status": "running", "applied": true}` {
		t.Errorf("claim = %+v, want completed for provider_job %s, applied running", claim, f.job.ID)
	}
	if drops := f.drops(); len(drops) != 0 || len(f.obs.counts()) != 0 {
		t.Errorf("an accepted delivery recorded drops %+v, observed %v", drops, f.obs.counts())
	}

	// The job reads back through the API with the callback's result, and
	// the path the delivery came on.
	var job struct {
		providerjobs.Job
		CallbackPath string `json:"callback_path"`
	}
	res := f.do(req{method: http.MethodGet, path: "/v1/provider-jobs/" + f.job.ID.String()})
	res.decode(t, &job)
	if res.status != http.StatusOK || job.Status != providerjobs.StatusRunning || string(job.Result) != `{"progress":0.5}` || job.Version != 2 ||
		job.CallbackPath != f.callbackReq(d).path {
		t.Errorf("GET job = %d %s, want running with the result, version 2, and callback_path %s", res.status, res.body, f.callbackReq(d).path)
	}
}

func TestCallbackDuplicateAfterCompleted(t *testing.T) {
	t.Parallel()
	f := newCallbackFixture(t)
	d := delivery{jobID: pathOf(f.job), deliveryID: "d-1", body: callbackBody(f.job.ProviderJobID, "running", nil)}
	if status, _ := f.callback(d).answer(t); status != "accepted" {
		t.Fatalf("first delivery was not accepted")
	}
	before := f.jobState(f.job.ID)
	f.wantDropped(t, f.callback(d), d, "duplicate", before)
	if before.version != 2 {
		t.Errorf("job version = %d after one applied delivery, want 2", before.version)
	}
}

func TestCallbackDuplicateWhileProcessing(t *testing.T) {
	t.Parallel()
	f := newCallbackFixture(t)
	d := delivery{jobID: pathOf(f.job), deliveryID: "d-1", body: callbackBody(f.job.ProviderJobID, "succeeded", nil)}
	// Another worker is applying this very delivery right now.
	out, err := f.plane.Claim(context.Background(), f.org, providerjobs.Scope(acme), d.deliveryID,
		providerjobs.RequestHash(d.body), idempotency.WebhookLease)
	if err != nil || out.Kind != idempotency.KindClaimed {
		t.Fatalf("Claim = %v, %v; want claimed", out.Kind, err)
	}
	before := f.jobState(f.job.ID)
	// The delivery is stored, and acknowledged as queued: its apply met
	// the other worker's live claim, so the applier finishes it later.
	if status, reason := f.callback(d).answer(t); status != "queued" || reason != "" {
		t.Fatalf("callback while another worker holds the claim = %s %s, want queued", status, reason)
	}
	// A copy of the stored arrival is a duplicate.
	f.wantDropped(t, f.callback(d), d, "duplicate", before)
	if before != (jobState{"pending", "", 1}) {
		t.Errorf("job = %+v, want it pending and untouched", before)
	}
	if c := f.claims(acme)[d.deliveryID]; c.status != "processing" {
		t.Errorf("the holder's claim = %+v, want it still processing", c)
	}
}

func TestCallbackHashMismatch(t *testing.T) {
	t.Parallel()
	f := newCallbackFixture(t)
	first := delivery{jobID: pathOf(f.job), deliveryID: "d-1", body: callbackBody(f.job.ProviderJobID, "running", nil)}
	if status, _ := f.callback(first).answer(t); status != "accepted" {
		t.Fatalf("first delivery was not accepted")
	}
	before := f.jobState(f.job.ID)
	// The same delivery id, with other content.
	other := first
	other.body = callbackBody(f.job.ProviderJobID, "succeeded", map[string]any{"rows": 3})
	f.wantDropped(t, f.callback(other), other, "hash_mismatch", before)
}

// TestCallbackUnknownJob: a delivery whose path names no job of the
// provider drops as unknown_job, recorded without an organization, with
// the path as received, whatever the body; nothing is claimed or landed.
func TestCallbackUnknownJob(t *testing.T) {
	t.Parallel()
	// The fixture's job, under other.vendor: a job is the provider's
	// whose secret signed the delivery, or nobody's.
	for _, tt := range append(strangePaths(), strangePath{"registered for another provider", "", ""}) {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newCallbackFixture(t)
			d := delivery{jobID: tt.jobID, deliveryID: "d-1"}
			// The body names a provider job nobody registered.
			d.body = callbackBody("nobody-registered-this", "running", nil)
			if tt.jobID == "" {
				// The fixture's own job and path, signed by another
				// provider.
				d.provider, d.jobID, tt.stored = otherProvider, pathOf(f.job), pathOf(f.job)
				d.body = callbackBody(f.job.ProviderJobID, "running", nil)
			}
			before := f.jobState(f.job.ID)
			// Without an organization: the tenant is resolved before the
			// claim.
			f.wantDroppedUnclaimed(t, f.callback(d), d, "unknown_job", tt.stored, before)
		})
	}
}

// strangePath is a callback path's job id that names no job, and the
// path a drop stores for it (at most 255 bytes, valid UTF-8).
type strangePath struct{ name, jobID, stored string }

func strangePaths() []strangePath {
	return []strangePath{
		{"a UUID nobody holds", "5f0c1d7e-8a3b-4c2d-9e6f-112233445566", "5f0c1d7e-8a3b-4c2d-9e6f-112233445566"},
		{"the nil UUID", "00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000"},
		{"longer than any job id", strings.Repeat("x", 300), strings.Repeat("x", 255)},
		{"NUL and bad UTF-8 in the path", "a\x00b\xffc", "a\uFFFDb\uFFFDc"},
	}
}

// wantDroppedUnclaimed asserts that res dropped d for reason (unknown_job,
// recorded without an organization, or job_mismatch, under the job's),
// recorded once with the path stored and counted once, and that nothing
// was claimed or landed and the job is as it was before.
func (f *callbackFixture) wantDroppedUnclaimed(t *testing.T, res *response, d delivery, reason, stored string, before jobState) {
	t.Helper()
	if status, got := res.answer(t); status != "dropped" || got != reason {
		t.Fatalf("callback = %s, want dropped %s", res.body, reason)
	}
	drops := f.drops()
	orgOK := len(drops) == 1 && drops[0].org == nil
	if reason != "unknown_job" {
		orgOK = len(drops) == 1 && drops[0].org != nil && *drops[0].org == f.org
	}
	if !orgOK || drops[0].reason != reason || drops[0].pathJobID != stored || drops[0].provider != cmp.Or(d.provider, acme) {
		t.Errorf("drops = %+v, want one %s (of the organization: %v) naming the path %q", drops, reason, reason != "unknown_job", stored)
	}
	if got := f.obs.counts(); len(got) != 1 || got[cmp.Or(d.provider, acme)+"/"+reason] != 1 {
		t.Errorf("observer counted %v, want one %s", got, reason)
	}
	f.wantCount(t, 0, `SELECT count(*) FROM agent.idempotency_keys`)
	f.wantCount(t, 0, `SELECT count(*) FROM agent.provider_inbox`)
	if after := f.jobState(f.job.ID); after != before {
		t.Errorf("job = %+v, want it unchanged %+v", after, before)
	}
}

// TestCallbackOnAPathOfNoJobIsAnUnknownJob: a delivery whose body names
// the fixture's job, posted to a path that names no job (the provider's
// job id included: callbacks name searchd's id), drops as unknown_job,
// recorded without an organization with the path as received: the path
// decides the job, and a body alone names none (issue 36.6: a provider
// job id may name a job in several organizations). Nothing is claimed or
// landed, so the path cannot bind the delivery id.
func TestCallbackOnAPathOfNoJobIsAnUnknownJob(t *testing.T) {
	t.Parallel()
	for _, tt := range append(strangePaths(), strangePath{"the provider's job id", "provider-id", "provider-id"}) {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newCallbackFixture(t)
			d := delivery{jobID: tt.jobID, deliveryID: "d-1", body: callbackBody(f.job.ProviderJobID, "running", nil)}
			if tt.jobID == "provider-id" {
				d.jobID, tt.stored = f.job.ProviderJobID, f.job.ProviderJobID
			}
			before := f.jobState(f.job.ID)
			f.wantDroppedUnclaimed(t, f.callback(d), d, "unknown_job", tt.stored, before)
			// The delivery, on its job's path, is applied.
			d.jobID = pathOf(f.job)
			if status, _ := f.callback(d).answer(t); status != "accepted" {
				t.Errorf("the delivery on its job's path = %s, want accepted", status)
			}
		})
	}
}

// TestCallbackJobMismatch: the path names the fixture's job and the body
// another job of the organization: job_mismatch, recorded under the
// path's job, and neither job changes.
func TestCallbackJobMismatch(t *testing.T) {
	t.Parallel()
	f := newCallbackFixture(t)
	other := f.seedJob("job-other-" + uuid.NewString()[:8])
	// The path names the fixture's job, the body another one of ours.
	d := delivery{jobID: pathOf(f.job), deliveryID: "d-1", body: callbackBody(other.ProviderJobID, "succeeded", nil)}
	before := f.jobState(f.job.ID)
	f.wantDropped(t, f.callback(d), d, "job_mismatch", before)
	if s := f.jobState(other.ID); s.version != 1 {
		t.Errorf("the job the body named = %+v, want it untouched", s)
	}
	f.wantCount(t, 0, `SELECT count(*) FROM agent.idempotency_keys`)
}

// wantNothingRecorded fails unless no claim and no drop exist, no drop was
// observed, and the job is as it was.
func (f *callbackFixture) wantNothingRecorded(t *testing.T, what string, before jobState) {
	t.Helper()
	if n := f.count(`SELECT count(*) FROM agent.idempotency_keys`); n != 0 {
		t.Errorf("%s: %d claims, want none", what, n)
	}
	if drops := f.drops(); len(drops) != 0 {
		t.Errorf("%s: drops %+v, want none", what, drops)
	}
	if got := f.obs.counts(); len(got) != 0 {
		t.Errorf("%s: observed %v, want nothing", what, got)
	}
	if after := f.jobState(f.job.ID); after != before {
		t.Errorf("%s: job = %+v, want it unchanged %+v", what, after, before)
	}
}

func TestCallbackSignatureIsChecked(t *testing.T) {
	t.Parallel()
	f := newCallbackFixture(t)
	body := callbackBody(f.job.ProviderJobID, "succeeded", nil)
	now := time.Now()
	good := sign(acmeSecret, "d-x", now, body) // what every case below is sent as
	mac := strings.TrimPrefix(good, "v1,")
	for _, tt := range []struct {
		name string
		d    delivery
	}{
		{"missing", delivery{signature: "-"}},
		{"empty", delivery{signature: " "}},
		{"no version", delivery{signature: mac}},
		{"another version", delivery{signature: "v2," + mac}},
		{"the asymmetric version", delivery{signature: "v1a," + mac}},
		{"version in capitals", delivery{signature: "V1," + mac}},
		{"not base64", delivery{signature: "v1," + strings.Repeat("!", 44)}},
		{"base64 without its padding", delivery{signature: "v1," + strings.TrimRight(mac, "=")}},
		{"too short", delivery{signature: "v1," + mac[:40]}},
		{"too long", delivery{signature: "v1," + mac[:43] + "AAAAA="}},
		{"the old scheme", delivery{signature: "sha256=" + strings.Repeat("ab", 32)}},
		{"wrong secret", delivery{signature: sign([]byte("not-acme's-secret"), "d-x", now, body)}},
		{"another provider's secret", delivery{signature: sign(otherSecret, "d-x", now, body)}},
		{"the signature of another body", delivery{signature: sign(acmeSecret, "d-x", now, callbackBody(f.job.ProviderJobID, "failed", nil))}},
		{"the signature of another delivery id", delivery{signature: sign(acmeSecret, "d-y", now, body)}},
		{"the signature of another second", delivery{signature: sign(acmeSecret, "d-x", now.Add(-time.Second), body)}},
		{"the signature of the body alone", delivery{signature: sign(acmeSecret, "", time.Unix(0, 0), body)}},
		{"two wrong signatures", delivery{signature: sign(otherSecret, "d-x", now, body) + " " + sign([]byte("x"), "d-x", now, body)}},
		{"unknown provider", delivery{provider: "nobody", signature: good}},
		{"provider in capitals", delivery{provider: "ACME", signature: good}},
		{"a bearer token instead", delivery{signature: "-", header: bearer(f.token)}},
		{"no timestamp", delivery{timestamp: "-", signature: good}},
		{"empty timestamp", delivery{timestamp: " ", signature: good}},
		{"timestamp not a number", delivery{timestamp: "soon", signature: good}},
		{"timestamp in milliseconds", delivery{timestamp: strconv.FormatInt(now.UnixMilli(), 10), signature: good}},
		{"timestamp with a fraction", delivery{timestamp: unix(now) + ".0", signature: good}},
		{"timestamp with a sign", delivery{timestamp: "+" + unix(now), signature: good}},
		{"timestamp with a leading zero", delivery{timestamp: "0" + unix(now), signature: good}},
		{"timestamp as a date", delivery{timestamp: now.UTC().Format(time.RFC3339), signature: good}},
		{"negative timestamp", delivery{timestamp: "-1", signature: good}},
		{"timestamp past int64", delivery{timestamp: "99999999999999999999", signature: good}},
	} {
		d := tt.d
		d.jobID, d.deliveryID, d.body, d.at = pathOf(f.job), "d-x", body, now
		res := f.callback(d)
		res.wantProblem(t, http.StatusUnauthorized, "unauthorized", "%s: callback", tt.name)
		// The challenge names the signature, not the bearer token the
		// callback route does not take.
		if ch := res.header.Get("WWW-Authenticate"); !strings.HasPrefix(ch, "Webhook-Signature ") {
			t.Errorf("%s: WWW-Authenticate = %q, want a Webhook-Signature challenge", tt.name, ch)
		}
	}
	f.wantNothingRecorded(t, "after refused signatures", jobState{"pending", "", 1})

	// The control: the same delivery, signed right, is applied, and one
	// matching v1 signature among others (a secret being rotated) is
	// enough.
	d := delivery{jobID: pathOf(f.job), deliveryID: "d-x", body: body, at: now,
		signature: "v1a,c2lnbmF0dXJl " + sign(otherSecret, "d-x", now, body) + " " + good}
	if status, _ := f.callback(d).answer(t); status != "accepted" {
		t.Errorf("a well-signed delivery was not accepted")
	}
}

// TestCallbackTimestampWindowIsTheServersClock stubs the server's clock
// and moves the signing time around it: within 5 minutes either way a
// delivery is accepted, beyond them it is refused with a detail that
// says why, and nothing is recorded.
func TestCallbackTimestampWindowIsTheServersClock(t *testing.T) {
	t.Parallel()
	clk := dbclocktest.New(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	obs := &dropCounter{}
	b := setup(t, setupOpts{clock: clk.Clock(), observer: obs, deps: func(d *api.Deps) { d.Now = clk.Now }})
	f := &callbackFixture{bundle: b, clk: clk, obs: obs, job: b.seedJob("job-window")}
	body := callbackBody(f.job.ProviderJobID, "running", nil)
	for _, skew := range []time.Duration{
		-api.CallbackTolerance - time.Second, api.CallbackTolerance + time.Second,
		-24 * time.Hour, 365 * 24 * time.Hour, -time.Duration(clk.Now().Unix()) * time.Second,
	} {
		d := delivery{jobID: pathOf(f.job), deliveryID: "d-stale", body: body, at: clk.Now().Add(skew)}
		res := f.callback(d)
		if res.status != http.StatusUnauthorized || res.problem(t).Code != "unauthorized" ||
			!strings.Contains(res.problem(t).Detail, "more than 5 minutes from the server's clock") {
			t.Errorf("signed %s from the server's clock: callback = %d %s, want 401 saying the timestamp is out of the window",
				skew, res.status, res.body)
		}
	}
	f.wantNothingRecorded(t, "after stale timestamps", jobState{"pending", "", 1})

	for i, skew := range []time.Duration{-api.CallbackTolerance, api.CallbackTolerance, 0} {
		d := delivery{jobID: pathOf(f.job), deliveryID: "d-" + strconv.Itoa(i), body: body, at: clk.Now().Add(skew)}
		if status, reason := f.callback(d).answer(t); status != "accepted" {
			t.Errorf("signed %s from the server's clock: callback = %s %s, want accepted", skew, status, reason)
		}
	}
}

func TestCallbackRefusesUnusableSignedDeliveries(t *testing.T) {
	t.Parallel()
	f := newCallbackFixture(t)
	job := f.job.ProviderJobID
	for _, tt := range []struct {
		name       string
		deliveryID string
		body       string
		code       string
	}{
		{"no delivery id", "", string(callbackBody(job, "running", nil)), "missing_delivery_id"},
		{"blank delivery id", " ", string(callbackBody(job, "running", nil)), "missing_delivery_id"},
		{"delivery id too long", strings.Repeat("d", 256), string(callbackBody(job, "running", nil)), "invalid_delivery_id"},
		{"empty body", "d", "", "malformed_json"},
		{"not JSON", "d", `{"job_id": `, "malformed_json"},
		{"an array", "d", `[]`, "malformed_json"},
		{"two values", "d", `{} {}`, "malformed_json"},
		{"no job id", "d", `{"status": "running"}`, "validation_failed"},
		{"job id not a string", "d", `{"job_id": 7, "status": "running"}`, "validation_failed"},
		{"no status", "d", `{"job_id": "` + job + `"}`, "validation_failed"},
		{"pending is not reported", "d", `{"job_id": "` + job + `", "status": "pending"}`, "validation_failed"},
		{"unknown status", "d", `{"job_id": "` + job + `", "status": "done"}`, "validation_failed"},
		{"result not an object", "d", `{"job_id": "` + job + `", "status": "running", "result": [1]}`, "validation_failed"},
		{"duplicate member", "d", `{"job_id": "` + job + `", "status": "running", "status": "failed"}`, "validation_failed"},
		{"NUL in the result", "d", `{"job_id": "` + job + `", "status": "running", "result": {"a": "\u0000"}}`, "validation_failed"},
	} {
		res := f.callback(delivery{jobID: pathOf(f.job), deliveryID: tt.deliveryID, body: []byte(tt.body)})
		if res.status != http.StatusBadRequest || res.problem(t).Code != tt.code {
			t.Errorf("%s: callback = %d %s, want 400 %s", tt.name, res.status, res.body, tt.code)
		}
	}
	// Two webhook-id headers, the first one signed: which would the claim
	// be keyed by?
	body := callbackBody(job, "running", nil)
	now := time.Now()
	hr, err := http.NewRequest(http.MethodPost, f.server.URL+f.callbackReq(delivery{jobID: pathOf(f.job)}).path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Add(api.HeaderDeliveryID, "d-a")
	hr.Header.Add(api.HeaderDeliveryID, "d-b")
	hr.Header.Set(api.HeaderTimestamp, unix(now))
	hr.Header.Set(api.HeaderSignature, sign(acmeSecret, "d-a", now, body))
	if res := f.raw(hr); res.status != http.StatusBadRequest || res.problem(t).Code != "invalid_delivery_id" {
		t.Errorf("two webhook-id headers: callback = %d %s, want 400 invalid_delivery_id", res.status, res.body)
	}
	f.wantNothingRecorded(t, "after refused deliveries", jobState{"pending", "", 1})

	// Members beyond the three are the provider's business: ignored.
	extra := `{"job_id": "` + job + `", "status": "running", "result": null, "attempt": 2}`
	if status, _ := f.callback(delivery{jobID: pathOf(f.job), deliveryID: "d-extra", body: []byte(extra)}).answer(t); status != "accepted" {
		t.Errorf("a delivery with an extra member was not accepted")
	}
}

func TestCallbackBodyLimitHoldsBeforeTheSignature(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{deps: func(d *api.Deps) { d.MaxBodyBytes = 1024 }})
	body := callbackBody("j", "running", map[string]any{"blob": strings.Repeat("x", 2000)})
	res := b.callback(delivery{jobID: "j", deliveryID: "d", body: body})
	res.wantProblem(t, http.StatusRequestEntityTooLarge, "payload_too_large", "a 2 KiB callback")
	b.wantCount(t, 0, `SELECT count(*) FROM agent.webhook_drops`)
}

func TestCallbackSetToValueNeverLeavesATerminalStatus(t *testing.T) {
	t.Parallel()
	f := newCallbackFixture(t)
	job := f.job.ProviderJobID
	steps := []struct {
		deliveryID, status string
		result             any
		want               jobState
		applied            bool
	}{
		{"d-1", "running", map[string]any{"p": 1}, jobState{"running", `{"p": 1}`, 2}, true},
		// running over running: the value is set again, not merged.
		{"d-2", "running", nil, jobState{"running", "", 3}, true},
		{"d-3", "succeeded", map[string]any{"rows": 9}, jobState{"succeeded", `{"rows": 9}`, 4}, true},
		// Late and contradicting deliveries leave the terminal status.
		{"d-4", "running", map[string]any{"p": 2}, jobState{"succeeded", `{"rows": 9}`, 4}, false},
		{"d-5", "failed", map[string]any{"error": "x"}, jobState{"succeeded", `{"rows": 9}`, 4}, false},
		{"d-6", "succeeded", map[string]any{"rows": 10}, jobState{"succeeded", `{"rows": 9}`, 4}, false},
	}
	for _, s := range steps {
		d := delivery{jobID: pathOf(f.job), deliveryID: s.deliveryID, body: callbackBody(job, s.status, s.result)}
		if status, _ := f.callback(d).answer(t); status != "accepted" {
			t.Fatalf("%s (%s) was not accepted", s.deliveryID, s.status)
		}
		if got := f.jobState(f.job.ID); got != s.want {
			t.Errorf("after %s (%s): job = %+v, want %+v", s.deliveryID, s.status, got, s.want)
		}
		c := f.claims(acme)[s.deliveryID]
		wantResponse := `{"status": "` + s.want.status + `", "applied": ` + map[bool]string{true: "true", false: "false"}[s.applied] + `}`
		if c.status != "completed" || c.response != wantResponse {
			t.Errorf("claim of %s = %+v, want completed with %s", s.deliveryID, c, wantResponse)
		}
	}
	if drops := f.drops(); len(drops) != 0 {
		t.Errorf("late deliveries were recorded as drops %+v; they are accepted and left the job alone", drops)
	}
}

func TestCallbackConcurrentDeliveriesApplyOnce(t *testing.T) {
	t.Parallel()
	f := newCallbackFixture(t)
	const n = 50
	d := delivery{jobID: pathOf(f.job), deliveryID: "d-concurrent",
		body: callbackBody(f.job.ProviderJobID, "succeeded", map[string]any{"rows": 1})}
	r := f.callbackReq(d)
	answers := make([]*response, n)
	errs := make([]error, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Go(func() {
			start.Wait()
			answers[i], errs[i] = f.send(r)
		})
	}
	start.Done()
	done.Wait()
	kinds := map[string]int{}
	for i, res := range answers {
		if errs[i] != nil {
			t.Fatalf("delivery %d: %v", i, errs[i])
		}
		status, reason := res.answer(t)
		kinds[status+" "+reason]++
	}
	if kinds["accepted "] != 1 || kinds["dropped duplicate"] != n-1 || len(kinds) != 2 {
		t.Fatalf("answers = %v, want 1 accepted and %d dropped duplicate", kinds, n-1)
	}
	if got := f.jobState(f.job.ID); got != (jobState{"succeeded", `{"rows": 1}`, 2}) {
		t.Errorf("job = %+v, want succeeded and applied once (version 2)", got)
	}
	claims := f.claims(acme)
	if len(claims) != 1 || claims[d.deliveryID].status != "completed" {
		t.Errorf("claims = %+v, want one completed", claims)
	}
	// Copies are counted on the one arrival, not multiplied: one audit
	// row for the reason, 49 on the counter.
	f.wantCount(t, 1, `SELECT count(*) FROM agent.provider_inbox WHERE delivery_id = $1 AND status = 'applied'`, d.deliveryID)
	f.wantCount(t, 1, `SELECT count(*) FROM agent.webhook_drops WHERE reason = 'duplicate'`)
	f.wantCount(t, 49, `SELECT c.duplicates FROM agent.provider_inbox_copies c JOIN agent.provider_inbox i
		ON i.organization_id = c.organization_id AND i.id = c.inbox_id
		WHERE i.delivery_id = $1`, d.deliveryID)
	if got := f.obs.counts(); len(got) != 1 || got[acme+"/duplicate"] != 49 {
		t.Errorf("observer counted %v, want 49 acme/duplicate", got)
	}
}

func TestCallbackRedeliveryAfterACrashIsAppliedOnceByTheApplier(t *testing.T) {
	t.Parallel()
	f := newCallbackFixture(t)
	d := delivery{jobID: pathOf(f.job), deliveryID: "d-crash",
		body: callbackBody(f.job.ProviderJobID, "succeeded", map[string]any{"rows": 4})}
	// A handler claimed the delivery, then crashed before it completed;
	// the delivery itself is stored (answered queued: its apply met the
	// crashed handler's live claim).
	out, err := f.plane.Claim(context.Background(), f.org, providerjobs.Scope(acme), d.deliveryID,
		providerjobs.RequestHash(d.body), idempotency.WebhookLease)
	if err != nil || out.Kind != idempotency.KindClaimed {
		t.Fatalf("Claim = %v, %v; want claimed", out.Kind, err)
	}
	if status, _ := f.callback(d).answer(t); status != "queued" {
		t.Fatalf("the delivery was not queued")
	}

	// Inside its lease the crashed handler cannot be told from a slow one:
	// a redelivery is a copy of the stored arrival, acknowledged.
	f.clk.Advance(idempotency.WebhookLease - time.Second)
	before := f.jobState(f.job.ID)
	f.wantDropped(t, f.callback(d), d, "duplicate", before)

	// After the lease it is presumed dead, and the applier (of any
	// replica: here a second service on the same database) takes over.
	f.clk.Advance(2 * time.Second)
	applier := providerjobs.New(f.pool, f.plane, providerjobs.Config{})
	if rep, err := applier.ApplyPending(context.Background(), 10); err != nil || rep.Applied != 1 {
		t.Fatalf("ApplyPending after the lease = %+v, %v; want one applied", rep, err)
	}
	if got := f.jobState(f.job.ID); got != (jobState{"succeeded", `{"rows": 4}`, 2}) {
		t.Errorf("job = %+v, want succeeded, applied once (version 2)", got)
	}
	if c := f.claims(acme)[d.deliveryID]; c.status != "completed" {
		t.Errorf("claim = %+v, want completed", c)
	}
	// The crashed handler wakes up: its fence moved on, it can end nothing.
	if ok, err := f.plane.Complete(context.Background(), out.Claim, idempotency.Completion{Response: json.RawMessage(`{"stale":true}`)}); ok || err != nil {
		t.Errorf("the crashed handler's Complete = %v, %v; want false, nil", ok, err)
	}
	// And one more redelivery is a duplicate again, counted on the arrival.
	if status, reason := f.callback(d).answer(t); status != "dropped" || reason != "duplicate" {
		t.Errorf("the last redelivery = %s %s, want dropped duplicate", status, reason)
	}
	// The first copy; the next is counted on the arrival.
	f.wantCount(t, 1, `SELECT count(*) FROM agent.webhook_drops WHERE reason = 'duplicate'`)
	if got := f.jobState(f.job.ID); got.version != 2 {
		t.Errorf("job version = %d, want 2", got.version)
	}
}

func TestProviderJobsAnswer503WhenTheDatabaseIsDown(t *testing.T) {
	t.Parallel()
	b := setupDown(t)
	body := callbackBody("job-1", "running", nil)
	for _, r := range []req{
		b.callbackReq(delivery{jobID: uuid.NewString(), deliveryID: "d-1", body: body}), // resolving the job
		b.callbackReq(delivery{jobID: "job-1", deliveryID: "d-1", body: body}),          // recording unknown_job
		{method: http.MethodPost, path: "/v1/provider-jobs", body: map[string]any{"run_id": uuid.NewString(), "provider": acme, "provider_job_id": "j"}},
		{method: http.MethodGet, path: "/v1/provider-jobs/" + uuid.NewString()},
	} {
		res := b.do(r)
		if res.status != http.StatusServiceUnavailable || res.problem(t).Code != "unavailable" || res.header.Get("Retry-After") == "" {
			t.Errorf("%s %s with the database down = %d %s (Retry-After %q), want 503 unavailable with Retry-After",
				r.method, r.path, res.status, res.body, res.header.Get("Retry-After"))
		}
	}
	// A delivery refused before the database is needed is still refused.
	for _, d := range []delivery{
		{jobID: "job-1", deliveryID: "d-1", body: body, signature: "-"},
		{jobID: "job-1", deliveryID: "d-1", body: body, at: time.Now().Add(-time.Hour)},
	} {
		if res := b.callback(d); res.status != http.StatusUnauthorized {
			t.Errorf("an unsigned or stale callback with the database down = %d, want 401", res.status)
		}
	}
}

// registeredJob is a provider job as the API answers it.
type registeredJob struct {
	providerjobs.Job
	CallbackPath string `json:"callback_path"`
}

func TestRegisterProviderJob(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	run := b.seedRun(b.org)
	body := map[string]any{"run_id": run.String(), "provider": acme, "provider_job_id": "job/42 ü"}
	res := b.do(req{method: http.MethodPost, path: "/v1/provider-jobs", body: body})
	if res.status != http.StatusCreated {
		t.Fatalf("register = %d %s, want 201", res.status, res.body)
	}
	var job registeredJob
	res.decode(t, &job)
	if job.OrganizationID != b.org || job.RunID != run || job.Provider != acme || job.ProviderJobID != "job/42 ü" ||
		job.Status != providerjobs.StatusPending || string(job.Result) != "null" || job.Version != 1 {
		t.Errorf("registered job = %+v, want a pending acme job of the Run", job)
	}
	if want := "/v1/callbacks/acme/jobs/" + job.ID.String(); job.CallbackPath != want {
		t.Errorf("callback_path = %q, want %q: searchd's id, not the provider's", job.CallbackPath, want)
	}
	if loc, want := res.header.Get("Location"), "/v1/provider-jobs/"+job.ID.String(); loc != want {
		t.Errorf("Location = %q, want %q", loc, want)
	}
	got := b.do(req{method: http.MethodGet, path: "/v1/provider-jobs/" + job.ID.String()})
	if got.status != http.StatusOK || string(got.body) != string(res.body) {
		t.Errorf("GET = %d %s, want 200 and the registered job %s", got.status, got.body, res.body)
	}

	// A retry of the registration (its answer was lost) finds the same
	// job: 200, the same body, the same Location, nothing new.
	again := b.do(req{method: http.MethodPost, path: "/v1/provider-jobs", body: body})
	if again.status != http.StatusOK || string(again.body) != string(res.body) ||
		again.header.Get("Location") != res.header.Get("Location") {
		t.Errorf("register again for the same Run = %d %s (Location %q), want 200 with %s",
			again.status, again.body, again.header.Get("Location"), res.body)
	}

	// Its callbacks come on its callback_path; the body names the
	// provider's id, slash and all.
	d := delivery{jobID: pathOf(&job.Job), deliveryID: "d-1", body: callbackBody(job.ProviderJobID, "running", nil)}
	if p := b.callbackReq(d).path; p != job.CallbackPath {
		t.Fatalf("the callback is sent on %s, want the callback_path %s", p, job.CallbackPath)
	}
	if status, reason := b.callback(d).answer(t); status != "accepted" {
		t.Errorf("callback for the registered job = %s %s, want accepted", status, reason)
	}
	// A retry after a callback answers the job as it is now.
	again = b.do(req{method: http.MethodPost, path: "/v1/provider-jobs", body: body})
	var now registeredJob
	again.decode(t, &now)
	if again.status != http.StatusOK || now.ID != job.ID || now.Status != providerjobs.StatusRunning || now.Version != 2 {
		t.Errorf("register again after a callback = %d %s, want 200 with the job, running", again.status, again.body)
	}

	// For another Run of the organization it is a conflict, which names
	// no other organization.
	res = b.do(req{method: http.MethodPost, path: "/v1/provider-jobs",
		body: map[string]any{"run_id": b.seedRun(b.org).String(), "provider": acme, "provider_job_id": "job/42 ü"}})
	res.wantProblem(t, http.StatusConflict, "already_registered", "register again for another Run")
	if strings.Contains(string(res.body), "another organization") {
		t.Errorf("the 409 = %s, want it to speak of the caller's organization alone", res.body)
	}
	// Another organization registers the same provider job id: its own
	// job, 201, as for an id nobody holds, naming nothing of ours.
	other := uuid.New()
	res = b.do(req{method: http.MethodPost, path: "/v1/provider-jobs", header: bearer(b.tokenFor(other, "other")),
		body: map[string]any{"run_id": b.seedRun(other).String(), "provider": acme, "provider_job_id": "job/42 ü"}})
	var theirs registeredJob
	res.decode(t, &theirs)
	if res.status != http.StatusCreated || theirs.OrganizationID != other || theirs.ID == job.ID ||
		strings.Contains(string(res.body), b.org.String()) || strings.Contains(string(res.body), job.ID.String()) {
		t.Errorf("another organization's registration = %d %s, want 201 with its own job, naming nothing of ours", res.status, res.body)
	}
	// The same provider job id at another provider is another job.
	res = b.do(req{method: http.MethodPost, path: "/v1/provider-jobs",
		body: map[string]any{"run_id": run.String(), "provider": otherProvider, "provider_job_id": "job/42 ü"}})
	if res.status != http.StatusCreated {
		t.Errorf("the same job id at another provider = %d %s, want 201", res.status, res.body)
	}
	b.wantCount(t, 3, `SELECT count(*) FROM agent.provider_jobs`)
}

// TestAProviderJobIDIsTheOrganizations is issue 36.6 end to end, with
// issue 24.3 kept fixed. Organizations A and B both register provider job
// id "acme-job-1001" (before, B's registration answered 409 "... or by
// another organization": A squatted the id, and the answer told B it was
// held); each gets its own job and callback path. Their providers then
// call back at once, signed, with the same delivery ids, each on its own
// job's path: every delivery is applied once, to its path's job, so A's job
// carries A's results alone and B's B's. Deliveries cross-posted (A's path
// with a body naming B's own job, and the reverse) drop as job_mismatch,
// recorded under the path's job, and change neither job; the genuine
// copies are applied after them.
func TestAProviderJobIDIsTheOrganizations(t *testing.T) {
	t.Parallel()
	w := newWorld(t, setupOpts{})
	const shared = "acme-job-1001"
	register := func(as func(req) *response, run uuid.UUID, providerJobID string) registeredJob {
		t.Helper()
		res := as(req{method: http.MethodPost, path: "/v1/provider-jobs",
			body: fmt.Sprintf(`{"run_id":%q,"provider":"acme","provider_job_id":%q}`, run, providerJobID)})
		var job registeredJob
		res.decode(t, &job)
		if res.status != http.StatusCreated {
			t.Fatalf("registration of %q = %d %s, want 201", providerJobID, res.status, res.body)
		}
		return job
	}
	bRun := w.seedRun(w.otherOrg)
	aShared := register(w.do, w.runID, shared)
	bShared := register(w.asOther, bRun, shared)
	aOwn := register(w.do, w.runID, "acme-job-a")
	bOwn := register(w.asOther, bRun, "acme-job-b")
	if aShared.OrganizationID != w.org || bShared.OrganizationID != w.otherOrg || aShared.ID == bShared.ID ||
		aShared.CallbackPath == bShared.CallbackPath {
		t.Fatalf("A's job %+v and B's %+v, want one job and callback path each", aShared, bShared)
	}
	get := func(as func(req) *response, id uuid.UUID) (registeredJob, string) {
		t.Helper()
		res := as(req{method: http.MethodGet, path: "/v1/provider-jobs/" + id.String()})
		var job registeredJob
		res.decode(t, &job)
		return job, string(res.body)
	}

	// Cross-posted deliveries first: each drops as job_mismatch.
	crossed := []struct {
		name   string
		path   registeredJob
		body   string // the provider job id the body names
		result string
	}{
		{"B's body on A's path", aShared, bOwn.ProviderJobID, "organization B's data"},
		{"A's body on B's path", bShared, aOwn.ProviderJobID, "organization A's data"},
	}
	for _, c := range crossed {
		d := delivery{jobID: pathOf(&c.path.Job), deliveryID: "d-cross-" + c.path.ID.String(),
			body: callbackBody(c.body, "succeeded", map[string]any{"private": c.result})}
		if status, reason := w.callback(d).answer(t); status != "dropped" || reason != "job_mismatch" {
			t.Errorf("%s = %s %s, want dropped job_mismatch", c.name, status, reason)
		}
	}
	for _, j := range []struct {
		as  func(req) *response
		job registeredJob
	}{{w.do, aShared}, {w.asOther, bShared}, {w.do, aOwn}, {w.asOther, bOwn}} {
		if now, body := get(j.as, j.job.ID); now.Status != providerjobs.StatusPending || now.Version != 1 || strings.Contains(body, "data") {
			t.Errorf("job %s after the cross-posts = %s, want it pending and untouched", j.job.ProviderJobID, body)
		}
	}
	// Each drop is the path's organization's, on the path's job.
	var drops struct{ Items []providerjobs.Drop }
	res := w.do(req{method: http.MethodGet, path: "/v1/provider-jobs/" + aShared.ID.String() + "/drops"})
	res.decode(t, &drops)
	if res.status != http.StatusOK || len(drops.Items) != 1 || drops.Items[0].Reason != providerjobs.DropJobMismatch {
		t.Errorf("A's drops = %d %s, want the job_mismatch posted on A's path", res.status, res.body)
	}

	// Both providers at once, signed, on their own paths, with the same
	// delivery ids.
	const n = 8
	type sent struct {
		as    func(req) *response
		job   registeredJob
		label string
	}
	senders := []sent{{w.do, aShared, "A"}, {w.asOther, bShared, "B"}}
	var wg sync.WaitGroup
	answers := make(chan string, 2*n)
	for i := range n {
		for _, s := range senders {
			wg.Go(func() {
				d := delivery{jobID: pathOf(&s.job.Job), deliveryID: "d-" + strconv.Itoa(i),
					body: callbackBody(shared, "running", map[string]any{"org": s.label, "n": i})}
				if status, reason := w.callback(d).answer(t); status != "accepted" {
					answers <- fmt.Sprintf("%s's delivery %s = %s %s, want accepted", s.label, d.deliveryID, status, reason)
				}
			})
		}
	}
	wg.Wait()
	close(answers)
	for a := range answers {
		t.Error(a)
	}
	for _, s := range senders {
		now, body := get(s.as, s.job.ID)
		var result struct{ Org string }
		if err := json.Unmarshal(now.Result, &result); err != nil || result.Org != s.label || now.Version < 2 ||
			now.Status != providerjobs.StatusRunning {
			t.Errorf("%s's job = %s, want running with one of %s's results", s.label, body, s.label)
		}
		w.wantCount(t, n, `SELECT count(*) FROM agent.provider_inbox
			WHERE organization_id = $1 AND job_id = $2 AND status = 'applied' AND body_result->>'org' = $3`,
			s.job.OrganizationID, s.job.ID, s.label)
	}
	// Every arrival is on a job of its own organization.
	w.wantCount(t, 0, `SELECT count(*) FROM agent.provider_inbox i
		WHERE NOT EXISTS (SELECT 1 FROM agent.provider_jobs j WHERE j.organization_id = i.organization_id AND j.id = i.job_id)`)
}

func TestProviderJobsAreTenantScoped(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	other := uuid.New()
	otherToken := b.tokenFor(other, "intruder")
	job := b.seedJob("tenant-job")

	// Another organization's Run cannot carry our job, nor ours theirs.
	res := b.do(req{method: http.MethodPost, path: "/v1/provider-jobs",
		body: map[string]any{"run_id": b.seedRun(other).String(), "provider": acme, "provider_job_id": "stolen"}})
	res.wantProblem(t, http.StatusNotFound, "not_found", "register on another organization's Run")
	res = b.do(req{method: http.MethodPost, path: "/v1/provider-jobs",
		body: map[string]any{"run_id": uuid.NewString(), "provider": acme, "provider_job_id": "nowhere"}})
	if res.status != http.StatusNotFound {
		t.Errorf("register on an unknown Run = %d %s, want 404", res.status, res.body)
	}
	// Another organization cannot read our job.
	res = b.do(req{method: http.MethodGet, path: "/v1/provider-jobs/" + job.ID.String(), header: bearer(otherToken)})
	res.wantProblem(t, http.StatusNotFound, "not_found", "another organization's GET")
	for _, path := range []string{"/v1/provider-jobs/" + uuid.NewString(), "/v1/provider-jobs/not-a-uuid"} {
		if res := b.do(req{method: http.MethodGet, path: path}); res.status != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, res.status)
		}
	}
	if res := b.do(req{method: http.MethodGet, path: "/v1/provider-jobs/" + job.ID.String(), noAuth: true}); res.status != http.StatusUnauthorized {
		t.Errorf("GET without a token = %d, want 401", res.status)
	}
	// Only the seeded job.
	b.wantCount(t, 1, `SELECT count(*) FROM agent.provider_jobs`)
}

func TestRegisterProviderJobRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	run := b.seedRun(b.org).String()
	for _, tt := range []struct {
		name  string
		body  any
		field string
	}{
		{"run id not a UUID", map[string]any{"run_id": "run-1", "provider": acme, "provider_job_id": "j"}, "run_id"},
		{"nil run id", map[string]any{"run_id": uuid.Nil.String(), "provider": acme, "provider_job_id": "j"}, "run_id"},
		{"no run id", map[string]any{"provider": acme, "provider_job_id": "j"}, "run_id"},
		{"provider without a secret", map[string]any{"run_id": run, "provider": "nobody", "provider_job_id": "j"}, "provider"},
		{"provider in capitals", map[string]any{"run_id": run, "provider": "ACME", "provider_job_id": "j"}, "provider"},
		{"empty provider", map[string]any{"run_id": run, "provider": "", "provider_job_id": "j"}, "provider"},
		{"empty job id", map[string]any{"run_id": run, "provider": acme, "provider_job_id": ""}, "provider_job_id"},
		{"job id too long", map[string]any{"run_id": run, "provider": acme, "provider_job_id": strings.Repeat("j", 256)}, "provider_job_id"},
		{"control character in the job id", map[string]any{"run_id": run, "provider": acme, "provider_job_id": "a\tb"}, "provider_job_id"},
		{"unknown field", map[string]any{"run_id": run, "provider": acme, "provider_job_id": "j", "status": "running"}, "status"},
	} {
		res := b.do(req{method: http.MethodPost, path: "/v1/provider-jobs", body: tt.body})
		if res.status != http.StatusBadRequest {
			t.Errorf("%s: register = %d %s, want 400", tt.name, res.status, res.body)
			continue
		}
		p := res.problem(t)
		if p.Code != "validation_failed" || len(p.Errors) == 0 || p.Errors[0].Field != tt.field {
			t.Errorf("%s: problem %+v, want validation_failed naming %s", tt.name, p, tt.field)
		}
	}
	b.wantCount(t, 0, `SELECT count(*) FROM agent.provider_jobs`)
}

// TestOpenAPIValidatesProviderJobResponses drives every documented answer
// of the provider-job operations through do(), which validates it, and
// proves the callback answer's schema is not vacuous.
func TestOpenAPIValidatesProviderJobResponses(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	job := b.seedJob("openapi-job")
	d := delivery{jobID: pathOf(job), deliveryID: "d-1", body: callbackBody(job.ProviderJobID, "running", map[string]any{"a": 1})}
	for _, r := range []req{
		b.callbackReq(d), // accepted
		b.callbackReq(d), // dropped duplicate
		b.callbackReq(delivery{jobID: pathOf(job), signature: "-", body: d.body}),                                    // 401
		b.callbackReq(delivery{jobID: pathOf(job), deliveryID: "d-2", body: d.body, at: time.Now().Add(-time.Hour)}), // 401 stale
		b.callbackReq(delivery{jobID: pathOf(job), body: d.body}),                                                    // 400 missing_delivery_id
		b.callbackReq(delivery{jobID: pathOf(job), deliveryID: "x", body: []byte(`{`)}),                              // 400 malformed_json
		b.callbackReq(delivery{jobID: "not-a-uuid", deliveryID: "d-3", body: d.body}),                                // dropped unknown_job
		{method: http.MethodGet, path: "/v1/provider-jobs/" + job.ID.String()},
		{method: http.MethodPost, path: "/v1/provider-jobs", body: map[string]any{"run_id": job.RunID.String(), "provider": acme, "provider_job_id": "openapi-job"}},        // 200
		{method: http.MethodPost, path: "/v1/provider-jobs", body: map[string]any{"run_id": b.seedRun(b.org).String(), "provider": acme, "provider_job_id": "openapi-job"}}, // 409
		{method: http.MethodPost, path: "/v1/provider-jobs", body: map[string]any{"run_id": job.RunID.String(), "provider": acme, "provider_job_id": "openapi-2"}},          // 201
		{method: http.MethodPost, path: "/v1/provider-jobs", body: map[string]any{"run_id": uuid.NewString(), "provider": acme, "provider_job_id": "openapi-3"}},            // 404
		{method: http.MethodPost, path: "/v1/provider-jobs", body: `{`},
	} {
		b.do(r)
	}

	// A job answer must carry its callback_path.
	res := b.do(req{method: http.MethodGet, path: "/v1/provider-jobs/" + job.ID.String()})
	var members map[string]any
	res.decode(t, &members)
	delete(members, "callback_path")
	hr, _ := http.NewRequest(http.MethodGet, b.server.URL+"/v1/provider-jobs/"+job.ID.String(), nil)
	if err := validateAgainstOpenAPI(hr, &response{status: http.StatusOK, header: res.header, body: mustJSON(t, members)}); err == nil {
		t.Errorf("a job without callback_path passed validation")
	}

	hr, _ = http.NewRequest(http.MethodPost, b.server.URL+"/v1/callbacks/acme/jobs/"+pathOf(job), nil)
	for _, body := range []string{`{"status": "dropped"}`, `{"status": "accepted", "reason": "duplicate"}`,
		`{"status": "dropped", "reason": "lost"}`, `{"status": "ok"}`} {
		broken := &response{status: http.StatusOK, header: http.Header{"Content-Type": {"application/json"}}, body: []byte(body)}
		if err := validateAgainstOpenAPI(hr, broken); err == nil {
			t.Errorf("callback answer %s passed validation", body)
		}
	}
}
