package actions

import (
	"context"
	"regexp"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// workloadKinds are the kinds with a pod template, whose init containers the
// ownership actions work on.
var workloadKinds = []string{"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"}

// workloadRules is what a forced server-side apply to a workload needs: it is
// a patch, and the migration reads the object again afterwards.
func workloadRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets", "replicasets"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"get", "patch"}},
	}
}

// scopePattern keeps the scope inside spec: status belongs to controllers and
// metadata to everyone, so taking either over would break other writers.
var scopePattern = regexp.MustCompile(`^spec(\.[a-zA-Z][a-zA-Z0-9]*)+$`)

func validateOwnershipParams(p v1alpha1.ActionParameters) error {
	if p.Scope != "" && !scopePattern.MatchString(p.Scope) {
		return invalid("parameters.scope must be a dotted field path under spec, like spec.template.spec.initContainers; got %q", p.Scope)
	}
	if len(p.FieldManager) > 128 || (p.FieldManager != "" && strings.TrimSpace(p.FieldManager) != p.FieldManager) {
		return invalid("parameters.fieldManager must be at most 128 characters without surrounding spaces")
	}
	return nil
}

type migrateOwnership struct{}

func init() { register(migrateOwnership{}) }

func (migrateOwnership) Name() string               { return "migrate-field-ownership" }
func (migrateOwnership) Kinds() []string            { return workloadKinds }
func (migrateOwnership) Rules() []rbacv1.PolicyRule { return workloadRules() }

func (migrateOwnership) Validate(req Request) error { return validateOwnershipParams(req.Params) }

func (migrateOwnership) Plan(obj *unstructured.Unstructured, req Request) (Plan, error) {
	manager := managerOrDefault(req.Params.FieldManager)
	o, err := CheckOwnership(obj, ScopePath(obj.GetKind(), req.Params.Scope), manager)
	if err != nil {
		return Plan{}, err
	}
	after := o.Summary()
	if o.NeedsMigration() {
		after = Ownership{Owners: []string{manager}}.Summary()
	}
	return Plan{
		Change: change(obj, "ownership migrated", o.Summary(), after),
		Rollback: v1alpha1.RollbackInformation{
			Reason: "values do not change, and the displaced managers' ownership can only come back by those managers writing the fields again",
		},
		NoOp: !o.NeedsMigration(),
	}, nil
}

// Apply migrates, reporting the owners the API server actually recorded
// (from the dry-run result when dry-running).
func (migrateOwnership) Apply(ctx context.Context, ri dynamic.ResourceInterface, obj *unstructured.Unstructured, plan Plan, req Request, dryRun bool) (Plan, error) {
	_, rep, err := MigrateOwnership(ctx, ri, obj, req.Params.Scope, req.Params.FieldManager, dryRun)
	if err != nil {
		return plan, err
	}
	plan.Change.After = rep.After.Summary()
	return plan, nil
}
