package api

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Headers of conditional requests (RFC 9110 §13).
const (
	// HeaderETag carries a saved search's entity tag: its version, as a
	// strong tag ("3").
	HeaderETag = "ETag"
	// HeaderIfMatch makes a change conditional on the version it was
	// made from: PATCH, PUT .../baseline and DELETE of a saved search.
	HeaderIfMatch = "If-Match"
)

// etag returns version as a strong entity tag.
func etag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

// ifMatch returns h's If-Match precondition, or nil. "*" matches any
// version; comparison is strong (RFC 9110 §13.1.1), so weak tags never
// match.
func ifMatch(h http.Header) func(int64) bool { return ifMatchOr(h, nil) }

// ifMatchOr is ifMatch answering star for "*".
func ifMatchOr(h http.Header, star func(int64) bool) func(int64) bool {
	values := h.Values(HeaderIfMatch)
	if len(values) == 0 {
		return nil
	}
	var tags []string
	for _, v := range values {
		for _, t := range splitQuoted(v, ',') {
			if t = strings.TrimSpace(t); t != "" {
				tags = append(tags, t)
			}
		}
	}
	if slices.Contains(tags, "*") {
		return star
	}
	return func(version int64) bool { return slices.Contains(tags, etag(version)) }
}
