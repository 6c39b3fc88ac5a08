package auth

import (
	"encoding/json"
	"maps"
)

// ClaimsJSON returns base with the members of extra replacing or adding to
// it (a nil value removes the member), as JSON.
func ClaimsJSON(base, extra map[string]any) string {
	c := maps.Clone(base)
	for k, v := range extra {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	b, _ := json.Marshal(c)
	return string(b)
}
