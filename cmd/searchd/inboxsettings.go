package main

import (
	"strconv"
	"time"

	"github.com/searchd/searchd/providerjobs"
)

// Environment variables of the provider inbox's applier and of the
// server-side bounds every session of serve and dev carries.
const (
	envProviderWebhookLease     = "SEARCHD_PROVIDER_WEBHOOK_LEASE"
	envApplierInterval          = "SEARCHD_APPLIER_INTERVAL"
	envApplierBatch             = "SEARCHD_APPLIER_BATCH"
	envIdleInTransactionTimeout = "SEARCHD_DB_IDLE_IN_TRANSACTION_TIMEOUT"
	envLockTimeout              = "SEARCHD_DB_LOCK_TIMEOUT"
	envStatementTimeout         = "SEARCHD_DB_STATEMENT_TIMEOUT"
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
