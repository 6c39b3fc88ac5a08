package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/operator"
	"github.com/searchd/searchd/tools"
)

const claimsUsage = `usage: searchd claims <show|release|resolve> [flags]

Inspect, or force-release, one claim of an Idempotency-Key
(agent.idempotency_keys), for an operator facing a stuck key; or resolve a
tool call the journal recorded as uncertain.

  show     print the claim: status, request hash, lease, retention, resource
  release  delete a PROCESSING claim, logging --reason; a completed claim is
           the journal of its answer and is refused
  resolve  resolve an UNCERTAIN tool call (sent, no acknowledgement, vendor
           without idempotency): --as delivered, or --as retry to authorize
           one retry with the same key; recorded with --actor and --reason

Run searchd claims <subcommand> --help for flags.
`

var (
	claimsShowCommand = command{"searchd claims show --org UUID --scope SCOPE --key KEY [--json]",
		"Print one claim. The lease token, the fence, is never printed, nor the stored response: only its size.",
		cmdClaimsShow}
	claimsReleaseCommand = command{"searchd claims release --org UUID --scope SCOPE --key KEY --reason TEXT",
		"Delete one PROCESSING claim, fenced by the lease token it reads first: a claim that changes in between " +
			"(completed, released, or taken over by a worker) is left alone. The next attempt with the key then runs " +
			"afresh. A holder still alive keeps running, but its fence stops it from recording an answer; release a " +
			"live lease only for a holder you know is gone. Completed claims are refused: each is the stored answer " +
			"every repeat of its key replays. The release is logged with --reason and recorded, with --actor, in " +
			"agent.claim_releases (the console's audit of releases).",
		cmdClaimsChange}
	claimsResolveCommand = command{"searchd claims resolve --org UUID --scope tool.NAME --key KEY --as delivered|retry --actor WHO --reason TEXT",
		"Resolve a tool call the journal recorded as uncertain: it was sent to a vendor without idempotency support and " +
			"no acknowledgement came, so nothing retries it by itself. --as delivered: the call had its effect; its answer " +
			"becomes a success naming --actor, which every repeat replays. --as retry: it had none; its uncertain answer " +
			"leaves the journal, and the next attempt of the call makes it once more with the same key. The resolution, " +
			"--actor, --reason and the uncertain answer are recorded in agent.tool_call_resolutions (396 days) and logged. " +
			"A call that is not uncertain (in flight, answered, or resolved already) is refused and nothing is written.",
		cmdClaimsChange}
)

// claims runs `searchd claims show|release`.
func (a *app) claims(ctx context.Context, args []string) error {
	return a.dispatchSubcommand(ctx, "claims", claimsUsage, args,
		subcommand{"show", a.claimsShow}, subcommand{"release", a.claimsRelease}, subcommand{"resolve", a.claimsResolve})
}

// claimAddress is what names a claim: its unique key.
type claimAddress struct {
	org   uuid.UUID
	scope string
	key   string
}

func (c claimAddress) String() string {
	return fmt.Sprintf("organization %s, scope %s, key %q", c.org, c.scope, c.key)
}

// claimFlags registers --org, --scope and --key on fs.
func claimFlags(fs *flag.FlagSet) (org, scope, key *string) {
	org = fs.String("org", "", "organization id (UUID; required)")
	scope = fs.String("scope", "", "claim scope, such as "+idempotency.ScopeSavedSearchStart+", tool.email.send or webhook.acme (required)")
	key = fs.String("key", "", "the idempotency key, as stored: unquoted (required)")
	return org, scope, key
}

// readClaimAddress checks the flags that name a claim and returns every
// problem, each naming its flag.
func readClaimAddress(org, scope, key string) (claimAddress, []string) {
	var problems []string
	id := readOrg(&problems, org, true)
	if scope == "" {
		problems = append(problems, "--scope: is required: "+idempotency.ScopeSavedSearchStart+", tool.<name> or webhook.<name>")
	} else if _, err := idempotency.Retention(scope); err != nil {
		problems = append(problems, fmt.Sprintf("--scope: %q is not a scope of the plane: use %s, tool.<name> or webhook.<name>",
			scope, idempotency.ScopeSavedSearchStart))
	}
	if key == "" {
		problems = append(problems, "--key: is required: the idempotency key")
	} else if ie, ok := errors.AsType[*idempotency.InputError](idempotency.ValidateKey(key)); ok {
		problems = append(problems, "--key: "+ie.Reason)
	}
	return claimAddress{org: id, scope: scope, key: key}, problems
}

