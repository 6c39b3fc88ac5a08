package idempotency

import (
	"fmt"
	"strings"
	"time"
)

// Scopes and their retention. The retention is a property of the scope, the
// lease a property of the operation, which is why only the first lives here.
const (
	// ScopeSavedSearchStart is the surface claim that freezes a saved
	// search's input before Run admission.
	ScopeSavedSearchStart = "surface.saved_search.start"
	// ScopeSavedSearchCreate is the surface claim of a saved-search create
	// that carries an Idempotency-Key: its completion names the saved
	// search the key created, in the same transaction as the insert.
	ScopeSavedSearchCreate = "surface.saved_search.create"
	// ScopeProviderJobRegister is the surface claim of a provider-job
	// registration that carries an Idempotency-Key.
	ScopeProviderJobRegister = "surface.provider_job.register"
	// ScopeScheduleSet is the surface claim of a schedule set that carries
	// an Idempotency-Key: its completion names the saved search whose
	// schedule the key set, in the same transaction as the write.
	ScopeScheduleSet = "surface.schedule.set"
	// ToolScopePrefix starts every tool scope, as in "tool.email.send".
	ToolScopePrefix = "tool."
	// WebhookScopePrefix starts every webhook and provider callback scope,
	// as in "webhook.nylas".
	WebhookScopePrefix = "webhook."

	// ToolRetention is the retention of every tool scope. A tool claim is the
	// replay journal of a Run, and a Run may wait on an approval for as long
	// as the longest max_run_duration a definition may set, which validation
	// caps at 30 days. A per-scope constant cannot know the definition, so it
	// takes the ceiling; a shorter value would let a restarted segment repeat
	// an effect the journal forgot.
	ToolRetention = 30 * 24 * time.Hour
	// WebhookRetention covers every redelivery a vendor makes.
	WebhookRetention = 24 * time.Hour
	// SavedSearchStartRetention keeps the frozen snapshot answerable for the
	// retries of one start; the Run itself is replayed from agent.runs.
	SavedSearchStartRetention = 24 * time.Hour

	// SurfaceCreateRetention keeps the answer of a keyed create for the
	// retries of one client action, like a start's preparation.
	SurfaceCreateRetention = 24 * time.Hour
	// SurfaceCreateLease is the lease of a keyed create: one short
	// transaction, so a retry after a crash waits at most this long.
	SurfaceCreateLease = 30 * time.Second

	// SavedSearchStartLease is the lease of a saved-search preparation: the
	// freeze is one short transaction, and a retry waits at most this long
	// after a crash.
	SavedSearchStartLease = 30 * time.Second
	// WebhookLease is the lease a webhook handler takes on a delivery.
	WebhookLease = 30 * time.Second

	// MaxLease bounds the lease a caller may ask for. No operation of the
	// platform runs longer than the longest retention.
	MaxLease = ToolRetention
)

// Retention returns how long claims in scope are remembered. It returns an
// error wrapping [ErrUnknownScope] for a scope the registry does not name: an
// unknown scope is a programming error, never a default.
func Retention(scope string) (time.Duration, error) {
	switch {
	case scope == ScopeSavedSearchStart:
		return SavedSearchStartRetention, nil
	case scope == ScopeSavedSearchCreate, scope == ScopeProviderJobRegister, scope == ScopeScheduleSet:
		return SurfaceCreateRetention, nil
	case strings.HasPrefix(scope, ToolScopePrefix) && validScopeName(scope[len(ToolScopePrefix):]):
		return ToolRetention, nil
	case strings.HasPrefix(scope, WebhookScopePrefix) && validScopeName(scope[len(WebhookScopePrefix):]):
		return WebhookRetention, nil
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownScope, scope)
}

// validScopeName reports whether name, the part after a scope prefix, is a
// dotted lower-case identifier such as "email.send".
func validScopeName(name string) bool {
	if name == "" || len(name) > 100 || name[0] == '.' || name[len(name)-1] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
		case c == '.' && name[i-1] != '.':
		default:
			return false
		}
	}
	return true
}
