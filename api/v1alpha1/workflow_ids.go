package v1alpha1

import "fmt"

// A run's workflow ID is a function of the object it serves, so that any
// part of Remedy (and a person with the temporal CLI) finds the run from the
// object alone, and a second start for the same object is refused by Temporal.

// ExecutionWorkflowID is the deterministic ID of a KubernetesExecution's workflow.
func ExecutionWorkflowID(namespace, name, uid string) string {
	return fmt.Sprintf("kexec/%s/%s/%s", namespace, name, uid)
}

// RemediationWorkflowID is the deterministic ID of a RemediationRequest's workflow.
func RemediationWorkflowID(namespace, name, uid string) string {
	return fmt.Sprintf("rr/%s/%s/%s", namespace, name, uid)
}

// DriftWorkflowID is the deterministic ID of a drifted parent's workflow.
func DriftWorkflowID(parentUID string) string { return "drift/" + parentUID }

// ReloadWorkflowID is the deterministic ID of one workload's reload workflow.
func ReloadWorkflowID(namespace, kind, workload string) string {
	return fmt.Sprintf("reload/%s/%s/%s", namespace, kind, workload)
}

// AlertWorkflowID is the deterministic ID of the workflow of one alert
// (by Alertmanager's fingerprint) for one rule.
func AlertWorkflowID(namespace, rule, fingerprint string) string {
	return fmt.Sprintf("alert/%s/%s/%s", namespace, rule, fingerprint)
}

// AlertGuardWorkflowID is the namespace's guard: the one workflow that
// grants alert runs their permits (per target, per rule, per namespace).
func AlertGuardWorkflowID(namespace string) string { return "alert-guard/" + namespace }

// ApprovalRequestName is the deterministic name of an execution's RAR.
func ApprovalRequestName(execution string) string { return execution + "-approval" }
