package actions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

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
		record(dryRun, metrics.MigrationFailed)
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
		record(dryRun, metrics.MigrationFailed)
		return nil, rep, err
	}
	record(dryRun, metrics.MigrationMigrated)
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

// ownerName names a managedFields entry. Only manager's apply entry counts as
// manager: its update entries are a separate owner that its applies never release.
func ownerName(e metav1.ManagedFieldsEntry, manager string) string {
	if e.Manager == manager && (e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "") {
		return fmt.Sprintf("%s (%s)", e.Manager, e.Operation)
	}
	return e.Manager
}

func decodeFields(e metav1.ManagedFieldsEntry) (*fieldpath.Set, error) {
	set := &fieldpath.Set{}
	if e.FieldsV1 == nil {
		return set, nil
	}
	if err := set.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
		return nil, fmt.Errorf("decode managedFields of %s: %w", e.Manager, err)
	}
	return set, nil
}

// scopeSet is one manager's fields under a scope: all of it when the manager
// owns the scope as a leaf (an atomic value), else the fields in set.
type scopeSet struct {
	all bool
	set *fieldpath.Set
}

// under returns the part of set at path, and whether there is any.
func under(set *fieldpath.Set, path []string) (scopeSet, bool) {
	for _, p := range path[:len(path)-1] {
		var ok bool
		if set, ok = set.Children.Get(fieldpath.FieldNameElement(p)); !ok {
			return scopeSet{}, false
		}
	}
	last := fieldpath.FieldNameElement(path[len(path)-1])
	child, hasChildren := set.Children.Get(last)
	if !hasChildren || child.Empty() {
		return scopeSet{all: true}, set.Members.Has(last)
	}
	return scopeSet{set: child}, true
}

// covers judges ownership one level below the scope's items: each named item
// itself and each of its fields. Deeper, owning anything of a field counts,
// since lists inside containers are keyed by fields this code does not know.
func (s scopeSet) covers(val any) bool {
	if s.all {
		return true
	}
	switch v := val.(type) {
	case []any:
		for _, item := range v {
			m, _ := item.(map[string]any)
			name, ok := m["name"].(string)
			if !ok {
				return !s.set.Empty()
			}
			pe := fieldpath.KeyElementByFields("name", name)
			if !s.set.Members.Has(pe) {
				return false
			}
			fields, granular := s.set.Children.Get(pe)
			for k := range m {
				if granular && !ownsAny(fields, fieldpath.FieldNameElement(k)) {
					return false
				}
			}
		}
		return true
	case map[string]any:
		for k := range v {
			if !ownsAny(s.set, fieldpath.FieldNameElement(k)) {
				return false
			}
		}
		return true
	}
	return false
}

func ownsAny(s *fieldpath.Set, pe fieldpath.PathElement) bool {
	c, ok := s.Children.Get(pe)
	return s.Members.Has(pe) || (ok && !c.Empty())
}

// extract returns the part of v that set covers, with list items' keys, so
// re-applying it keeps exactly that ownership.
func extract(v any, set *fieldpath.Set) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, cv := range v {
			pe := fieldpath.FieldNameElement(k)
			if c, ok := set.Children.Get(pe); ok {
				out[k] = extract(cv, c)
			} else if set.Members.Has(pe) {
				out[k] = cv
			}
		}
		return out
	case []any:
		out := []any{}
		for i, item := range v {
			pe, ok := elementOf(set, item, i)
			if !ok {
				continue
			}
			c, hasChildren := set.Children.Get(pe)
			m, isMap := item.(map[string]any)
			if !hasChildren || !isMap {
				out = append(out, item)
				continue
			}
			part := extract(m, c).(map[string]any)
			if pe.Key != nil {
				for _, f := range *pe.Key {
					part[f.Name] = m[f.Name]
				}
			}
			out = append(out, part)
		}
		return out
	}
	return v
}

// elementOf finds the path element in set that selects item.
func elementOf(set *fieldpath.Set, item any, index int) (fieldpath.PathElement, bool) {
	var found fieldpath.PathElement
	ok := false
	match := func(pe fieldpath.PathElement) {
		if !ok && selects(pe, item, index) {
			found, ok = pe, true
		}
	}
	set.Members.Iterate(match)
	set.Children.Iterate(match)
	return found, ok
}

func selects(pe fieldpath.PathElement, item any, index int) bool {
	switch {
	case pe.Index != nil:
		return *pe.Index == index
	case pe.Value != nil:
		return value.Equals(*pe.Value, value.NewValueInterface(item))
	case pe.Key != nil:
		m, ok := item.(map[string]any)
		for _, f := range *pe.Key {
			fv, has := m[f.Name]
			ok = ok && has && value.Equals(f.Value, value.NewValueInterface(fv))
		}
		return ok
	}
	return false
}

func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
