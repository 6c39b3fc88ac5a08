package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/dispatch"
)

const runsUsage = `usage: searchd runs dispatch <list|retry> [flags]

Inspect the hand-off of admitted Runs to the runtime (agent.run_dispatches),
or retry a dispatch the runtime refused.

  dispatch list   print failed dispatches (the runtime answered a 4xx other
                  than 408 and 429: nothing retries them by themselves), or
                  pending ones, with their attempts and last answer
  dispatch retry  make a FAILED dispatch pending again, due now, recording
                  --actor and --reason with the answer that had failed it

Run searchd runs dispatch list --help or searchd runs dispatch retry --help for flags.
`

var (
	runsDispatchListCommand = command{"searchd runs dispatch list [--state failed|pending] [--org UUID] [--limit N] [--json]",
		"Print dispatches across organizations (or of --org): failed ones, the most recently failed first (the default), " +
			"or pending ones, the first due first, each with its Run, attempts, the runtime's last status and answer.",
		cmdRunsList}
	runsDispatchRetryCommand = command{"searchd runs dispatch retry --run UUID [--org UUID] --reason TEXT [--actor WHO]",
		"Make a failed dispatch pending and due now, so a dispatcher delivers it again (with the same webhook-id, the Run id). " +
			"Only a failed dispatch is retried: a pending one is retried by itself, and a dispatched one is done; both are " +
			"refused and nothing is written. --actor, --reason and the answer that had failed it are recorded in " +
			"agent.run_dispatch_retries (kept with the Run) and logged. Fix what the runtime refused first: the same " +
			"request is sent again.",
		cmdRunsRetry}
)

// runs runs `searchd runs dispatch list|retry`.
func (a *app) runs(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "dispatch" {
		if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(a.stdout, runsUsage)
			return nil
		}
		fmt.Fprint(a.stderr, runsUsage)
		return usagef("runs: name a subcommand: dispatch list or dispatch retry")
	}
	return a.dispatchSubcommand(ctx, "runs dispatch", runsUsage, args[1:],
		subcommand{"list", a.runsDispatchList}, subcommand{"retry", a.runsDispatchRetry})
}

// dispatchJSON is the --json form of a dispatch.
type dispatchJSON struct {
	RunID          uuid.UUID  `json:"run_id"`
	OrganizationID uuid.UUID  `json:"organization_id"`
	State          string     `json:"state"`
	Attempts       int        `json:"attempts"`
	CreatedAt      time.Time  `json:"created_at"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	LastAttemptAt  *time.Time `json:"last_attempt_at"`
	FailedAt       *time.Time `json:"failed_at"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      *string    `json:"last_error"`
	Retries        int        `json:"retries"`
}

func dispatchView(d *dispatch.Dispatch) dispatchJSON {
	return dispatchJSON{RunID: d.RunID, OrganizationID: d.OrganizationID, State: d.State, Attempts: d.Attempts,
		CreatedAt: d.CreatedAt.UTC(), NextAttemptAt: d.NextAttemptAt, LastAttemptAt: d.LastAttemptAt, FailedAt: d.FailedAt,
		LastStatusCode: d.LastStatusCode, LastError: d.LastError, Retries: d.Retries}
}

func (a *app) runsDispatchList(ctx context.Context, args []string) error {
	fs := a.flagSet("runs dispatch list", runsDispatchListCommand)
	state := fs.String("state", dispatch.StateFailed, "which dispatches: failed or pending")
	org := fs.String("org", "", "only this organization's (UUID)")
	limit := fs.Int("limit", 50, fmt.Sprintf("most dispatches printed, 1 to %d", dispatch.MaxListLimit))
	asJSON := fs.Bool("json", false, "print the dispatches as a JSON array")
	if err := parse(fs, args); err != nil {
		return err
	}
	var problems []string
	if *state != dispatch.StateFailed && *state != dispatch.StatePending {
		problems = append(problems, fmt.Sprintf("--state: %q is not listed: use failed or pending", *state))
	}
	orgID := readOrg(&problems, *org, false)
	checkLimit(&problems, *limit, dispatch.MaxListLimit)
	return a.withDB(ctx, fs, cmdRunsList, problems, func(pool *pgxpool.Pool, _ *slog.Logger) error {
		list, err := dispatch.NewStore(pool, a.dbClock).List(ctx, dispatch.ListParams{State: *state, OrganizationID: orgID, Limit: *limit})
		if err != nil {
			return err
		}
		return printList(a, *asJSON, list, dispatchView, printDispatches)
	})
}

