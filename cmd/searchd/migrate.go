package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/searchd/searchd/migrations"
)

// migrate applies the migrations to DATABASE_URL and prints what it did.
func (a *app) migrate(ctx context.Context, args []string) error {
	fs := a.flagSet("migrate")
	registerOptions(fs, migrateCommand)
	if err := parse(fs, args); err != nil {
		return err
	}
	dbURL, err := requiredDatabaseURL(fs, a.getenv)
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

// requiredDatabaseURL reads --database-url from fs, else DATABASE_URL: it
// must be set and parse, and a flag must hold no password.
func requiredDatabaseURL(fs *flag.FlagSet, getenv func(string) string) (string, error) {
	u, problem := readDatabaseURL(fs, getenv)
	if problem != "" {
		return "", invalid([]string{problem})
	}
	return u, nil
}

// readDatabaseURL reads the required connection string of a command that
// has no other use for it than connecting, and returns it, or the problem
// with it, naming the setting.
func readDatabaseURL(fs *flag.FlagSet, getenv func(string) string) (string, string) {
	db := lookup(fs, "database-url", EnvDatabaseURL, getenv)
	if db.value == "" {
		return "", db.name + ": is required: the PostgreSQL connection string, such as postgres://user:password@localhost:5432/searchd"
	}
	if p := databaseURLProblem(db); p != "" {
		return "", db.name + ": " + p
	}
	return db.value, ""
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
