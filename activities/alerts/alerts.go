package alerts

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/activities/status"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertmanager"
	"github.com/remedy-dev/remedy/internal/alertrule"
)

// +kubebuilder:rbac:groups=remedy.dev,resources=remediationrules,verbs=get;list
// +kubebuilder:rbac:groups=remedy.dev,resources=remediationrules/status,verbs=update
// +kubebuilder:rbac:groups=remedy.dev,resources=remediationrequests,verbs=get;create
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=get;list
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get
// +kubebuilder:rbac:groups="",resources=pods,verbs=get

// Alerts holds the activities of alert-driven remediation.
type Alerts struct {
	// Client is the worker's own identity: it reads rules and targets and
	// writes rule status and RemediationRequests, never a target.
	Client ctrlclient.Client
	// Alertmanager, when set, is asked whether an alert really fires.
	Alertmanager *alertmanager.Client
	// RestartGrace after Alertmanager starts before its list may prove an
	// alert resolved (0: alertmanager.RestartGrace).
	RestartGrace time.Duration
	// Gate hands out the only way to write a silence (gate_silence.go).
	Gate *gate.Gate
	// Events records refusals and guard trips on the rule.
	Events *status.Statuses
	// Guard reads the namespace guards' permits (holdsPermit); TaskQueue is
	// the one Remedy's guards run on.
	Guard     GuardReader
	TaskQueue string
	// Runs binds RecordAlert to the alert's open run.
	Runs *gate.OpenRuns
}

// AlertPlan is the verified rule and what it would do for the alert.
type AlertPlan struct {
	RuleUID       string                     `json:"ruleUID"`
	Author        v1alpha1.Requester         `json:"author"`
	Steps         []v1alpha1.RemediationStep `json:"steps"`
	Rollback      v1alpha1.RollbackPolicy    `json:"rollback,omitempty"`
	Target        string                     `json:"target"`
	GitOps        string                     `json:"gitOps,omitempty"`
	Spec          v1alpha1.RemediationRuleSpec
	Workloads     int `json:"workloads"`
	Cooldown      time.Duration
	BreakerWindow time.Duration
	// Ladder is spec.escalation rendered from the alert (step 1 is Steps).
	Ladder []LadderStep `json:"ladder,omitempty"`

	// Runbook is the alert's runbook link and summary as Alertmanager holds them (alertrule.RunbookOf).
	Runbook alertrule.Runbook `json:"runbook,omitempty"`
}

// VerifyAlert takes no authority from the workflow's input: the run must be
// the alert's own workflow, the rule must exist and match the alert's
// labels, the fingerprint must be the labels' own, and Alertmanager (when
// configured) must hold the alert as firing. Only then is the alert proven
// real, and a refusal from here on (suspended rule, no author, a template
// that does not render, a missing target) carries Recordable: the run
// records it on the rule (alerts_refusal.go). A refusal before it is of a
// forged or stale start and writes nothing anywhere.
// It then renders the template and finds the target's owning workload and
// whether a GitOps controller manages it.
func (a *Alerts) VerifyAlert(ctx context.Context, in gate.AlertSubject) (AlertPlan, error) {
	var proven *Recordable
	plan, err := a.verifyAlert(ctx, in, &proven)
	if proven != nil {
		plan.Runbook = proven.Runbook
		err = recordable(*proven, err)
	}
	return plan, err
}

