package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/remedy-dev/remedy/internal/metrics"
)

// Ownership is who owns the fields under one scope of an object.
type Ownership struct {
	// Exists is false when the object has nothing at the scope.
	Exists bool `json:"exists"`
	// Owners are the managers owning any field under the scope, sorted. The
	// non-apply entries of the migrating manager itself are named
	// "<manager> (Update)": an apply cannot remove what they own.
	Owners []string `json:"owners,omitempty"`
	// Others are the Owners other than the migrating manager's apply entry.
	Others []string `json:"others,omitempty"`
	// Complete is true when the manager's apply entry alone owns every item
	// and field at the scope, so an apply that omits one really removes it.
	Complete bool `json:"complete"`
}

// NeedsMigration is true when there is something at the scope that the
// manager does not solely own.
func (o Ownership) NeedsMigration() bool { return o.Exists && !o.Complete }

// Summary reads "owners: Go-http-client, remedy".
func (o Ownership) Summary() string {
	if len(o.Owners) == 0 {
		return "owners: none"
	}
	return "owners: " + strings.Join(o.Owners, ", ")
}

// MigrationReport is what MigrateOwnership found and did.
type MigrationReport struct {
	Before Ownership `json:"before"`
	After  Ownership `json:"after"`
	// Displaced are the managers that lost ownership under the scope.
	Displaced []string `json:"displaced,omitempty"`
	// Wrote is true when a forced apply was sent (a dry-run one included).
	Wrote bool `json:"wrote"`
}

// ScopePath is the scope as a field path: scope when given, else the
// initContainers of the kind's pod template.
func ScopePath(kind, scope string) []string {
	if scope != "" {
		return strings.Split(scope, ".")
	}
	return append(podSpecPath(kind), "initContainers")
}

func managerOrDefault(m string) string {
	if m == "" {
		return FieldManager
	}
	return m
}

// CheckOwnership decodes managedFields to find who owns the fields under scope.
func CheckOwnership(obj *unstructured.Unstructured, scope []string, manager string) (Ownership, error) {
	var o Ownership
	val, found, err := unstructured.NestedFieldNoCopy(obj.Object, scope...)
	if err != nil {
		return o, fmt.Errorf("read %s: %w", strings.Join(scope, "."), err)
	}
	o.Exists = found && !isEmpty(val)
	owners, others := map[string]bool{}, map[string]bool{}
	var mine []scopeSet
	for _, e := range obj.GetManagedFields() {
		set, err := decodeFields(e)
		if err != nil {
			return o, err
		}
		sub, ok := under(set, scope)
		if !ok {
			continue
		}
		name := ownerName(e, manager)
		owners[name] = true
		if name == manager {
			mine = append(mine, sub)
		} else {
			others[name] = true
		}
	}
	o.Owners, o.Others = sortedKeys(owners), sortedKeys(others)
	o.Complete = o.Exists && len(o.Others) == 0 && len(mine) == 1 && mine[0].covers(val)
	return o, nil
}

// MigrateOwnership gives manager sole ownership of scope with a forced
// server-side apply of the scope's live value (see takeOwnership), so that a
// later apply without part of it removes that part instead of leaving what
// other managers own.
// It writes nothing when the manager already owns all of it or the scope is
// absent. It returns the object after the migration (the dry-run result when
// dryRun) and what it did. API errors are returned unwrapped.
func MigrateOwnership(ctx context.Context, ri dynamic.ResourceInterface, live *unstructured.Unstructured, scope, manager string, dryRun bool) (*unstructured.Unstructured, MigrationReport, error) {
	path, manager := ScopePath(live.GetKind(), scope), managerOrDefault(manager)
	var rep MigrationReport
	var err error
	if rep.Before, err = CheckOwnership(live, path, manager); err != nil {
		record(dryRun, metrics.MigrationFailure)
		return nil, rep, err
	}
	rep.After = rep.Before
	if !rep.Before.NeedsMigration() {
		record(dryRun, metrics.MigrationSkipped)
		return live, rep, nil
	}
	start := time.Now()
	out, err := takeOwnership(ctx, ri, live, path, manager, dryRun)
	rep.Wrote = err == nil
	if err == nil && !dryRun {
		// The apply's response is the object at that write; re-read so the
		// caller plans its next write on the latest resourceVersion.
		out, err = ri.Get(ctx, live.GetName(), metav1.GetOptions{})
	}
	if err == nil {
		rep.After, err = CheckOwnership(out, path, manager)
	}
	if !dryRun {
		metrics.OwnershipMigrationDuration.Observe(time.Since(start).Seconds())
		for _, m := range rep.Before.Others {
			metrics.SplitOwnershipDetected.WithLabelValues(live.GetKind(), m).Inc()
		}
	}
	if err != nil {
		record(dryRun, metrics.MigrationFailure)
		return nil, rep, err
	}
	record(dryRun, metrics.MigrationSuccess)
	rep.Displaced = rep.Before.Others
	return out, rep, nil
}

