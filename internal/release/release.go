// Package release names the image this tree ships as: `make image` tags it
// so, and deploy/ pins it (a test keeps every reference equal).
package release

// Repository is where the image is published.
const Repository = "ghcr.io/remedy-dev/remedy"

// Version is the image tag of this tree; bump it with deploy/ on a release.
const Version = "v0.1.0"

// Image is the pinned reference, never :latest.
func Image() string { return Repository + ":" + Version }
