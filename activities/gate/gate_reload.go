package gate

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/reloadrule"
)

// The gate re-reads, as the worker, the policies, ConfigMaps, workloads and
// approval requests behind a reload restart.
// +kubebuilder:rbac:groups=remedy.dev,resources=configreloadpolicies,verbs=get;list

// ReloadEvidence is what a reload write tells the gate; the gate believes
// none of it before it re-reads it.
type ReloadEvidence struct {
	// Changes are the ConfigMap data hashes the write records on the workload.
	Changes []reloadrule.ConfigChange `json:"changes"`
	// Rolls is true when the write changes the pod template (set by the
	// activity from the live workload): only a rolling write needs approval.
	Rolls bool `json:"rolls,omitempty"`
	// ApprovalRequest names the RemediationApprovalRequest a person decided
	// on for these changes, when one was asked.
	ApprovalRequest string `json:"approvalRequest,omitempty"`
	// Decline marks the write recording a rejected or expired restart: its
	// request must carry that decision, and its hashes may be older than the
	// ConfigMaps' data.
	Decline bool `json:"decline,omitempty"`
}

// reloadSelection is a workload as the gate re-read it, with every
// ConfigReloadPolicy whose workloadSelector matches its live labels.
type reloadSelection struct {
	namespace, kind, name string
	labels                map[string]string
	policies              []v1alpha1.ConfigReloadPolicy
}

// workloadObjects are the typed workloads the gate reads, by kind.
var workloadObjects = map[string]func() ctrlclient.Object{
	"Deployment":  func() ctrlclient.Object { return &appsv1.Deployment{} },
	"StatefulSet": func() ctrlclient.Object { return &appsv1.StatefulSet{} },
	"DaemonSet":   func() ctrlclient.Object { return &appsv1.DaemonSet{} },
}

// selectReload reads the live workload and the policies in its namespace
// that select it; none is a permanent SubjectMismatch: a reload restart is
// made only for a policy.
func (g *Gate) selectReload(ctx context.Context, namespace, kind, name string) (reloadSelection, error) {
	newObj, ok := workloadObjects[kind]
	if !ok {
		return reloadSelection{}, fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf("kind %q cannot be restarted", kind))
	}
	obj := newObj()
	if err := g.Subjects.Get(ctx, ctrlclient.ObjectKey{Namespace: namespace, Name: name}, obj); apierrors.IsNotFound(err) {
		return reloadSelection{}, fail.Permanent(v1alpha1.ReasonWorkloadGone, fmt.Errorf("get %s %s/%s: %w", kind, namespace, name, err))
	} else if err != nil {
		return reloadSelection{}, fmt.Errorf("get %s %s/%s: %w", kind, namespace, name, err)
	}
	var list v1alpha1.ConfigReloadPolicyList
	if err := g.Subjects.List(ctx, &list, ctrlclient.InNamespace(namespace)); err != nil {
		return reloadSelection{}, fmt.Errorf("list ConfigReloadPolicies in %s: %w", namespace, err)
	}
	s := reloadSelection{namespace: namespace, kind: kind, name: name, labels: obj.GetLabels()}
	s.policies = selecting(list.Items, s.labels)
	if len(s.policies) == 0 {
		return reloadSelection{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf(
			"no ConfigReloadPolicy in %s selects %s %s: a reload restart is made only for a policy that selects the workload", namespace, kind, name))
	}
	return s, nil
}