// record counts real migrations only: a run dry-runs the same object it then
// applies, so counting both would double every outcome.
func record(dryRun bool, status string) {
	if !dryRun {
		metrics.OwnershipMigrations.WithLabelValues(status).Inc()
	}
}

// takeOwnership force-applies the scope's live value, so the manager owns
// every field there as the API server's schema sees it. Applying unchanged
// values only makes the other managers co-owners, and a co-owner keeps a
// field alive when the manager later omits it, so their claims under the
// scope are then dropped from managedFields directly (as client-go's
// csaupgrade moves client-side-apply ownership).
func takeOwnership(ctx context.Context, ri dynamic.ResourceInterface, live *unstructured.Unstructured, path []string, manager string, dryRun bool) (*unstructured.Unstructured, error) {
	val, _, err := unstructured.NestedFieldCopy(live.Object, path...)
	if err != nil {
		return nil, fmt.Errorf("read scope: %w", err)
	}
	applied, err := ApplyAs(ctx, ri, live, manager, path, val, true, dryRun)
	if err != nil {
		return nil, err
	}
	entries, changed, err := WithoutOthersUnder(applied.GetManagedFields(), path, manager)
	if err != nil || !changed {
		return applied, err
	}
	rv := applied.GetResourceVersion()
	if dryRun {
		rv = live.GetResourceVersion()
	}
	// A merge patch replaces the whole list; the resourceVersion makes a
	// concurrent change conflict rather than lose its managedFields.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": rv, "managedFields": entries}})
	if err != nil {
		return nil, fmt.Errorf("encode managedFields patch: %w", err)
	}
	return ri.Patch(ctx, live.GetName(), types.MergePatchType, patch, patchOptions(manager, nil, dryRun))
}

// WithoutOthersUnder removes everything under path from the entries of every
// owner but manager's apply entry, dropping entries left empty. changed says
// whether any entry lost a field.
func WithoutOthersUnder(entries []metav1.ManagedFieldsEntry, path []string, manager string) (out []metav1.ManagedFieldsEntry, changed bool, err error) {
	parts := make([]any, len(path))
	for i, p := range path {
		parts[i] = p
	}
	scope := fieldpath.NewSet(fieldpath.MakePathOrDie(parts...))
	for _, e := range entries {
		set, err := decodeFields(e)
		if err != nil {
			return nil, false, err
		}
		rest := set.RecursiveDifference(scope)
		if ownerName(e, manager) == manager || rest.Equals(set) {
			out = append(out, e)
			continue
		}
		changed = true
		if rest.Empty() {
			continue
		}
		raw, err := rest.ToJSON()
		if err != nil {
			return nil, false, fmt.Errorf("encode managedFields of %s: %w", e.Manager, err)
		}
		e.FieldsV1 = &metav1.FieldsV1{Raw: raw}
		out = append(out, e)
	}
	return out, changed, nil
}

func patchOptions(manager string, force *bool, dryRun bool) metav1.PatchOptions {
	opts := metav1.PatchOptions{FieldManager: manager, Force: force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return opts
}

// ApplyAs server-side applies, as manager, scope set to val together with
// everything else manager's apply entry owns (an apply gives up, and so
// deletes, whatever it omits). The body pins the live resourceVersion, so a
// concurrent change conflicts instead of being overwritten.
func ApplyAs(ctx context.Context, ri dynamic.ResourceInterface, live *unstructured.Unstructured, manager string, scope []string, val any, force, dryRun bool) (*unstructured.Unstructured, error) {
	body := map[string]any{}
	for _, e := range live.GetManagedFields() {
		if ownerName(e, manager) != manager {
			continue
		}
		set, err := decodeFields(e)
		if err != nil {
			return nil, err
		}
		body, _ = extract(live.Object, set).(map[string]any)
	}
	if err := unstructured.SetNestedField(body, val, scope...); err != nil {
		return nil, fmt.Errorf("build apply body: %w", err)
	}
	md, _ := body["metadata"].(map[string]any) // keeps labels or annotations manager owns
	if md == nil {
		md = map[string]any{}
	}
	md["name"], md["namespace"], md["resourceVersion"] = live.GetName(), live.GetNamespace(), live.GetResourceVersion()
	body["apiVersion"], body["kind"], body["metadata"] = live.GetAPIVersion(), live.GetKind(), md
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode apply body: %w", err)
	}
	return ri.Patch(ctx, live.GetName(), types.ApplyPatchType, raw, patchOptions(manager, &force, dryRun))
}