// invalid is the usage error that lists every problem of a command line.
func invalid(problems []string) error {
	return &usageError{msg: "invalid configuration:\n  " + strings.Join(problems, "\n  ")}
}

// openSmallPool opens a pool of one connection, for a command that runs
// one statement or transaction at a time (claims, sweep).
func openSmallPool(ctx context.Context, dbURL string) (*pgxpool.Pool, error) {
	pc, err := poolConfig(dbURL)
	if err != nil {
		return nil, err
	}
	pc.MaxConns, pc.MinConns = 1, 0
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("opening the database: %w", err)
	}
	return pool, nil
}

// errNoClaim reports that nothing is stored for the address.
var errNoClaim = errors.New("no claim is stored")

func getClaim(ctx context.Context, repo *idempotency.Repository, at claimAddress) (*idempotency.Record, error) {
	rec, err := repo.Get(ctx, at.org, at.scope, at.key)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("%w for %s", errNoClaim, at)
	}
	return rec, nil
}

func (a *app) claimsShow(ctx context.Context, args []string) error {
	fs := a.flagSet("claims show", claimsShowCommand)
	org, scope, key := claimFlags(fs)
	asJSON := fs.Bool("json", false, "print the claim as one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	at, problems := readClaimAddress(*org, *scope, *key)
	return a.withDB(ctx, fs, cmdClaimsShow, problems, func(pool *pgxpool.Pool, _ *slog.Logger) error {
		rec, err := getClaim(ctx, idempotency.NewRepository(pool, a.dbClock), at)
		if err != nil {
			return err
		}
		if *asJSON {
			return a.printJSON(claimView(rec))
		}
		printClaim(a.stdout, rec)
		return nil
	})
}

// claimJSON is the --json form of a claim. It leaves out the lease token
// (the fence: whoever holds it can end the claim) and the response body,
// which may hold customer data; its size is given.
type claimJSON struct {
	ID             uuid.UUID `json:"id"`
	OrganizationID uuid.UUID `json:"organization_id"`
	Scope          string    `json:"scope"`
	Key            string    `json:"key"`
	Status         string    `json:"status"`
	RequestHash    string    `json:"request_hash"`
	ClaimedAt      time.Time `json:"claimed_at"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	// LeaseLive and Retained are judged by the database clock at the read,
	// ObservedAt.
	LeaseLive     bool      `json:"lease_live"`
	RetainUntil   time.Time `json:"retain_until"`
	Retained      bool      `json:"retained"`
	ResourceType  *string   `json:"resource_type"`
	ResourceID    *string   `json:"resource_id"`
	ResponseBytes int       `json:"response_bytes"`
	ObservedAt    time.Time `json:"observed_at"`
}

func claimView(rec *idempotency.Record) claimJSON {
	v := claimJSON{
		ID:             rec.ID,
		OrganizationID: rec.OrganizationID,
		Scope:          rec.Scope,
		Key:            rec.Key,
		Status:         string(rec.Status),
		RequestHash:    rec.RequestHash,
		ClaimedAt:      rec.ClaimedAt.UTC(),
		LeaseExpiresAt: rec.LeaseExpiresAt.UTC(),
		LeaseLive:      rec.LeaseLive(),
		RetainUntil:    rec.RetainUntil.UTC(),
		Retained:       rec.Retained(),
		ResponseBytes:  len(rec.Response),
		ObservedAt:     rec.ObservedAt.UTC(),
	}
	if rec.ResourceID != "" {
		v.ResourceType, v.ResourceID = &rec.ResourceType, &rec.ResourceID
	}
	return v
}

// printClaim writes rec for a person. Lease and retention are judged by
// the database clock at the read, as the plane judges them.
func printClaim(w io.Writer, rec *idempotency.Record) {
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	span := func(d time.Duration) string { return d.Abs().Round(time.Second).String() }
	lease := ts(rec.LeaseExpiresAt)
	switch {
	case rec.Status == idempotency.StatusCompleted:
		lease += ", ended: the claim is completed"
	case rec.LeaseLive():
		lease += ", live: passes in " + span(rec.LeaseExpiresAt.Sub(rec.ObservedAt))
	default:
		lease += ", passed " + span(rec.ObservedAt.Sub(rec.LeaseExpiresAt)) + " ago: the next claim of the key reclaims it"
	}
	retention := ts(rec.RetainUntil)
	if rec.Retained() {
		retention += ", retained: " + span(rec.RetainUntil.Sub(rec.ObservedAt)) + " left"
	} else {
		retention += ", passed: the claim answers nothing, and the sweeper deletes it"
	}
	resource := "none"
	if rec.ResourceID != "" {
		resource = rec.ResourceType + " " + rec.ResourceID
	}
	response := "none"
	if n := len(rec.Response); n > 0 {
		response = fmt.Sprintf("%d bytes", n)
		if strings.HasPrefix(string(rec.Response), `{"resource_ref":`) {
			response += " (a reference to the resource: the answer was over the store limit)"
		}
	}
	for _, line := range [][2]string{
		{"claim", rec.ID.String()},
		{"organization", rec.OrganizationID.String()},
		{"scope", rec.Scope},
		{"key", fmt.Sprintf("%q", rec.Key)},
		{"status", string(rec.Status)},
		{"request hash", rec.RequestHash},
		{"claimed at", ts(rec.ClaimedAt)},
		{"lease until", lease},
		{"retain until", retention},
		{"resource", resource},
		{"response", response},
	} {
		fmt.Fprintf(w, "%-13s %s\n", line[0], line[1])
	}
}

func (a *app) claimsRelease(ctx context.Context, args []string) error {
	fs := a.flagSet("claims release", claimsReleaseCommand)
	org, scope, key := claimFlags(fs)
	reason := fs.String("reason", "", fmt.Sprintf("why the claim is released, for the log and the audit (required, 1 to %d characters, one line)", operator.MaxReasonLen))
	actorFlag := fs.String("actor", "", "who releases, recorded with the release (default: $USER, else \"cli\")")
	if err := parse(fs, args); err != nil {
		return err
	}
	at, problems := readClaimAddress(*org, *scope, *key)
	why := strings.TrimSpace(*reason)
	checkLine(&problems, "reason", why, "say why the claim is released; it is logged", operator.MaxReasonLen)
	actor := a.readActor(&problems, *actorFlag, operator.MaxActorLen)
	return a.withDB(ctx, fs, cmdClaimsChange, problems, func(pool *pgxpool.Pool, logger *slog.Logger) error {
		rec, err := getClaim(ctx, idempotency.NewRepository(pool, a.dbClock), at)
		if err != nil {
			return err
		}
		if err := releaseClaim(ctx, operator.NewStore(pool, a.dbClock), rec, why, actor, logger); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "released claim %s (%s); the next attempt with this key runs afresh\n", rec.ID, at)
		return nil
	})
}

// releaseClaim force-releases rec, as read, with store (see
// operator.Store.ForceRelease: completed claims are refused, the delete is
// fenced by the token rec was read with, and the release is recorded in
// agent.claim_releases with actor and reason), and logs it.
func releaseClaim(ctx context.Context, store *operator.Store, rec *idempotency.Record, reason, actor string, logger *slog.Logger) error {
	attrs := []slog.Attr{
		slog.String("organization_id", rec.OrganizationID.String()),
		slog.String("scope", rec.Scope),
		slog.String("key", rec.Key),
		slog.String("claim_id", rec.ID.String()),
		slog.String("reason", reason),
		slog.String("actor", actor),
		slog.Bool("lease_live", rec.LeaseLive()),
	}
	_, err := store.ForceRelease(ctx, rec, operator.ReleaseParams{Actor: actor, Reason: reason, Via: operator.ViaCLI})
	switch {
	case errors.Is(err, operator.ErrClaimChanged):
		logger.LogAttrs(ctx, slog.LevelWarn, "claim release refused: the claim changed since it was read", attrs...)
		return fmt.Errorf("%w; run searchd claims show to see it now", err)
	case err != nil:
		return err
	}
	logger.LogAttrs(ctx, slog.LevelWarn, "claim force-released by an operator", attrs...)
	return nil
}

func (a *app) claimsResolve(ctx context.Context, args []string) error {
	fs := a.flagSet("claims resolve", claimsResolveCommand)
	org, scope, key := claimFlags(fs)
	as := fs.String("as", "", "the resolution: delivered (the call had its effect) or retry (it had none: make it once more, same key) (required)")
	actor := fs.String("actor", "", fmt.Sprintf("who decides, recorded and named by a delivered answer (required, 1 to %d characters, one line)", tools.MaxActorLen))
	reason := fs.String("reason", "", fmt.Sprintf("why, with the evidence, recorded and logged (required, 1 to %d characters, one line)", tools.MaxReasonLen))
	if err := parse(fs, args); err != nil {
		return err
	}
	at, problems := readClaimAddress(*org, *scope, *key)
	if *scope != "" && !strings.HasPrefix(*scope, idempotency.ToolScopePrefix) {
		problems = append(problems, fmt.Sprintf("--scope: %q is not a tool scope: only a tool call (tool.<name>) is ever uncertain", *scope))
	}
	p := tools.ResolveParams{OrganizationID: at.org, Scope: at.scope, Key: at.key,
		Resolution: tools.Resolution(*as), Actor: strings.TrimSpace(*actor), Reason: strings.TrimSpace(*reason)}
	switch p.Resolution {
	case tools.ResolutionDelivered, tools.ResolutionRetry:
	case "":
		problems = append(problems, "--as: is required: delivered or retry")
	default:
		problems = append(problems, fmt.Sprintf("--as: %q is neither delivered nor retry", *as))
	}
	checkLine(&problems, "actor", p.Actor, "it is recorded with the resolution", tools.MaxActorLen)
	checkLine(&problems, "reason", p.Reason, "it is recorded with the resolution", tools.MaxReasonLen)
	return a.withDB(ctx, fs, cmdClaimsChange, problems, func(pool *pgxpool.Pool, logger *slog.Logger) error {
		res, err := tools.NewResolver(pool, tools.ResolverConfig{Clock: a.dbClock}).Resolve(ctx, p)
		switch {
		case errors.Is(err, tools.ErrNoCall):
			return fmt.Errorf("%w for %s", errNoClaim, at)
		case errors.Is(err, tools.ErrNotUncertain):
			return fmt.Errorf("%s: %w; run searchd claims show to see it", at, err)
		case err != nil:
			return err
		}
		logger.LogAttrs(ctx, slog.LevelWarn, "uncertain tool call resolved by a person",
			slog.String("organization_id", at.org.String()),
			slog.String("scope", at.scope),
			slog.String("key", at.key),
			slog.String("claim_id", res.ClaimID.String()),
			slog.String("resolution", string(res.Resolution)),
			slog.String("actor", res.Actor),
			slog.String("reason", res.Reason),
			slog.String("resolution_id", res.ID.String()))
		switch res.Resolution {
		case tools.ResolutionDelivered:
			fmt.Fprintf(a.stdout, "resolved claim %s (%s) as delivered by %s; every repeat of the call now answers ok and calls nothing\n",
				res.ClaimID, at, res.Actor)
		default:
			fmt.Fprintf(a.stdout, "authorized one retry of claim %s (%s) by %s; the next attempt of the call makes it again with the same key\n",
				res.ClaimID, at, res.Actor)
		}
		fmt.Fprintf(a.stdout, "recorded as resolution %s at %s\n", res.ID, res.ResolvedAt.UTC().Format(time.RFC3339))
		return nil
	})
}

// readActor reads --actor: the flag, else $USER, else "cli"; valid UTF-8
// of at most maxActor bytes, one line. A problem is added to problems.
func (a *app) readActor(problems *[]string, actorFlag string, maxActor int) string {
	actor := cmp.Or(strings.TrimSpace(actorFlag), a.getenv("USER"), "cli")
	if len(actor) > maxActor || !utf8.ValidString(actor) || strings.ContainsFunc(actor, unicode.IsControl) {
		*problems = append(*problems, fmt.Sprintf("--actor: must be valid UTF-8 of at most %d bytes, one line", maxActor))
	}
	return actor
}
