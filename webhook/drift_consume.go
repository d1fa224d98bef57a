package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// ConsumeNow removes a used `once` approval from the parent before the
// change it approves is admitted. The JSON patch tests the annotation
// against the value the decision read, so of several webhook replicas
// racing on one approval exactly one wins; it reports whether this one did.
func (p *ParentUpdater) ConsumeNow(ctx context.Context, ref metav1.OwnerReference, namespace, current string, a kv1.Approval) (bool, error) {
	patch, err := consumePatch(current, a)
	if err != nil {
		return false, err
	}
	ri, err := p.resource(ref, namespace)
	if err != nil {
		return false, err
	}
	_, err = ri.Patch(ctx, ref.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: "remedy-drift-webhook"})
	var status apierrors.APIStatus
	switch {
	case err == nil:
		p.mu.Lock()
		p.consumed[ref.UID] = append(p.consumed[ref.UID], consumedApproval{a, time.Now()})
		p.mu.Unlock()
		return true, nil
	case apierrors.IsNotFound(err), errors.As(err, &status) && status.Status().Code == http.StatusUnprocessableEntity:
		// The test failed: the approval is gone or changed since the cache saw it.
		return false, nil
	}
	return false, fmt.Errorf("remove used approval from %s %s: %w", ref.Kind, ref.Name, err)
}

// consumePatch is the JSON patch that removes a from the approvals value
// current, and only if the annotation still reads current.
func consumePatch(current string, a kv1.Approval) ([]byte, error) {
	approvals, err := kv1.ParseApprovals(current)
	if err != nil {
		return nil, fmt.Errorf("parse approvals: %w", err)
	}
	i := slices.Index(approvals, a)
	if i < 0 {
		return nil, fmt.Errorf("approval %s/%s %s is not in the parent's approvals", a.Kind, a.Name, a.Mode)
	}
	path := "/metadata/annotations/" + strings.ReplaceAll(kv1.AnnotationApprovals, "/", "~1")
	ops := []map[string]any{{"op": "test", "path": path, "value": current}}
	if rest := slices.Delete(approvals, i, i+1); len(rest) > 0 {
		ops = append(ops, map[string]any{"op": "replace", "path": path, "value": kv1.FormatApprovals(rest)})
	} else {
		ops = append(ops, map[string]any{"op": "remove", "path": path})
	}
	return json.Marshal(ops)
}
