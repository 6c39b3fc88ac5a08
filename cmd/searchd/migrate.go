package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/migrations"
)

// migrate applies the migrations to DATABASE_URL and prints what it did.
func (a *app) migrate(ctx context.Context, args []string) error {
	fs := a.flagSet("migrate")
	if err := parse(fs, args); err != nil {
		return err
	}
	dbURL, err := requiredDatabaseURL(a.getenv)
	if err != nil {
		return err
	}
	applied, err := migrations.Up(ctx, dbURL)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, appliedMessage(applied))
	return nil
}

// requiredDatabaseURL reads DATABASE_URL, which must be set and parse.
func requiredDatabaseURL(getenv func(string) string) (string, error) {
	u := getenv(EnvDatabaseURL)
	if u == "" {
		return "", usagef("invalid configuration:\n  %s: is required: the PostgreSQL connection string, such as postgres://user:password@localhost:5432/searchd", EnvDatabaseURL)
	}
	if _, err := pgxpool.ParseConfig(u); err != nil {
		return "", usagef("invalid configuration:\n  %s: is not a valid PostgreSQL connection string (postgres://user:password@host:port/database)", EnvDatabaseURL)
	}
	return u, nil
}

func appliedMessage(applied []int64) string {
	if len(applied) == 0 {
		return "migrations: schema already at the newest version; nothing applied"
	}
	vs := make([]string, len(applied))
	for i, v := range applied {
		vs[i] = strconv.FormatInt(v, 10)
	}
	return "migrations: applied version " + strings.Join(vs, ", ")
}
