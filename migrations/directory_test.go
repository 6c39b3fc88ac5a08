package migrations_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/migrations"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
)

// directoryByJob is the migration that keys the provider job directory by
// searchd's job id (issue 36.6).
const directoryByJob = 23

// TestDirectoryByJobMigratesAPopulatedDirectory applies migration 00023 to
// a directory as 00015 left it: A's job holds the pair "shared", B's job
// of the same pair (registered before 00015) has no entry, A has a job of
// its own, and one entry names a job gone with its Run. Every job then has
// exactly one entry, under its own organization, the stale entry stays for
// the sweeper, the key is the job's id, and B's job, unreachable by its
// callbacks before, gets them. The Down fails while two organizations hold
// one pair, and restores the old key once they do not.
func TestDirectoryByJobMigratesAPopulatedDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDBURL(t)
	sqlDB, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sqlDB.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, directoryByJob-1); err != nil {
		t.Fatalf("down to before %d: %v", directoryByJob, err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	orgA, orgB := uuid.New(), uuid.New()
	seedRun := func(org uuid.UUID) uuid.UUID {
		t.Helper()
		// SQL of the schema as it is before the migration, not the
		// runs package's, which reads the columns of the newest.
		id := uuid.New()
		exec(`INSERT INTO agent.runs (id, organization_id, kind, start_key, request_hash, name, created_at, retain_until)
			VALUES ($1, $2, 'capability', $3, 'seed', 'capability', now(), now() + interval '396 days')`,
			id, org, runs.DirectStartKey(uuid.NewString()))
		return id
	}
	created := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	job := func(org uuid.UUID, providerJobID string, entry bool) uuid.UUID {
		t.Helper()
		id := uuid.New()
		exec(`INSERT INTO agent.provider_jobs (id, organization_id, run_id, provider, provider_job_id, created_at, updated_at)
			VALUES ($1, $2, $3, 'acme', $4, $5, $5)`, id, org, seedRun(org), providerJobID, created)
		if entry {
			exec(`INSERT INTO agent.provider_job_directory (provider, provider_job_id, organization_id, job_id, registered_at, retain_until)
				VALUES ('acme', $1, $2, $3, $4, $4::timestamptz + interval '396 days')`, providerJobID, org, id, created)
		}
		return id
	}
	sharedA := job(orgA, "shared", true)
	sharedB := job(orgB, "shared", false) // shadowed by A's since 00015
	ownA := job(orgA, "a-own", true)
	gone := uuid.New()
	exec(`INSERT INTO agent.provider_job_directory (provider, provider_job_id, organization_id, job_id, registered_at, retain_until)
		VALUES ('acme', 'gone', $1, $2, now() - interval '400 days', now() - interval '4 days')`, orgB, gone)

	if _, err := p.UpTo(ctx, directoryByJob); err != nil {
		t.Fatalf("migration %d on a populated directory: %v", directoryByJob, err)
	}
	for _, tt := range []struct {
		org, job uuid.UUID
		pjid     string
	}{{orgA, sharedA, "shared"}, {orgB, sharedB, "shared"}, {orgA, ownA, "a-own"}, {orgB, gone, "gone"}} {
		if n := pgtest.Count(t, pool, `SELECT count(*) FROM agent.provider_job_directory
			WHERE job_id = $1 AND organization_id = $2 AND provider = 'acme' AND provider_job_id = $3`, tt.job, tt.org, tt.pjid); n != 1 {
			t.Errorf("entries of %s's job %q = %d, want 1", tt.org, tt.pjid, n)
		}
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM agent.provider_job_directory`); n != 4 {
		t.Errorf("%d entries, want 4: one per job, and the stale one", n)
	}
	var registered time.Time
	if err := pool.QueryRow(ctx, `SELECT registered_at FROM agent.provider_job_directory WHERE job_id = $1`, sharedB).
		Scan(&registered); err != nil || !registered.Equal(created) {
		t.Errorf("B's entry registered at %v, %v; want its job's creation %v", registered, err, created)
	}
	var key string
	if err := pool.QueryRow(ctx, `SELECT pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conrelid = 'agent.provider_job_directory'::regclass AND contype = 'p'`).Scan(&key); err != nil || key != "PRIMARY KEY (job_id)" {
		t.Errorf("the directory's key = %q, %v; want PRIMARY KEY (job_id)", key, err)
	}

	// B's callbacks reach B's job now, and A's job is not touched.
	plane := idempotency.NewService(pool, idempotency.Config{})
	svc := providerjobs.New(pool, plane, providerjobs.Config{})
	body := []byte(`{"job_id":"shared","status":"succeeded"}`)
	out, err := svc.Receive(ctx, providerjobs.Delivery{Provider: "acme", JobID: sharedB.String(), DeliveryID: "d-b", Body: body,
		Update: providerjobs.Update{ProviderJobID: "shared", Status: providerjobs.StatusSucceeded}})
	if err != nil || !out.Accepted || out.JobID != sharedB {
		t.Errorf("B's callback after the migration = %+v, %v; want accepted for B's job", out, err)
	}
	if a, err := svc.Get(ctx, orgA, sharedA); err != nil || a.Status != providerjobs.StatusPending {
		t.Errorf("A's job = %+v, %v; want it pending", a, err)
	}

	if _, err := p.DownTo(ctx, directoryByJob-1); err == nil {
		t.Fatal("the Down with one pair in two organizations succeeded; want it refused by the old key")
	}
	exec(`DELETE FROM agent.provider_job_directory WHERE job_id = $1`, sharedB)
	if _, err := p.DownTo(ctx, directoryByJob-1); err != nil {
		t.Fatalf("the Down with each pair once: %v", err)
	}
	if err := pool.QueryRow(ctx, `SELECT pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conrelid = 'agent.provider_job_directory'::regclass AND contype = 'p'`).Scan(&key); err != nil ||
		key != "PRIMARY KEY (provider, provider_job_id)" {
		t.Errorf("the directory's key after the Down = %q, %v; want PRIMARY KEY (provider, provider_job_id)", key, err)
	}
}
