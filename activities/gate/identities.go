package gate

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// Dedicated ServiceAccounts, beside the remedy-action-<action> accounts, that
// the worker impersonates for the writes that are not actions. The worker's
// own role cannot write workloads at all.
const (
	// ReloadServiceAccount restarts workloads for ConfigReloadPolicies and records their Events.
	ReloadServiceAccount = "remedy-reload"
	// DriftServiceAccount writes drift approvals and rejections onto parents.
	DriftServiceAccount = "remedy-drift"
)

// Identity is one dedicated ServiceAccount and exactly the rules its writes
// need; hack/genactions writes its ServiceAccount, ClusterRole and binding.
type Identity struct {
	Name  string
	Rules []rbacv1.PolicyRule
}

// Identities lists the dedicated accounts. Their rules sit here, beside the
// code that uses them: the reload and drift integration tests run the worker
// as its own ServiceAccount, so a missing rule fails them.
func Identities() []Identity {
	return []Identity{
		{Name: ReloadServiceAccount, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets"}, Verbs: []string{"get", "patch"}},
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create"}},
		}},
		{Name: DriftServiceAccount, Rules: []rbacv1.PolicyRule{
			// The parents kausality tracks: their annotations carry approvals and rejections.
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets", "daemonsets"}, Verbs: []string{"get", "patch"}},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "patch"}},
		}},
	}
}