// selecting keeps the policies that select a workload with these labels, by name.
func selecting(policies []v1alpha1.ConfigReloadPolicy, workload map[string]string) []v1alpha1.ConfigReloadPolicy {
	var out []v1alpha1.ConfigReloadPolicy
	for i := range policies {
		if reloadrule.Selects(&policies[i], workload) {
			out = append(out, policies[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// checkChanges requires each change to name a ConfigMap that exists, is
// selected by a policy selecting the workload, shares the workload's scope
// value, and (unless declining) holds data whose hash is the change's: so a
// restart can only record what the ConfigMaps really hold.
func (s reloadSelection) checkChanges(ctx context.Context, c ctrlclient.Reader, changes []reloadrule.ConfigChange, decline bool) error {
	if len(changes) == 0 {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, errors.New("a reload restart must name the ConfigMap changes it applies"))
	}
	for _, ch := range changes {
		var cm corev1.ConfigMap
		err := c.Get(ctx, ctrlclient.ObjectKey{Namespace: s.namespace, Name: ch.ConfigMap}, &cm)
		if apierrors.IsNotFound(err) {
			return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("ConfigMap %s/%s does not exist: a restart records only ConfigMaps a policy watches", s.namespace, ch.ConfigMap))
		} else if err != nil {
			return fmt.Errorf("get ConfigMap %s/%s: %w", s.namespace, ch.ConfigMap, err)
		}
		if !s.watches(&cm) {
			return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("no ConfigReloadPolicy selecting %s %s/%s selects ConfigMap %s in its scope",
				s.kind, s.namespace, s.name, ch.ConfigMap))
		}
		if have := reloadrule.ConfigMapHash(&cm); !decline && have != ch.Hash {
			// Retryable: the data changed since it was signalled, and the
			// operator's signal of the new data supersedes this intent.
			return fmt.Errorf("ConfigMap %s/%s holds data with hash %s, not %s: a restart records only the data a ConfigMap holds",
				s.namespace, ch.ConfigMap, have, ch.Hash)
		}
	}
	return nil
}

// watches reports whether some selecting policy selects cm and scopes it to the workload.
func (s reloadSelection) watches(cm *corev1.ConfigMap) bool {
	for i := range s.policies {
		p := &s.policies[i]
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.ConfigMapSelector)
		if err != nil || !sel.Matches(labels.Set(cm.Labels)) {
			continue
		}
		scope := reloadrule.ScopeLabel(p)
		if v := cm.Labels[scope]; v != "" && v == s.labels[scope] {
			return true
		}
	}
	return false
}

// authority lends the write every selecting policy's author: each must hold
// the grant, so a policy whose author lost it stops restarts of the
// workloads it selects, whatever other policy also selects them.
func (s reloadSelection) authority() (authority, error) {
	a := authority{action: "restart"}
	for i := range s.policies {
		p := &s.policies[i]
		if p.Spec.Author == nil || p.Spec.Author.Username == "" {
			return authority{}, fail.Permanent(v1alpha1.ReasonForbidden, fmt.Errorf(
				"ConfigReloadPolicy %s/%s has no spec.author: Remedy's admission webhook (deploy/webhook/requester.yaml) stamps it on create and update; re-apply the policy",
				p.Namespace, p.Name))
		}
		a.lenders = append(a.lenders, lender{of: "the author of ConfigReloadPolicy " + p.Namespace + "/" + p.Name, who: p.Spec.Author})
	}
	a.actor = a.lenders[0].who
	return a, nil
}

// verifyReload re-reads everything a reload restart (or the record of a
// declined one) rests on: the workload and the policies selecting it now,
// the ConfigMaps and their data, and, when a selecting policy requires
// approval, the approved request. The actors are every selecting policy's author.
func (g *Gate) verifyReload(ctx context.Context, w Write) (authority, error) {
	s, ev, t := w.Subject, w.Subject.Reload, w.Request.Target
	switch {
	case ev == nil:
		return authority{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, errors.New("a reload write must carry its evidence"))
	case w.Request.Action != "restart" || t.APIVersion != "apps/v1" || t.Namespace != s.Namespace:
		return authority{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("a reload write restarts an apps/v1 workload in %s, not %s %s", s.Namespace, w.Request.Action, t.String()))
	case w.As != ReloadServiceAccount:
		return authority{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("reload restarts write as %s, not %s", ReloadServiceAccount, w.As))
	}
	if err := g.Runs.Reload(ctx, t.Namespace, t.Kind, t.Name); err != nil {
		return authority{}, err
	}
	sel, err := g.selectReload(ctx, t.Namespace, t.Kind, t.Name)
	if err != nil {
		return authority{}, err
	}
	if err := sel.checkChanges(ctx, g.Subjects, ev.Changes, ev.Decline); err != nil {
		return authority{}, err
	}
	if rule := reloadrule.CombineApproval(sel.policies); ev.Decline || ev.Rolls && rule.Required {
		if err := g.checkDecided(ctx, sel, rule, ev); err != nil {
			return authority{}, err
		}
	}
	return sel.authority()
}

// checkDecided re-reads the approval request the write names: this
// workload's reload workflow asked it, about these changes, and the decision
// is Approved for a restart, Rejected or Expired for a decline.
func (g *Gate) checkDecided(ctx context.Context, sel reloadSelection, rule reloadrule.ApprovalRule, ev *ReloadEvidence) error {
	need := fmt.Sprintf("ConfigReloadPolicy %s requires approval", strings.Join(rule.Policies, ", "))
	if ev.Decline {
		need = "a declined restart is recorded only for its decided request"
	}
	if ev.ApprovalRequest == "" {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("%s %s/%s not restarted: %s, and none was approved", sel.kind, sel.namespace, sel.name, need))
	}
	var rar v1alpha1.RemediationApprovalRequest
	err := g.Subjects.Get(ctx, ctrlclient.ObjectKey{Namespace: sel.namespace, Name: ev.ApprovalRequest}, &rar)
	if apierrors.IsNotFound(err) {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("%s: RemediationApprovalRequest %s/%s does not exist", need, sel.namespace, ev.ApprovalRequest))
	} else if err != nil {
		return fmt.Errorf("get RemediationApprovalRequest %s/%s: %w", sel.namespace, ev.ApprovalRequest, err)
	}
	return approvalCovers(&rar, sel, ev, need)
}

