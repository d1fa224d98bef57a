// Package remedy carries the VERSION file into every build of Remedy, so
// that `go build`, `go test`, `make image` and `make release` all stamp the
// same version without flags (internal/release reads it).
package remedy

import _ "embed"

// VERSION is the file's content: the release this tree is, or is becoming.
//
//go:embed VERSION
var VERSION string
