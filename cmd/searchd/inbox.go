package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/providerjobs"
)

const inboxUsage = `usage: searchd inbox <show|list> [flags]

Inspect the provider inbox (agent.provider_inbox): every provider callback
with a valid signature is stored there before it is acknowledged, then
applied once (or dropped with a reason) by the handler or the applier.

  show     print one arrival: its identity, job, state, attempts, copies
  list     print arrivals, newest first

Neither prints a secret or the delivery's result: only its size.
Run searchd inbox show --help or searchd inbox list --help for flags.
`

var (
	inboxShowCommand = command{"searchd inbox show --provider P --delivery-id ID [--json]",
		"Print the arrival of a delivery in the provider inbox, with the copies counted on it (one per organization whose job a delivery with the id named; nearly always one; --json prints one object per arrival).",
		cmdInbox}
	inboxListCommand = command{"searchd inbox list [--provider P] [--status pending|applied|dropped] [--limit N] [--json]",
		"Print arrivals of the provider inbox, newest first; --status pending lists what the applier has still to apply.",
		cmdInbox}
)

// inbox runs `searchd inbox show|list`.
func (a *app) inbox(ctx context.Context, args []string) error {
	return a.dispatchSubcommand(ctx, "inbox", inboxUsage, args,
		subcommand{"show", a.inboxShow}, subcommand{"list", a.inboxList})
}

// arrivalJSON is the --json form of an arrival: no body, no result (it
// may hold customer data), only the result's size.
type arrivalJSON struct {
	ID             uuid.UUID   `json:"id"`
	Provider       string      `json:"provider"`
	DeliveryID     string      `json:"delivery_id"`
	PathJobID      string      `json:"path_job_id"`
	JobID          *uuid.UUID  `json:"job_id"`
	OrganizationID *uuid.UUID  `json:"organization_id"`
	RequestHash    string      `json:"request_hash"`
	BodyJobID      string      `json:"body_job_id"`
	BodyStatus     string      `json:"body_status"`
	ResultBytes    int         `json:"result_bytes"`
	ReceivedAt     time.Time   `json:"received_at"`
	Status         string      `json:"status"`
	Reason         string      `json:"reason,omitempty"`
	AppliedBy      string      `json:"applied_by,omitempty"`
	FinishedAt     *time.Time  `json:"finished_at"`
	LeaseExpiresAt time.Time   `json:"lease_expires_at"`
	Attempts       int         `json:"attempts"`
	LastError      string      `json:"last_error,omitempty"`
	Copies         *copiesJSON `json:"copies,omitempty"`
}

type copiesJSON struct {
	Duplicates     int64      `json:"duplicates"`
	HashMismatches int64      `json:"hash_mismatches"`
	PathMismatches int64      `json:"path_mismatches"`
	LastAt         *time.Time `json:"last_at"`
}

func arrivalView(e *providerjobs.InboxEntry, c *providerjobs.Copies) arrivalJSON {
	v := arrivalJSON{
		ID: e.ID, Provider: e.Provider, DeliveryID: e.DeliveryID, PathJobID: e.PathJobID,
		RequestHash: e.RequestHash, BodyJobID: e.Update.ProviderJobID, BodyStatus: string(e.Update.Status),
		ResultBytes: len(e.Update.Result), ReceivedAt: e.ReceivedAt.UTC(), Status: string(e.Status),
		Reason: string(e.Reason), AppliedBy: e.AppliedBy, LeaseExpiresAt: e.LeaseExpiresAt.UTC(),
		Attempts: e.Attempts, LastError: e.LastError,
	}
	if e.JobID != uuid.Nil {
		v.JobID, v.OrganizationID = &e.JobID, &e.OrganizationID
	}
	if e.FinishedAt != nil {
		t := e.FinishedAt.UTC()
		v.FinishedAt = &t
	}
	if c != nil {
		v.Copies = &copiesJSON{c.Duplicates, c.HashMismatches, c.PathMismatches, c.LastAt}
	}
	return v
}

// withInbox runs run on the service that reads the inbox, on a
// one-connection pool (see [app.withDB]).
func (a *app) withInbox(ctx context.Context, fs *flag.FlagSet, problems []string, run func(*providerjobs.Service) error) error {
	return a.withDB(ctx, fs, cmdInbox, problems, func(pool *pgxpool.Pool, _ *slog.Logger) error {
		return run(providerjobs.New(pool, idempotency.NewService(pool, idempotency.Config{Clock: a.dbClock}), providerjobs.Config{}))
	})
}