// approvalCovers checks a request against the write it is named for.
func approvalCovers(rar *v1alpha1.RemediationApprovalRequest, sel reloadSelection, ev *ReloadEvidence, need string) error {
	subject := rar.Spec.SubjectRef
	if subject.APIVersion != "apps/v1" || subject.Kind != sel.kind || subject.Name != sel.name ||
		rar.Spec.WorkflowID != v1alpha1.ReloadWorkflowID(sel.namespace, sel.kind, sel.name) || rar.Spec.ApprovalContext.Action != "restart" {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("%s: RemediationApprovalRequest %s is not this workload's restart request", need, rar.Name))
	}
	asked := askedChanges(rar.Spec.ApprovalContext.Reason)
	for _, c := range ev.Changes {
		if !asked[c.ConfigMap+"="+c.Hash] {
			return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("%s: RemediationApprovalRequest %s did not ask about ConfigMap %s data %s", need, rar.Name, c.ConfigMap, c.Hash))
		}
	}
	decided := rar.Status.Decision
	if ok := decided == v1alpha1.DecisionApproved; ok == ev.Decline || decided == "" {
		return fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("%s: RemediationApprovalRequest %s is decided %q", need, rar.Name, decided))
	}
	return nil
}

// reloadDataMarker ends a reload approval's reason before its list of changes.
const reloadDataMarker = " for new ConfigMap data: "

// ReloadApprovalReason is the reason of a reload's approval request: the
// workload, then exactly the changes asked about (DescribeChanges), which
// askedChanges reads back.
func ReloadApprovalReason(kind, namespace, name string, changes []reloadrule.ConfigChange) string {
	return fmt.Sprintf("rolling restart of %s %s/%s%s%s", kind, namespace, name, reloadDataMarker, reloadrule.DescribeChanges(changes))
}

// askedChanges is the set of "configmap=hash" entries a reload approval's
// reason lists, each matched whole: coverage by substring would let an
// approval of myapp=H cover app=H.
func askedChanges(reason string) map[string]bool {
	asked := map[string]bool{}
	i := strings.LastIndex(reason, reloadDataMarker)
	if i < 0 {
		return asked
	}
	for _, c := range strings.Split(reason[i+len(reloadDataMarker):], ", ") {
		asked[c] = true
	}
	return asked
}

// ReloadGrants is VerifyReload's check ahead of any write: the live
// ConfigReloadPolicies that select the workload, each of whose authors still
// holds the grant to restart it. The write itself passes the gate again.
func (g *Gate) ReloadGrants(ctx context.Context, namespace, kind, name string) ([]v1alpha1.ConfigReloadPolicy, error) {
	sel, err := g.selectReload(ctx, namespace, kind, name)
	if err != nil {
		return nil, err
	}
	auth, err := sel.authority()
	if err != nil {
		return nil, err
	}
	if err := g.checkGrants(ctx, namespace, auth, v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: kind, Namespace: namespace, Name: name}); err != nil {
		return nil, err
	}
	return sel.policies, nil
}
