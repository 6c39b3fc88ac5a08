package idempotency_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// examplePool returns a pool on a migrated database of the examples' own.
// Any *pgxpool.Pool on a searchd database will do.
func examplePool() *pgxpool.Pool {
	pool, err := pgtest.OpenDB()
	if err != nil {
		log.Fatal(err)
	}
	return pool
}

// A worker claims the key of an effect, makes the effect, and completes the
// claim with its answer. A repeat of the same request then gets that answer
// back instead of making the effect again.
func ExampleService_Claim() {
	ctx := context.Background()
	svc := idempotency.NewService(examplePool(), idempotency.Config{})
	org := uuid.New()

	out, err := svc.Claim(ctx, org, "tool.email.send", "send-welcome-1", "sha256:req", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first:", out.Kind)
	// We own the key: send the email, then record what it made.
	ok, err := svc.Complete(ctx, out.Claim, idempotency.Completion{
		ResourceType: "email", ResourceID: "m-42", Response: json.RawMessage(`{"sent":true}`),
	})
	if err != nil || !ok {
		log.Fatal(ok, err)
	}

	again, err := svc.Claim(ctx, org, "tool.email.send", "send-welcome-1", "sha256:req", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("repeat:", again.Kind, again.ResourceType, again.ResourceID)
	// Output:
	// first: claimed
	// repeat: completed email m-42
}

// While the first worker holds a live lease, a second claim of the key
// answers processing: the effect may be in flight, so the caller must not
// run it and must not answer with a value. RetryAfter says when the lease
// ends.
func ExampleService_Claim_processing() {
	ctx := context.Background()
	svc := idempotency.NewService(examplePool(), idempotency.Config{})
	org := uuid.New()

	first, err := svc.Claim(ctx, org, "webhook.nylas", "delivery-7", "sha256:body", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	second, err := svc.Claim(ctx, org, "webhook.nylas", "delivery-7", "sha256:body", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.Kind, second.Kind, second.RetryAfter > 0 && second.RetryAfter <= 30*time.Second)
	// Output: claimed processing true
}

// Read looks into the journal without claiming: before the policy
// checkpoint of a tool call, a key nobody claimed answers absent, and
// nothing is written.
func ExampleService_Read() {
	ctx := context.Background()
	svc := idempotency.NewService(examplePool(), idempotency.Config{})

	out, err := svc.Read(ctx, uuid.New(), "tool.email.send", "send-welcome-1", "sha256:req")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Kind)
	// Output: absent
}
