package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
)

// Labels and annotations Remedy reads or writes on objects it does not own.
// They are part of its API: a user sets the labels, and reads the annotations.

// PolicyLabel marks ConfigMaps whose *.rego keys make up the safety policy.
const PolicyLabel = "remedy.dev/policy"

// ProtectedLabel marks namespaces no action may touch.
const ProtectedLabel = "remedy.dev/protected"

// ActionLabel marks the action ServiceAccounts (deploy/actions).
const ActionLabel = "remedy.dev/action"

// Annotations of the reload contract (docs/reload.md).
const (
	// ConfigHashAnnotationPrefix + ConfigMap name holds the sha256 of the
	// ConfigMap's data: on the pod template it is what the pods run with, on
	// the workload's metadata it is the baseline the operator compares with.
	ConfigHashAnnotationPrefix = "remedy.dev/config-hash-"
	// LastReloadAnnotation on the workload's metadata is the restartedAt of the last reload.
	LastReloadAnnotation = "remedy.dev/last-reload"
)

// ConfigHashAnnotation is the annotation key for one ConfigMap. Names too
// long for an annotation's 63-character name part are shortened with a
// digest of the full name, so distinct ConfigMaps keep distinct keys.
func ConfigHashAnnotation(configMap string) string {
	const room = 63 - len("config-hash-")
	if len(configMap) <= room {
		return ConfigHashAnnotationPrefix + configMap
	}
	sum := sha256.Sum256([]byte(configMap))
	return ConfigHashAnnotationPrefix + configMap[:room-9] + "-" + hex.EncodeToString(sum[:])[:8]
}

// DeclinedAnnotation on a workload's metadata records ConfigMap data whose
// restart was rejected or expired, as JSON (ReloadDeclined). The operator
// does not signal that data again; any newer data is asked about afresh.
const DeclinedAnnotation = "remedy.dev/reload-declined"

// RolloutUndoneAtAnnotation on a Deployment's metadata is the run token of
// the rollout-undo that last wrote it, so a retried undo recognises its own
// write instead of undoing again (which would restore the bad revision).
const RolloutUndoneAtAnnotation = "remedy.dev/rollout-undone-at"

// RolloutRestoredAnnotation on a Deployment's metadata is the
// pod-template-hash of the ReplicaSet a rollout-undo restored: while the
// Deployment still runs it, another undo would bring back the revision the
// first one undid, so rollout-undo refuses (a person must look).
const RolloutRestoredAnnotation = "remedy.dev/rollout-restored"

// RestartedAtAnnotation is the pod-template annotation `kubectl rollout restart` uses too.
const RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"
