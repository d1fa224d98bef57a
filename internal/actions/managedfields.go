package actions

// Decoding and walking managedFields (fieldsV1) under a scope.
import (
	"bytes"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

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
