package auth

import (
	"sync"
	"time"
)

// tokenCacheSize bounds the verified tokens remembered; a client sends the
// same token on every request until it expires, so a small cache serves
// nearly every request.
const tokenCacheSize = 4096

// maxCachedTokenLen keeps one entry small; longer tokens are verified on
// every request.
const maxCachedTokenLen = 2048

// tokenCache remembers tokens that verified, so a repeat skips the base64,
// JSON and signature work (about a tenth of a replay's CPU). Only a token
// that passed verification is ever stored, until a time verify chose (its
// exp for an HS256 token, whose secret cannot change while the server
// runs; a minute at most for a provider's), checked on every use. When
// full it is emptied: simpler than an LRU and as good for a working set
// that fits.
type tokenCache struct {
	mu      sync.RWMutex
	entries map[string]cachedToken
}

type cachedToken struct {
	p     Principal
	until time.Time
}

// get returns the principal of raw when raw verified before and its entry
// has not run out at now.
func (c *tokenCache) get(raw string, now time.Time) (Principal, bool) {
	c.mu.RLock()
	e, ok := c.entries[raw]
	c.mu.RUnlock()
	if !ok || !now.Before(e.until) {
		return Principal{}, false
	}
	return e.p, true
}

func (c *tokenCache) put(raw string, p Principal, until, now time.Time) {
	if len(raw) > maxCachedTokenLen || !now.Before(until) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= tokenCacheSize {
		clear(c.entries)
	}
	c.entries[raw] = cachedToken{p: p, until: until}
}
