package gate

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertrule"
)

// PodWorkload resolves the Pod ns/name to the workload that controls it:
// through its ReplicaSet to the Deployment, or the StatefulSet, DaemonSet
// or Job that controls it directly (a ReplicaSet nothing controls is the
// workload itself). ok is false for a Pod nothing controls. The alert
// guard keys on it (a replacement Pod is the same target), and templates
// see it as .Workload.
func PodWorkload(ctx context.Context, r ctrlclient.Reader, ns, name string) (w alertrule.Workload, ok bool, err error) {
	var p corev1.Pod
	if err := r.Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		return w, false, fmt.Errorf("read Pod %s/%s: %w", ns, name, err)
	}
	ref := metav1.GetControllerOf(&p)
	if ref == nil {
		return w, false, nil
	}
	if ref.Kind == "ReplicaSet" {
		var rs appsv1.ReplicaSet
		if err := r.Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: ref.Name}, &rs); err != nil {
			return w, false, fmt.Errorf("read ReplicaSet %s/%s: %w", ns, ref.Name, err)
		}
		if up := metav1.GetControllerOf(&rs); up != nil {
			ref = up
		}
	}
	return alertrule.Workload{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name}, true, nil
}

// AlertWorkload is .Workload for alert a of a rule whose spec uses it: the
// workload that controls the Pod of a's pod label. When there is none it
// returns nil and why, for the template's error (which Pod, what is
// missing); a failed read is returned, to be retried. A spec that does not
// use .Workload reads nothing.
func AlertWorkload(ctx context.Context, r ctrlclient.Reader, ns string, spec *v1alpha1.RemediationRuleSpec, a alertrule.Alert) (*alertrule.Workload, string, error) {
	if !alertrule.UsesWorkload(spec) {
		return nil, "", nil
	}
	pod := a.Labels[alertrule.PodLabel]
	if pod == "" {
		return nil, fmt.Sprintf("the alert has no %q label to find its workload by", alertrule.PodLabel), nil
	}
	w, ok, err := PodWorkload(ctx, r, ns, pod)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("the alert's Pod %s/%s or its ReplicaSet no longer exists (%v)", ns, pod, err), nil
	case err != nil:
		return nil, "", fail.Classify(v1alpha1.ReasonNotFound, err)
	case !ok:
		return nil, fmt.Sprintf("the alert's Pod %s/%s has no controlling workload (a bare Pod)", ns, pod), nil
	}
	return &w, "", nil
}
