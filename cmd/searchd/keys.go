package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/servicekeys"
)

const keysUsage = `usage: searchd keys <create|list|revoke> [flags]

Manage an organization's service keys (agent.service_keys): long-lived,
scoped, revocable bearer tokens for a service, such as a runtime that
reports Run status (scope runs:report) or a product backend that starts
and reads Runs (starts:write, read). The API's POST/GET /v1/service-keys
and DELETE /v1/service-keys/{id} do the same for an organization's admin.

  create  create a key and print its token on stdout, once: searchd keeps
          only a hash of its secret
  list    print the organization's keys, revoked ones too, newest first
  revoke  revoke a key; every replica refuses it within 3 seconds

Run searchd keys create --help (list, revoke) for flags.
`

var (
	keysCreateCommand = command{"searchd keys create --org UUID --name NAME --scope S [--scope S] [--expires-in DURATION] [--actor WHO] [--json]",
		"Create a service key of the organization with the scopes given (runs:report, starts:write, read) and print its token " +
			"on stdout, the one time it is shown (with --json, the key and its token as JSON). --actor is recorded as created_by.",
		cmdKeys}
	keysListCommand = command{"searchd keys list --org UUID [--json]",
		"Print the organization's service keys, revoked ones too, newest first: prefix, name, scopes, expiry, last use, revocation. Never a token.",
		cmdKeys}
	keysRevokeCommand = command{"searchd keys revoke --org UUID --id UUID [--actor WHO]",
		"Revoke a service key, recording --actor as revoked_by. Every replica refuses it within 3 seconds; revoking it again changes nothing.",
		cmdKeys}
)

// keys runs `searchd keys create|list|revoke`.
func (a *app) keys(ctx context.Context, args []string) error {
	return a.dispatchSubcommand(ctx, "keys", keysUsage, args,
		subcommand{"create", a.keysCreate}, subcommand{"list", a.keysList}, subcommand{"revoke", a.keysRevoke})
}

