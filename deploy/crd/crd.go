// Package crd holds Remedy's generated CustomResourceDefinitions, so the
// admission webhook can check an object against the very schema and CEL
// rules the API server applies (operator/admission/schema.go).
package crd

import "embed"

// FS holds the CRDs controller-gen writes here (make manifests).
//
//go:embed *.yaml
var FS embed.FS
