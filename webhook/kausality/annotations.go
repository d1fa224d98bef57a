package kausality

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// annotations computes the kausality annotations the object ends with
// (annotation protection, docs/drift.md):
//   - CREATE: values copied from the parent and system values are wiped,
//     then updaters and trace are computed fresh.
//   - The controller gets every kausality annotation back from OldObject
//     (it syncs stale copies from the parent); on a spec change trace and
//     updaters are then recomputed.
//   - Anyone else keeps the system annotations from OldObject and may edit
//     the user ones; a spec change starts a new origin.
//
// User annotation values that are new are checked: a person gets a 400
// naming the annotation; a controller cannot fix what it copies, so a bad
// value from it is dropped with a warning.
func (d *decider) annotations(extend bool, label map[string]string) (map[string]string, error) {
	var want map[string]string
	switch {
	case d.req.Operation == Create:
		want = d.created()
	case d.role == roleController:
		want = maps.Clone(d.old)
	default:
		want = map[string]string{}
		for k, v := range d.old {
			if kv1.IsSystem(k) {
				want[k] = v
			}
		}
		for k, v := range d.cur {
			if !kv1.IsSystem(k) {
				want[k] = v
			}
		}
	}

	if err := d.validate(want); err != nil {
		return nil, err
	}
	if !d.spec {
		return want, nil
	}
	updaters, _ := kv1.AddUserHash(kv1.ParseUserHashes(want[kv1.AnnotationUpdaters]), d.userHash)
	want[kv1.AnnotationUpdaters] = kv1.FormatUserHashes(updaters)
	want[kv1.AnnotationTrace] = kv1.FormatTrace(d.trace(want, extend, label))
	return want, nil
}

// created is what a CREATE keeps of the object's kausality annotations:
// neither system values nor values equal to the parent's (the controller
// copied them from its own object).
func (d *decider) created() map[string]string {
	want := map[string]string{}
	for k, v := range d.cur {
		if kv1.IsSystem(k) {
			continue
		}
		if p := d.req.Parent; p != nil {
			if pv, ok := p.Annotations[k]; ok && pv == v {
				continue
			}
		}
		want[k] = v
	}
	return want
}

// validate checks the user annotation values in want that OldObject did
// not have.
func (d *decider) validate(want map[string]string) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(want)) {
		v := want[k]
		if kv1.IsSystem(k) {
			continue
		}
		if ov, ok := d.old[k]; ok && ov == v {
			continue
		}
		if err := validateValue(k, v); err != nil {
			if d.role == roleController {
				delete(want, k)
				d.warnings = append(d.warnings, fmt.Sprintf("kausality: dropped %s: %v", k, err))
				continue
			}
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New("invalid annotation: " + strings.Join(msgs, "; "))
}

// validateValue parses one user annotation; the parsers' errors name it.
func validateValue(key, v string) error {
	var err error
	switch {
	case key == kv1.AnnotationApprovals:
		_, err = kv1.ParseApprovals(v)
	case key == kv1.AnnotationRejections:
		_, err = kv1.ParseRejections(v)
	case key == kv1.AnnotationFreeze:
		_, err = kv1.ParseFreeze(v)
	case key == kv1.AnnotationSnooze:
		_, err = kv1.ParseSnooze(v)
	case key == kv1.AnnotationMode:
		_, err = kv1.ParseMode(v)
	case strings.HasPrefix(key, kv1.TraceLabelPrefix):
		_, err = kv1.ParseTraceLabel(key, v)
	}
	return err
}

// trace is the object's new trace: the parent's chain (or a hop describing
// the parent when it has none) plus this change, or this change alone for
// a new origin.
func (d *decider) trace(want map[string]string, extend bool, label map[string]string) kv1.Trace {
	labels := map[string]string{}
	for k, v := range want {
		if key, err := kv1.ParseTraceLabel(k, v); err == nil && key != "" {
			labels[key] = v
		}
	}
	maps.Copy(labels, label)
	if len(labels) == 0 {
		labels = nil
	}
	now := d.req.Now.UTC().Truncate(time.Second)
	name := d.obj.GetName()
	if name == "" {
		name = d.obj.GetGenerateName()
	}
	hop := kv1.Hop{APIVersion: d.obj.GetAPIVersion(), Kind: d.obj.GetKind(), Name: name,
		Generation: d.obj.GetGeneration(), User: d.req.User.Name, Timestamp: now, Labels: labels}
	p := d.req.Parent
	if !extend || p == nil {
		return kv1.Trace{hop}
	}
	base, err := kv1.ParseTrace(p.Annotations[kv1.AnnotationTrace])
	if err != nil || len(base) == 0 {
		base = kv1.Trace{{APIVersion: p.APIVersion, Kind: p.Kind, Name: p.Name, Generation: p.Generation, Timestamp: now}}
	}
	return base.Extend(hop)
}

// changes is the patch from cur to want: new values, and nil for removals.
func changes(want, cur map[string]string) map[string]*string {
	out := map[string]*string{}
	for k, v := range want {
		if cv, ok := cur[k]; !ok || cv != v {
			out[k] = &v
		}
	}
	for k := range cur {
		if _, ok := want[k]; !ok {
			out[k] = nil
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
