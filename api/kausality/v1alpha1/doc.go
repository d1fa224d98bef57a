// Package v1alpha1 is kausality's annotation wire format (docs/drift.md): the
// annotation keys, their value types and strict parsers and formatters.
//
// The webhook reads these annotations and the Temporal worker writes
// approvals and rejections onto parents, so this package does no I/O and
// knows nothing of clients. Parsers return errors that name the annotation
// and what is wrong, because the webhook hands them to people as 400
// messages. An empty value always means "none" and is never an error.
//
// It also holds the cluster-scoped Kausality policy resource (group
// kausality.io, as kausality's own), which says which kinds the drift
// webhook watches, in which mode, and how their parents count as initialized.
// +groupName=kausality.io
package v1alpha1
