package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/searchd/searchd/api"
)

// EnvCORSOrigins lists the origins a browser page may call the API from.
const EnvCORSOrigins = "SEARCHD_CORS_ORIGINS"

var optCORSOrigins = option{"cors-origins", EnvCORSOrigins, "none",
	"comma-separated origins a browser page may call the API from (CORS), such as " +
		"http://127.0.0.1:5173,https://app.example.com; * allows every origin; none (the default) allows no other origin"}

// readCORSSetting reads --cors-origins into cfg and returns what is wrong
// with it.
func readCORSSetting(fs *flag.FlagSet, getenv func(string) string, cfg *serverConfig) []string {
	s := lookup(fs, "cors-origins", EnvCORSOrigins, getenv)
	if strings.TrimSpace(s.value) == "" {
		return nil
	}
	var origins []string
	for _, o := range strings.Split(s.value, ",") {
		if o = strings.TrimSpace(o); o != "" {
			origins = append(origins, o)
		}
	}
	if err := api.ValidateCORSOrigins(origins); err != nil {
		return []string{fmt.Sprintf("%s: %s", s.name, strings.TrimPrefix(err.Error(), "api: Deps.CORSOrigins: "))}
	}
	cfg.CORSOrigins = origins
	return nil
}
