// Package searchd holds what belongs to the repository as a whole: its
// release version, read from the VERSION file, and the tests that keep its
// documents true (the README's curl tour, every relative link in the
// Markdown files).
package searchd

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var version string

// Version is the release this source tree is, as its VERSION file says:
// a Semantic Versioning number without a leading v ("0.7.0"), the newest
// version CHANGELOG.md describes. `searchd version` prints it, the
// searchd_build_info metric carries it, and the container image's
// org.opencontainers.image.version label names it.
func Version() string { return strings.TrimSpace(version) }