func printDispatches(w io.Writer, list []dispatch.Dispatch) {
	fmt.Fprintln(w, "run\torganization\tstate\tattempts\tretries\tsince\tlast answer")
	for _, d := range list {
		since := d.FailedAt
		if d.State == dispatch.StatePending {
			since = d.NextAttemptAt
		}
		answer := "-"
		if d.LastError != nil {
			answer = strings.ReplaceAll(*d.LastError, "\n", " ")
			if len(answer) > 80 {
				answer = answer[:77] + "..."
			}
		}
		if d.LastStatusCode != nil {
			answer = fmt.Sprintf("[%d] %s", *d.LastStatusCode, answer)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", d.RunID, d.OrganizationID, d.State, d.Attempts, d.Retries, stamp(since), answer)
	}
	if len(list) == 0 {
		fmt.Fprintln(w, "(none)")
	}
}

func (a *app) runsDispatchRetry(ctx context.Context, args []string) error {
	fs := a.flagSet("runs dispatch retry", runsDispatchRetryCommand)
	run := fs.String("run", "", "the Run id of the failed dispatch (UUID; required)")
	org := fs.String("org", "", "the Run's organization (UUID; optional: a check that the Run is of it)")
	reason := fs.String("reason", "", fmt.Sprintf("why it is retried, recorded and logged (required, 1 to %d characters, one line)", dispatch.MaxReasonLen))
	actorFlag := fs.String("actor", "", "who retries, recorded with the retry (default: $USER, else \"cli\")")
	if err := parse(fs, args); err != nil {
		return err
	}
	var problems []string
	runID, err := uuid.Parse(*run)
	switch {
	case *run == "":
		problems = append(problems, "--run: is required: the Run id of the failed dispatch")
	case err != nil || runID == uuid.Nil:
		problems = append(problems, fmt.Sprintf("--run: %q is not a Run id (a UUID)", *run))
	}
	orgID := readOrg(&problems, *org, false)
	why := strings.TrimSpace(*reason)
	checkLine(&problems, "reason", why, "say why the dispatch is retried (what was fixed); it is recorded", dispatch.MaxReasonLen)
	actor := a.readActor(&problems, *actorFlag, dispatch.MaxActorBytes)
	return a.withDB(ctx, fs, cmdRunsRetry, problems, func(pool *pgxpool.Pool, logger *slog.Logger) error {
		d, err := dispatch.NewStore(pool, a.dbClock).Retry(ctx, dispatch.RetryParams{RunID: runID, OrganizationID: orgID, Actor: actor, Reason: why})
		switch {
		case errors.Is(err, dispatch.ErrNotFound) && orgID != uuid.Nil:
			return fmt.Errorf("no dispatch of Run %s in organization %s", runID, orgID)
		case errors.Is(err, dispatch.ErrNotFound):
			return fmt.Errorf("no dispatch of Run %s", runID)
		case errors.Is(err, dispatch.ErrNotFailed):
			return fmt.Errorf("refused: %w; nothing was written", err)
		case err != nil:
			return err
		}
		logger.LogAttrs(ctx, slog.LevelWarn, "dispatch retried by an operator",
			slog.String("run_id", d.RunID.String()), slog.String("organization_id", d.OrganizationID.String()),
			slog.String("actor", actor), slog.String("reason", why), slog.Int("attempts", d.Attempts), slog.Int("retries", d.Retries))
		fmt.Fprintf(a.stdout, "retried: the dispatch of Run %s (organization %s) is pending, due now; retry %d, recorded with --actor %q\n",
			d.RunID, d.OrganizationID, d.Retries, actor)
		return nil
	})
}