func (a *Alerts) verifyAlert(ctx context.Context, in gate.AlertSubject, proven **Recordable) (AlertPlan, error) {
	if id := activity.GetInfo(ctx).WorkflowExecution.ID; id != v1alpha1.AlertWorkflowID(in.Namespace, in.Rule, in.Alert.Fingerprint) {
		return AlertPlan{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("workflow %s is not the workflow of alert %s for rule %s/%s", id, in.Alert.Fingerprint, in.Namespace, in.Rule))
	}
	if fp := alertmanager.Fingerprint(in.Alert.Labels); fp != in.Alert.Fingerprint {
		return AlertPlan{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("fingerprint %s is not the fingerprint %s of the alert's labels", in.Alert.Fingerprint, fp))
	}
	var rule v1alpha1.RemediationRule
	if err := a.Client.Get(ctx, ctrlclient.ObjectKey{Namespace: in.Namespace, Name: in.Rule}, &rule); err != nil {
		err = fmt.Errorf("read RemediationRule %s/%s: %w", in.Namespace, in.Rule, err)
		if apierrors.IsNotFound(err) {
			// A start for a rule that does not exist is no alert's: forged, or stale.
			return AlertPlan{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, err)
		}
		return AlertPlan{}, fail.Classify(v1alpha1.ReasonSubjectMismatch, err)
	}
	ms, err := alertrule.Matchers(&rule.Spec)
	if err != nil {
		return AlertPlan{}, fail.Permanent(v1alpha1.ReasonInvalidParameters, err)
	}
	if !alertrule.Matches(in.Namespace, ms, in.Alert.Labels) {
		return AlertPlan{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("RemediationRule %s does not match the alert's labels", rule.Name))
	}
	// Without an Alertmanager to ask, the input's annotations are as
	// trusted as the rest of it; with one, only what it holds is shown.
	annotations := in.Alert.Annotations
	if a.Alertmanager != nil {
		held, err := a.firing(ctx, in)
		if err != nil {
			return AlertPlan{}, err
		}
		annotations = held.Annotations
	}
	*proven = &Recordable{RuleUID: string(rule.UID), Runbook: alertrule.RunbookOf(annotations)}
	if rule.Spec.Suspend {
		return AlertPlan{}, fail.Permanent(v1alpha1.ReasonAlertSuspended, fmt.Errorf("RemediationRule %s is suspended", rule.Name))
	}
	if rule.Spec.Author == nil {
		return AlertPlan{}, fail.Permanent(v1alpha1.ReasonForbidden, fmt.Errorf("RemediationRule %s has no author: apply its spec again", rule.Name))
	}
	workload, missing, err := gate.AlertWorkload(ctx, a.Client, in.Namespace, &rule.Spec, in.Alert)
	if err != nil {
		return AlertPlan{}, err
	}
	steps, err := alertrule.RenderFor(in.Namespace, rule.Spec.Template, in.Alert, workload, missing)
	if err != nil {
		return AlertPlan{}, fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf("render RemediationRule %s: %w", rule.Name, err))
	}
	plan := AlertPlan{RuleUID: string(rule.UID), Author: *rule.Spec.Author, Steps: steps, Rollback: rule.Spec.Template.RollbackPolicy, Spec: rule.Spec}
	if plan.Ladder, err = ladder(in.Namespace, &rule.Spec, in.Alert); err != nil {
		return AlertPlan{}, fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf("render RemediationRule %s: %w", rule.Name, err))
	}
	plan.Spec.Author = nil
	plan.Cooldown, _ = rule.Spec.Cooldown.Parse()
	if rule.Spec.CircuitBreaker != nil {
		plan.BreakerWindow, _ = rule.Spec.CircuitBreaker.Window.Parse()
	}
	target := steps[0].Execution.Target
	if plan.Target, plan.GitOps, err = a.owner(ctx, target); err != nil {
		return AlertPlan{}, err
	}
	if plan.Workloads, err = a.workloads(ctx, in.Namespace); err != nil {
		return AlertPlan{}, err
	}
	return plan, nil
}

// firing asks Alertmanager whether the alert fires with these labels. An
// unreachable Alertmanager is retried: a run never acts on an alert it
// could not confirm. An Alertmanager that answers without credentials
// confirms nothing: anyone may have posted the alert. It returns the alert
// as Alertmanager holds it (its annotations, not the input's, are shown).
func (a *Alerts) firing(ctx context.Context, in gate.AlertSubject) (alertmanager.ActiveAlert, error) {
	if err := a.Alertmanager.RequiresAuth(ctx); err != nil {
		var open *alertmanager.OpenError
		if errors.As(err, &open) {
			return alertmanager.ActiveAlert{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, err)
		}
		return alertmanager.ActiveAlert{}, err
	}
	active, err := a.Alertmanager.Active(ctx, in.Namespace)
	if err != nil {
		return alertmanager.ActiveAlert{}, err
	}
	for _, al := range active {
		if al.Fingerprint == in.Alert.Fingerprint && maps.Equal(al.Labels, in.Alert.Labels) {
			return al, nil
		}
	}
	return alertmanager.ActiveAlert{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("alert %s is not firing in Alertmanager", in.Alert.Fingerprint))
}

