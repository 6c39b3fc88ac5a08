package auth

import (
	"sync"
	"time"
)

// tokenCacheSize bounds the verified-token cache; clients reuse tokens,
// so a small cache serves nearly every request.
const tokenCacheSize = 4096

// maxCachedTokenLen keeps one entry small; longer tokens are verified on
// every request.
const maxCachedTokenLen = 2048

// tokenCache maps verified tokens to their principals until a time
// verify chose, saving the parse and signature work. It is emptied when
// full.
type tokenCache struct {
	mu      sync.RWMutex
	entries map[string]cachedToken
}

type cachedToken struct {
	p     Principal
	until time.Time
}

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
