package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/providerjobs"
)

// Environment variables of the provider inbox's applier and of the
// server-side bounds every session of serve and dev carries.
const (
	// EnvWebhookLease is the lease of a provider delivery: of its claim,
	// and of its arrival while a worker applies it.
	EnvWebhookLease = "SEARCHD_WEBHOOK_LEASE"
	// EnvApplierInterval is the time between two polls of the applier.
	EnvApplierInterval = "SEARCHD_APPLIER_INTERVAL"
	// EnvApplierBatch is the most arrivals one poll takes.
	EnvApplierBatch = "SEARCHD_APPLIER_BATCH"
	// EnvIdleInTransactionTimeout is PostgreSQL's
	// idle_in_transaction_session_timeout for searchd's sessions.
	EnvIdleInTransactionTimeout = "SEARCHD_DB_IDLE_IN_TRANSACTION_TIMEOUT"
	// EnvLockTimeout is PostgreSQL's lock_timeout for searchd's sessions.
	EnvLockTimeout = "SEARCHD_DB_LOCK_TIMEOUT"
	// EnvStatementTimeout is PostgreSQL's statement_timeout for searchd's
	// sessions.
	EnvStatementTimeout = "SEARCHD_DB_STATEMENT_TIMEOUT"
)

// Defaults and limits of those settings. The session bounds are seconds:
// a replica stopped (SIGSTOP, a long pause, a partition) inside an open
// transaction keeps its row locks for as long as PostgreSQL keeps its
// session, so the session is ended after 5 s idle in a transaction, and
// its claims fall to the lease rules. A statement waits for a lock at most
// 10 s, longer than that, so a waiter outlasts a stalled holder rather
// than failing first; no statement runs longer than 15 s, so one slow
// statement (a tenant's heavy list) cannot hold a pool connection long.
const (
	DefaultWebhookLease             = idempotency.WebhookLease
	DefaultApplierInterval          = time.Second
	DefaultApplierBatch             = 100
	DefaultIdleInTransactionTimeout = 5 * time.Second
	DefaultLockTimeout              = 10 * time.Second
	DefaultStatementTimeout         = 15 * time.Second
	maxWebhookLease                 = 10 * time.Minute
	maxApplierInterval              = time.Hour
	maxApplierBatch                 = 1000
	maxSessionTimeout               = time.Hour
)

// inboxConfig configures the provider inbox of serve and dev.
type inboxConfig struct {
	// Lease is providerjobs.Config.Lease.
	Lease time.Duration
	// Applier configures the background applier; an Interval of zero
	// runs none.
	Applier providerjobs.ApplierConfig
}

// sessionBounds are the server-side bounds set on every session of the
// pool: PostgreSQL's idle_in_transaction_session_timeout, lock_timeout and
// statement_timeout. Zero leaves one off.
type sessionBounds struct {
	IdleInTransaction, Lock, Statement time.Duration
}

// runtimeParams returns the bounds as the startup parameters of a session.
func (b sessionBounds) runtimeParams() map[string]string {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	return map[string]string{
		"idle_in_transaction_session_timeout": ms(b.IdleInTransaction),
		"lock_timeout":                        ms(b.Lock),
		"statement_timeout":                   ms(b.Statement),
	}
}

