package admission

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// PolicyPath serves CREATE and UPDATE of the ConfigMaps labelled
// PolicyLabel=true (deploy/webhook/policy.yaml).
const PolicyPath = "/validate-v1-configmap-policy"

// Policy refuses a policy ConfigMap that would break the safety policy, so
// that a bad edit is refused when it is made rather than failing (or, in the
// worker, falling back from) every later execution.
type Policy struct {
	Decoder admission.Decoder
	// Reader lists the other policy ConfigMaps, uncached: the operator's
	// cache keeps no ConfigMap data.
	Reader ctrlclient.Reader
	// Namespace holds the policy ConfigMaps (the worker's action namespace).
	Namespace string
	// CheckSafety is policy.Engine.CheckSafety: compile in the sandbox and
	// evaluate once.
	CheckSafety func(ctx context.Context, modules map[string]string) error
}

// Handle compiles the policy as it would be with this ConfigMap in it.
func (p *Policy) Handle(ctx context.Context, req admission.Request) admission.Response {
	var cm corev1.ConfigMap
	if err := p.Decoder.DecodeRaw(req.Object, &cm); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode object: %w", err))
	}
	if cm.Namespace == "" {
		cm.Namespace = req.Namespace
	}
	if cm.Namespace != p.Namespace || cm.Labels[v1alpha1.PolicyLabel] != "true" {
		return admission.Allowed("")
	}
	var list corev1.ConfigMapList
	if err := p.Reader.List(ctx, &list, ctrlclient.InNamespace(cm.Namespace), ctrlclient.MatchingLabels{v1alpha1.PolicyLabel: "true"}); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("list policy ConfigMaps: %w", err))
	}
	others := map[string]string{}
	for i := range list.Items {
		if list.Items[i].Name != cm.Name {
			addModules(others, &list.Items[i])
		}
	}
	own := addModules(map[string]string{}, &cm)
	v := p.decide(ctx, cm.Namespace+"/"+cm.Name, own, others)
	if !v.Allowed {
		resp := admission.Denied(v.Message)
		resp.Result.Code = v.Code
		resp.Result.Reason = metav1.StatusReasonInvalid
		return resp
	}
	if v.Message != "" {
		return admission.Allowed("").WithWarnings(v.Message)
	}
	return admission.Allowed("")
}

// decide refuses own when it breaks the policy. When the other ConfigMaps
// already break it, own is refused only when it is broken by itself: an
// edit elsewhere must stay possible, the fix of the other one included.
func (p *Policy) decide(ctx context.Context, name string, own, others map[string]string) Verdict {
	if len(own) == 0 {
		return Verdict{Allowed: true}
	}
	all := map[string]string{}
	for _, m := range []map[string]string{others, own} {
		for k, v := range m {
			all[k] = v
		}
	}
	err := p.CheckSafety(ctx, all)
	if err == nil {
		return Verdict{Allowed: true}
	}
	if len(others) > 0 && p.CheckSafety(ctx, others) != nil {
		if ownErr := p.CheckSafety(ctx, own); ownErr != nil {
			err = ownErr
		} else {
			return Verdict{Allowed: true, Message: fmt.Sprintf("the safety policy in %s stays broken by another policy ConfigMap (%s): %v", p.Namespace, moduleNames(others), err)}
		}
	}
	return Verdict{Code: http.StatusUnprocessableEntity, Message: fmt.Sprintf(
		"ConfigMap %s is labelled %s=true, so its *.rego keys are part of the safety policy, and with them the policy is broken: %v", name, v1alpha1.PolicyLabel, err)}
}

// addModules adds cm's *.rego keys to modules, named as the worker names them.
func addModules(modules map[string]string, cm *corev1.ConfigMap) map[string]string {
	for k, src := range cm.Data {
		if strings.HasSuffix(k, ".rego") {
			modules[cm.Name+"/"+k] = src
		}
	}
	return modules
}

func moduleNames(modules map[string]string) string {
	names := make([]string, 0, len(modules))
	for k := range modules {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