func (a *app) keysCreate(ctx context.Context, args []string) error {
	fs := a.flagSet("keys create", keysCreateCommand)
	org := fs.String("org", "", "the organization id (UUID; required)")
	name := fs.String("name", "", "what the key is for (required, 1 to 200 characters)")
	var scopes []servicekeys.Scope
	fs.Func("scope", "a scope of the key: runs:report, starts:write or read (at least one; repeat for more)", func(v string) error {
		for _, s := range strings.Split(v, ",") {
			scopes = append(scopes, servicekeys.Scope(strings.TrimSpace(s)))
		}
		return nil
	})
	expiresIn := fs.Duration("expires-in", 0, "how long the key works (0: until revoked)")
	actorFlag := fs.String("actor", "", "who creates it, recorded as created_by (default: $USER, else \"cli\")")
	asJSON := fs.Bool("json", false, "print the key and its token as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	var problems []string
	orgID := readOrg(&problems, *org, true)
	if *expiresIn < 0 {
		problems = append(problems, "--expires-in: must not be negative")
	}
	actor := a.readActor(&problems, *actorFlag, servicekeys.MaxActorLen)
	return a.withDB(ctx, fs, cmdKeys, problems, func(pool *pgxpool.Pool, _ *slog.Logger) error {
		p := servicekeys.CreateParams{Name: *name, Scopes: scopes, Actor: actor}
		if *expiresIn > 0 {
			at := a.now().Add(*expiresIn)
			p.ExpiresAt = &at
		}
		token, k, err := servicekeys.NewStore(pool, a.dbClock).Create(ctx, orgID, p)
		if errors.Is(err, servicekeys.ErrInvalid) {
			return invalid(flagProblems(err))
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return a.printJSON(struct {
				servicekeys.Key
				Token string `json:"token"`
			}{*k, token})
		}
		fmt.Fprintf(a.stderr, "created service key %s (%s) of organization %s, scopes %s; its token, shown this once:\n",
			k.Prefix, k.ID, k.OrganizationID, joinScopes(k.Scopes))
		fmt.Fprintln(a.stdout, token)
		return nil
	})
}

// flagProblems names the flags of the fields a refused create names.
func flagProblems(err error) []string {
	var out []string
	for _, f := range errs.FieldsOf(err) {
		flag := map[string]string{"name": "--name", "scopes": "--scope", "expires_at": "--expires-in"}[f.Name]
		out = append(out, fmt.Sprintf("%s: %s", cmp.Or(flag, "--actor"), f.Message))
	}
	if len(out) == 0 {
		out = append(out, err.Error())
	}
	return out
}

func (a *app) keysList(ctx context.Context, args []string) error {
	fs := a.flagSet("keys list", keysListCommand)
	org := fs.String("org", "", "the organization id (UUID; required)")
	asJSON := fs.Bool("json", false, "print the keys as a JSON array")
	if err := parse(fs, args); err != nil {
		return err
	}
	var problems []string
	orgID := readOrg(&problems, *org, true)
	return a.withDB(ctx, fs, cmdKeys, problems, func(pool *pgxpool.Pool, _ *slog.Logger) error {
		list, err := servicekeys.NewStore(pool, a.dbClock).List(ctx, orgID)
		if err != nil {
			return err
		}
		return printList(a, *asJSON, list, func(k *servicekeys.Key) servicekeys.Key { return *k }, printKeys)
	})
}

func printKeys(w io.Writer, list []servicekeys.Key) {
	fmt.Fprintln(w, "prefix\tid\tname\tscopes\tcreated\tby\texpires\tlast used\trevoked")
	for _, k := range list {
		revoked := stamp(k.RevokedAt)
		if k.RevokedBy != nil {
			revoked += " by " + *k.RevokedBy
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Prefix, k.ID, strings.ReplaceAll(k.Name, "\t", " "),
			joinScopes(k.Scopes), stamp(&k.CreatedAt), k.CreatedBy, stamp(k.ExpiresAt), stamp(k.LastUsedAt), revoked)
	}
	if len(list) == 0 {
		fmt.Fprintln(w, "(none)")
	}
}

func joinScopes(scopes []servicekeys.Scope) string {
	s := make([]string, len(scopes))
	for i, sc := range scopes {
		s[i] = string(sc)
	}
	return strings.Join(s, ",")
}

func (a *app) keysRevoke(ctx context.Context, args []string) error {
	fs := a.flagSet("keys revoke", keysRevokeCommand)
	org := fs.String("org", "", "the organization id (UUID; required)")
	id := fs.String("id", "", "the key's id (UUID; required; `searchd keys list` prints it)")
	actorFlag := fs.String("actor", "", "who revokes it, recorded as revoked_by (default: $USER, else \"cli\")")
	if err := parse(fs, args); err != nil {
		return err
	}
	var problems []string
	orgID := readOrg(&problems, *org, true)
	keyID, err := uuid.Parse(*id)
	if err != nil || keyID == uuid.Nil {
		problems = append(problems, fmt.Sprintf("--id: %q is not a key id (a UUID)", *id))
	}
	actor := a.readActor(&problems, *actorFlag, servicekeys.MaxActorLen)
	return a.withDB(ctx, fs, cmdKeys, problems, func(pool *pgxpool.Pool, _ *slog.Logger) error {
		k, err := servicekeys.NewStore(pool, a.dbClock).Revoke(ctx, orgID, keyID, actor)
		if errors.Is(err, servicekeys.ErrNotFound) {
			return fmt.Errorf("no service key %s in organization %s", keyID, orgID)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "revoked: service key %s (%s) of organization %s, at %s by %s; every replica refuses it within %s\n",
			k.Prefix, k.ID, k.OrganizationID, stamp(k.RevokedAt), *k.RevokedBy, servicekeys.RevocationBound)
		return nil
	})
}