func (a *app) inboxShow(ctx context.Context, args []string) error {
	fs := a.flagSet("inbox show", inboxShowCommand)
	provider := fs.String("provider", "", "the provider, as its callback path names it (required)")
	deliveryID := fs.String("delivery-id", "", "the delivery id, the webhook-id header (required)")
	asJSON := fs.Bool("json", false, "print the arrival as one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	var problems []string
	if err := providerjobs.ValidateProvider(*provider); err != nil {
		problems = append(problems, "--provider: is required: a lower-case dotted identifier such as acme")
	}
	if err := idempotency.ValidateKey(*deliveryID); err != nil {
		problems = append(problems, "--delivery-id: is required: 1 to 255 bytes of UTF-8 without control characters")
	}
	return a.withInbox(ctx, fs, problems, func(svc *providerjobs.Service) error {
		found, err := svc.FindArrivals(ctx, *provider, *deliveryID)
		if err != nil {
			return err
		}
		if len(found) == 0 {
			return fmt.Errorf("no arrival is stored for provider %s, delivery id %q", *provider, *deliveryID)
		}
		// A delivery id is unique per organization (of the job its body
		// names): nearly always one arrival, each printed on its own.
		for i := range found {
			e := &found[i]
			c, err := svc.ArrivalCopies(ctx, e.OrganizationID, e.ID)
			if err != nil {
				return err
			}
			if *asJSON {
				if err := a.printJSON(arrivalView(e, &c)); err != nil {
					return err
				}
				continue
			}
			if i > 0 {
				fmt.Fprintln(a.stdout)
			}
			printArrival(a.stdout, e, c)
		}
		return nil
	})
}

func printArrival(w io.Writer, e *providerjobs.InboxEntry, c providerjobs.Copies) {
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	job := "none: the path names no job of the provider"
	if e.JobID != uuid.Nil {
		job = e.JobID.String() + " of organization " + e.OrganizationID.String()
	}
	state := string(e.Status)
	switch e.Status {
	case providerjobs.InboxPending:
		state += fmt.Sprintf(", %d attempts; next by %s", e.Attempts, ts(e.LeaseExpiresAt))
	case providerjobs.InboxDropped:
		state += " (" + string(e.Reason) + ") by the " + e.AppliedBy + " at " + ts(*e.FinishedAt)
	default:
		state += " by the " + e.AppliedBy + " at " + ts(*e.FinishedAt)
	}
	lines := [][2]string{
		{"arrival", e.ID.String()},
		{"provider", e.Provider},
		{"delivery id", fmt.Sprintf("%q", e.DeliveryID)},
		{"path job id", fmt.Sprintf("%q", e.PathJobID)},
		{"job", job},
		{"body", fmt.Sprintf("job_id %q, status %s, result %d bytes", e.Update.ProviderJobID, e.Update.Status, len(e.Update.Result))},
		{"request hash", e.RequestHash},
		{"received at", ts(e.ReceivedAt)},
		{"state", state},
	}
	if e.LastError != "" {
		lines = append(lines, [2]string{"last error", e.LastError})
	}
	lines = append(lines, [2]string{"copies", fmt.Sprintf("%d duplicates, %d hash mismatches, %d path mismatches",
		c.Duplicates, c.HashMismatches, c.PathMismatches)})
	for _, l := range lines {
		fmt.Fprintf(w, "%-13s %s\n", l[0], l[1])
	}
}

func (a *app) inboxList(ctx context.Context, args []string) error {
	fs := a.flagSet("inbox list", inboxListCommand)
	provider := fs.String("provider", "", "only this provider's arrivals")
	status := fs.String("status", "", "only arrivals in this state: pending, applied or dropped")
	limit := fs.Int("limit", 50, "most arrivals printed, 1 to 1000")
	asJSON := fs.Bool("json", false, "print the arrivals as a JSON array")
	if err := parse(fs, args); err != nil {
		return err
	}
	var problems []string
	if *provider != "" && providerjobs.ValidateProvider(*provider) != nil {
		problems = append(problems, "--provider: must be a lower-case dotted identifier such as acme")
	}
	switch providerjobs.InboxStatus(*status) {
	case "", providerjobs.InboxPending, providerjobs.InboxApplied, providerjobs.InboxDropped:
	default:
		problems = append(problems, fmt.Sprintf("--status: %q is not a state: use pending, applied or dropped", *status))
	}
	checkLimit(&problems, *limit, 1000)
	return a.withInbox(ctx, fs, problems, func(svc *providerjobs.Service) error {
		list, err := svc.ListArrivals(ctx, providerjobs.ListArrivalsParams{
			Provider: *provider, Status: providerjobs.InboxStatus(*status), Limit: *limit})
		if err != nil {
			return err
		}
		return printList(a, *asJSON, list, func(e *providerjobs.InboxEntry) arrivalJSON { return arrivalView(e, nil) }, printArrivals)
	})
}

// printArrivals writes arrivals for a person, a row each.
func printArrivals(w io.Writer, list []providerjobs.InboxEntry) {
	fmt.Fprintln(w, "received at\tprovider\tdelivery id\tstatus\tattempts\tjob")
	for _, e := range list {
		state := string(e.Status)
		if e.Reason != "" {
			state += " (" + string(e.Reason) + ")"
		}
		job := "-"
		if e.JobID != uuid.Nil {
			job = e.JobID.String()
		}
		fmt.Fprintf(w, "%s\t%s\t%q\t%s\t%d\t%s\n", e.ReceivedAt.UTC().Format(time.RFC3339), e.Provider, e.DeliveryID, state, e.Attempts, job)
	}
}