// inboxOptions are the settings above, for --help.
func inboxOptions() []option {
	return []option{
		{"webhook-lease", EnvWebhookLease, DefaultWebhookLease.String(),
			"lease of a provider delivery: how long a replica applying it holds its claim and its inbox arrival before " +
				"another replica's applier takes it over, more than 0s and at most " + maxWebhookLease.String() +
				"; for tests and tuning (the seed's value is 30 s)"},
		{"applier-interval", EnvApplierInterval, DefaultApplierInterval.String(),
			"time between two polls of the background applier, which applies the stored provider deliveries a replica " +
				"did not finish (crashed, stalled, failed); 0s runs none in this process, up to " + maxApplierInterval.String()},
		{"applier-batch", EnvApplierBatch, strconv.Itoa(DefaultApplierBatch),
			fmt.Sprintf("most deliveries one poll of the applier takes, 1 to %d", maxApplierBatch)},
		{"db-idle-in-transaction-timeout", EnvIdleInTransactionTimeout, DefaultIdleInTransactionTimeout.String(),
			"PostgreSQL idle_in_transaction_session_timeout of every session: a replica stopped inside a transaction loses " +
				"its session and its row locks after this long; 0s for none, up to 1h"},
		{"db-lock-timeout", EnvLockTimeout, DefaultLockTimeout.String(),
			"PostgreSQL lock_timeout of every session: the longest a statement waits for a row lock (then 503); 0s for none, up to 1h"},
		{"db-statement-timeout", EnvStatementTimeout, DefaultStatementTimeout.String(),
			"PostgreSQL statement_timeout of every session: the longest a statement runs (then 503); 0s for none, up to 1h"},
	}
}

// readInboxSettings reads the settings above and returns what is wrong
// with them, one message per setting.
func readInboxSettings(fs *flag.FlagSet, getenv func(string) string) (inboxConfig, sessionBounds, []string) {
	var problems []string
	duration := func(fl, env string, def, lo, hi time.Duration, loOpen bool) time.Duration {
		s := lookup(fs, fl, env, getenv)
		if s.value == "" {
			return def
		}
		d, err := time.ParseDuration(s.value)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %q is not a duration (write it like 5s or 1m)", s.name, s.value))
		case (loOpen && d <= lo) || d < lo || d > hi:
			bound := "from " + lo.String()
			if loOpen {
				bound = "more than " + lo.String() + " and"
			}
			problems = append(problems, fmt.Sprintf("%s: %s is out of range: %s at most %s", s.name, d, bound, hi))
		default:
			return d
		}
		return def
	}
	var ic inboxConfig
	ic.Lease = duration("webhook-lease", EnvWebhookLease, DefaultWebhookLease, 0, maxWebhookLease, true)
	ic.Applier.Interval = duration("applier-interval", EnvApplierInterval, DefaultApplierInterval, 0, maxApplierInterval, false)
	ic.Applier.Batch = DefaultApplierBatch
	if s := lookup(fs, "applier-batch", EnvApplierBatch, getenv); s.value != "" {
		n, err := strconv.Atoi(s.value)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %q is not a whole number", s.name, s.value))
		case n < 1 || n > maxApplierBatch:
			problems = append(problems, fmt.Sprintf("%s: %d is out of range: from 1 to %d", s.name, n, maxApplierBatch))
		default:
			ic.Applier.Batch = n
		}
	}
	var sb sessionBounds
	sb.IdleInTransaction = duration("db-idle-in-transaction-timeout", EnvIdleInTransactionTimeout,
		DefaultIdleInTransactionTimeout, 0, maxSessionTimeout, false)
	sb.Lock = duration("db-lock-timeout", EnvLockTimeout, DefaultLockTimeout, 0, maxSessionTimeout, false)
	sb.Statement = duration("db-statement-timeout", EnvStatementTimeout, DefaultStatementTimeout, 0, maxSessionTimeout, false)
	for _, b := range []struct {
		fl, env string
		d       time.Duration
	}{
		{"db-idle-in-transaction-timeout", EnvIdleInTransactionTimeout, sb.IdleInTransaction},
		{"db-lock-timeout", EnvLockTimeout, sb.Lock},
		{"db-statement-timeout", EnvStatementTimeout, sb.Statement},
	} {
		if b.d%time.Millisecond != 0 {
			problems = append(problems, fmt.Sprintf("%s: %s is out of range: PostgreSQL takes whole milliseconds",
				lookup(fs, b.fl, b.env, getenv).name, b.d))
		}
	}
	return ic, sb, problems
}