// gitOpsMarks are the labels and annotations Argo CD and Flux put on what they manage.
var gitOpsMarks = []struct{ key, manager string }{
	{"argocd.argoproj.io/tracking-id", "Argo CD"},
	{"argocd.argoproj.io/instance", "Argo CD"},
	{"kustomize.toolkit.fluxcd.io/name", "Flux"},
	{"helm.toolkit.fluxcd.io/name", "Flux"},
}

// owner resolves a Pod to the Deployment or StatefulSet that owns it (the
// guard keys on the workload, so a replacement Pod is the same target) and
// names the GitOps controller that manages the workload, if any.
func (a *Alerts) owner(ctx context.Context, t v1alpha1.ObjectRef) (key, gitops string, err error) {
	kind, name := t.Kind, t.Name
	var meta metav1.Object
	// Typed objects carry no kind (their TypeMeta is empty), so each read names its own.
	get := func(k string, obj ctrlclient.Object, n string) error {
		if err := a.Client.Get(ctx, ctrlclient.ObjectKey{Namespace: t.Namespace, Name: n}, obj); err != nil {
			return fail.Classify(v1alpha1.ReasonNotFound, fmt.Errorf("read %s %s/%s: %w", k, t.Namespace, n, err))
		}
		meta = obj
		return nil
	}
	if kind == "Pod" {
		w, ok, err := gate.PodWorkload(ctx, a.Client, t.Namespace, name)
		if err != nil {
			return "", "", fail.Classify(v1alpha1.ReasonNotFound, err)
		}
		if ok {
			kind, name = w.Kind, w.Name
		}
	}
	switch kind {
	case "Pod":
		err = get(kind, &corev1.Pod{}, name)
	case "ReplicaSet":
		err = get(kind, &appsv1.ReplicaSet{}, name)
	case "Deployment":
		err = get(kind, &appsv1.Deployment{}, name)
	case "StatefulSet":
		err = get(kind, &appsv1.StatefulSet{}, name)
	case "DaemonSet":
		err = get(kind, &appsv1.DaemonSet{}, name)
	}
	if err != nil {
		return "", "", err
	}
	if meta != nil {
		for _, m := range gitOpsMarks {
			if _, ok := meta.GetLabels()[m.key]; ok {
				gitops = m.manager + " (label " + m.key + ")"
				break
			}
			if _, ok := meta.GetAnnotations()[m.key]; ok {
				gitops = m.manager + " (annotation " + m.key + ")"
				break
			}
		}
	}
	return kind + "/" + name, gitops, nil
}

// workloads counts the namespace's Deployments, StatefulSets and DaemonSets,
// the base of the rule's percentage budget.
func (a *Alerts) workloads(ctx context.Context, ns string) (int, error) {
	var d appsv1.DeploymentList
	var s appsv1.StatefulSetList
	var ds appsv1.DaemonSetList
	for _, l := range []ctrlclient.ObjectList{&d, &s, &ds} {
		if err := a.Client.List(ctx, l, ctrlclient.InNamespace(ns)); err != nil {
			return 0, fmt.Errorf("count workloads in %s: %w", ns, err)
		}
	}
	return len(d.Items) + len(s.Items) + len(ds.Items), nil
}

// AlertRequestInput is the RemediationRequest an alert's run creates.
type AlertRequestInput struct {
	Subject gate.AlertSubject `json:"subject"`
	Plan    AlertPlan         `json:"plan"`
	// Step is the rung of spec.escalation the request is for (0: spec.template).
	Step int `json:"step,omitempty"`
}

// RequestRef names a RemediationRequest and its workflow.
type RequestRef struct {
	Name       string `json:"name"`
	UID        string `json:"uid"`
	WorkflowID string `json:"workflowID"`
}

