package idempotency

import (
	"fmt"
	"strings"
	"time"
)

// Scopes and their retentions. Retention belongs to the scope, lease to the
// operation.
const (
	// ScopeSavedSearchStart freezes a saved search's input before Run admission.
	ScopeSavedSearchStart = "surface.saved_search.start"
	// ScopeSavedSearchCreate is a keyed saved-search create.
	ScopeSavedSearchCreate = "surface.saved_search.create"
	// ScopeProviderJobRegister is a keyed provider-job registration.
	ScopeProviderJobRegister = "surface.provider_job.register"
	// ScopeScheduleSet is a keyed schedule set.
	ScopeScheduleSet = "surface.schedule.set"
	// ToolScopePrefix starts every tool scope, as in "tool.email.send".
	ToolScopePrefix = "tool."
	// WebhookScopePrefix starts every webhook and provider callback scope.
	WebhookScopePrefix = "webhook."

	// ToolRetention is the retention of every tool scope. It must outlast the
	// longest Run (max_run_duration is capped at 30 days), or a restarted Run
	// could repeat an effect the journal forgot.
	ToolRetention = 30 * 24 * time.Hour
	// WebhookRetention covers every redelivery a vendor makes.
	WebhookRetention = 24 * time.Hour
	// SavedSearchStartRetention covers the retries of one start.
	SavedSearchStartRetention = 24 * time.Hour

	// SurfaceCreateRetention covers the retries of one keyed create.
	SurfaceCreateRetention = 24 * time.Hour
	// SurfaceCreateLease is the lease of a keyed create.
	SurfaceCreateLease = 30 * time.Second

	// SavedSearchStartLease is the lease of a saved-search start.
	SavedSearchStartLease = 30 * time.Second
	// WebhookLease is the lease of a webhook delivery.
	WebhookLease = 30 * time.Second

	// MaxLease bounds the lease a caller may ask for.
	MaxLease = ToolRetention
)

// Retention returns how long claims in scope are kept. An unknown scope is a
// programming error and returns an error wrapping [ErrUnknownScope].
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

// validScopeName reports whether name is a dotted lower-case identifier.
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
