package devenv

import (
	"path/filepath"
)

// auditPolicy logs the metadata of every write except the control plane's
// chatter (leases, events): enough to read the drift webhook's audit
// annotations, small enough to leave on.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    resources:
      - group: coordination.k8s.io
      - group: events.k8s.io
      - group: ""
        resources: [events]
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
`

// configureAuditLog makes kube-apiserver write JSON audit events to
// AuditLogPath before it starts.
func (e *Env) configureAuditLog() error {
	policy := filepath.Join(e.tmpDir, "audit-policy.yaml")
	e.AuditLogPath = filepath.Join(e.tmpDir, "audit.log")
	if err := writeFiles(map[string][]byte{policy: []byte(auditPolicy)}); err != nil {
		return err
	}
	args := e.Kube.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", e.AuditLogPath)
	args.Set("audit-log-format", "json")
	return nil
}