// CreateAlertRequest creates the run's RemediationRequest in the rule
// author's name (the requester webhook admits it only from the worker and
// only for that author); its name is the run's, so a retry finds it.
func (a *Alerts) CreateAlertRequest(ctx context.Context, in AlertRequestInput) (RequestRef, error) {
	if err := a.holdsPermit(ctx, in.Subject.Namespace); err != nil {
		return RequestRef{}, err
	}
	name := alertRequestName(in.Subject.Rule, in.Subject.Alert.Fingerprint, activity.GetInfo(ctx).WorkflowExecution.RunID)
	name = stepRequestName(name, in.Step)
	author := in.Plan.Author
	rr := &v1alpha1.RemediationRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: in.Subject.Namespace, Labels: map[string]string{
			"remedy.dev/rule": in.Subject.Rule, "remedy.dev/alert": in.Subject.Alert.Fingerprint}},
		Spec: v1alpha1.RemediationRequestSpec{Steps: in.Plan.Steps, RollbackPolicy: in.Plan.Rollback, Requester: &author,
			Alert: &v1alpha1.AlertOrigin{Rule: in.Subject.Rule, Fingerprint: in.Subject.Alert.Fingerprint,
				GeneratorURL: in.Subject.Alert.GeneratorURL, Labels: in.Subject.Alert.Labels,
				RunbookURL: in.Plan.Runbook.URL, Summary: in.Plan.Runbook.Summary}},
	}
	err := a.Client.Create(ctx, rr)
	if apierrors.IsAlreadyExists(err) {
		err = a.Client.Get(ctx, ctrlclient.ObjectKeyFromObject(rr), rr)
		if err == nil && (rr.Spec.Alert == nil || rr.Spec.Alert.Fingerprint != in.Subject.Alert.Fingerprint) {
			return RequestRef{}, fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf("RemediationRequest %s exists and is not this alert's", name))
		}
	}
	if err != nil {
		return RequestRef{}, fail.Classify(v1alpha1.ReasonInvalidParameters, fmt.Errorf("create RemediationRequest %s: %w", name, err))
	}
	return RequestRef{Name: rr.Name, UID: string(rr.UID), WorkflowID: fmt.Sprintf("rr/%s/%s/%s", rr.Namespace, rr.Name, rr.UID)}, nil
}

// alertRequestName is the RemediationRequest of one run of an alert's workflow.
func alertRequestName(rule, fingerprint, runID string) string {
	return fmt.Sprintf("%s-%s-%s", fail.Truncate(rule, 40), fingerprint[:min(8, len(fingerprint))], strings.ReplaceAll(runID, "-", "")[:min(8, len(runID))])
}

// stepRequestName names the request of a rung of the ladder: each is its own.
func stepRequestName(name string, step int) string {
	if step == 0 {
		return name
	}
	return fmt.Sprintf("%s-s%d", name, step+1)
}

// AwaitRequest polls the RemediationRequest until it has a final phase,
// heartbeating, and returns its status.
func (a *Alerts) AwaitRequest(ctx context.Context, ns string, ref RequestRef) (v1alpha1.RemediationRequestStatus, error) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		var rr v1alpha1.RemediationRequest
		if err := a.Client.Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: ref.Name}, &rr); err != nil {
			return v1alpha1.RemediationRequestStatus{}, fail.Classify(v1alpha1.ReasonNotFound, fmt.Errorf("read RemediationRequest %s: %w", ref.Name, err))
		}
		if string(rr.UID) != ref.UID {
			return v1alpha1.RemediationRequestStatus{}, fail.Permanent(v1alpha1.ReasonSubjectMismatch, fmt.Errorf("RemediationRequest %s was replaced", ref.Name))
		}
		if rr.Status.Phase.Terminal() {
			return rr.Status, nil
		}
		activity.RecordHeartbeat(ctx, rr.Status.Phase)
		select {
		case <-ctx.Done():
			return v1alpha1.RemediationRequestStatus{}, ctx.Err()
		case <-t.C:
		}
	}
}
