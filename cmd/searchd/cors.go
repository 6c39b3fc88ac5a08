package main

import (
	"strings"

	"github.com/searchd/searchd/api"
)

// envCORSOrigins lists the origins a browser page may call the API from.
const envCORSOrigins = "SEARCHD_CORS_ORIGINS"

// parseCORSOrigins reads the origins separated by commas: none when the
// value is blank.
func parseCORSOrigins(r *reader, s setting) string {
	var origins []string
	for _, o := range strings.Split(s.value, ",") {
		if o = strings.TrimSpace(o); o != "" {
			origins = append(origins, o)
		}
	}
	if err := api.ValidateCORSOrigins(origins); err != nil {
		return strings.TrimPrefix(err.Error(), "api: Deps.CORSOrigins: ")
	}
	r.cfg.CORSOrigins = origins
	return ""
}
