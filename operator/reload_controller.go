package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/workflows"
)

// ReloadReconciler compares each ConfigReloadPolicy's ConfigMaps with the
// hashes recorded on its workloads and signals-with-start the workload's
// reload workflow when they differ. It records first-sight baselines in
// workload metadata; every restart is the workflow's.
type ReloadReconciler struct {
	ctrlclient.Client
	// Live reads a workload past the cache before a repair restart: the
	// policy's status may already list it while the cache does not yet
	// show the baseline just recorded on it. Nil: no such check.
	Live     ctrlclient.Reader
	Temporal client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock

	mu      sync.Mutex
	pending map[types.NamespacedName]int
}

// +kubebuilder:rbac:groups=remedy.dev,resources=configreloadpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=remedy.dev,resources=configreloadpolicies/status,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile observes the policy's ConfigMaps and workloads, plans in a pure
// function, then records baselines, sends signals and writes status once.
func (r *ReloadReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	var p v1alpha1.ConfigReloadPolicy
	if err := r.Get(ctx, req.NamespacedName, &p); err != nil {
		r.setPending(req.NamespacedName, 0)
		return reconcile.Result{}, ctrlclient.IgnoreNotFound(err)
	}
	if refused, err := r.refuseProtected(ctx, &p); refused || err != nil {
		r.setPending(req.NamespacedName, 0)
		return reconcile.Result{}, err
	}
	if refused, err := r.refuseInvalid(ctx, &p); refused || err != nil {
		r.setPending(req.NamespacedName, 0)
		return reconcile.Result{}, err
	}
	cms, wls, objs, err := r.observe(ctx, &p)
	if err != nil {
		if status := invalidSelectorStatus(&p, err, r.Clock.Now()); status != nil {
			p.Status = *status
			return reconcile.Result{}, r.writeStatus(ctx, &p)
		}
		return reconcile.Result{}, nil
	}
	pl := planReload(&p, cms, wls, r.Clock.Now())

	for _, b := range pl.baselines {
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": b.Annotations}})
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("encode baseline: %w", err)
		}
		if err := r.Patch(ctx, objs[b.Kind+"/"+b.Name], ctrlclient.RawPatch(types.MergePatchType, body)); err != nil {
			return reconcile.Result{}, fmt.Errorf("record baseline on %s %s: %w", b.Kind, b.Name, err)
		}
		logger.Info("config hash baseline recorded", "kind", b.Kind, "workload", b.Name, "configMaps", len(b.Annotations))
	}
	for _, d := range pl.declined {
		if err := r.updateDeclined(ctx, objs[d.Kind+"/"+d.Name], d); err != nil {
			return reconcile.Result{}, err
		}
	}
	var others v1alpha1.ConfigReloadPolicyList
	if len(pl.signals) > 0 {
		if err := r.List(ctx, &others, ctrlclient.InNamespace(p.Namespace)); err != nil {
			return reconcile.Result{}, fmt.Errorf("list ConfigReloadPolicies: %w", err)
		}
	}
	for _, s := range pl.signals {
		if s.Repair {
			behind, err := r.cacheBehind(ctx, objs[s.Kind+"/"+s.Name])
			if err != nil {
				return reconcile.Result{}, err
			}
			if behind {
				// Its update event reconciles again once the cache has it.
				logger.Info("repair restart not signalled: the workload has config hashes the cache does not show yet", "kind", s.Kind, "workload", s.Name)
				continue
			}
		}
		approval := workflows.ReloadApprovalOf(others.Items, objs[s.Kind+"/"+s.Name].GetLabels())
		if err := r.signal(ctx, &p, s, approval); err != nil {
			return reconcile.Result{}, err
		}
		logger.Info("config change signalled", "kind", s.Kind, "workload", s.Name, "configMap", s.Change.ConfigMap, "hash", s.Change.Hash, "repair", s.Repair)
	}
	r.setPending(req.NamespacedName, pl.pending)
	if pl.status != nil {
		p.Status = *pl.status
		if err := r.writeStatus(ctx, &p); err != nil {
			return reconcile.Result{}, err
		}
	}
	for _, e := range pl.events {
		r.Recorder.Eventf(&p, nil, e.eventType, e.reason, "Reconcile", "%s", e.note)
	}
	return reconcile.Result{}, nil
}

// refuseProtected stops a policy in a protected namespace before it writes a
// baseline or signals a restart: Ready=False with reason ProtectedNamespace,
// and a Warning Event when the status first says so. The worker's restart
// activity checks the rule again when it writes.
func (r *ReloadReconciler) refuseProtected(ctx context.Context, p *v1alpha1.ConfigReloadPolicy) (bool, error) {
	var ns corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: p.Namespace}, &ns); err != nil {
		return false, fmt.Errorf("read namespace %s: %w", p.Namespace, err)
	}
	if !v1alpha1.IsProtectedNamespace(&ns) {
		return false, nil
	}
	status := protectedStatus(p, r.Clock.Now())
	if status == nil {
		return true, nil
	}
	p.Status = *status
	if err := r.writeStatus(ctx, p); err != nil {
		return true, err
	}
	r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, v1alpha1.ReasonProtectedNamespace, "Reconcile", "%s",
		meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady).Message)
	log.FromContext(ctx).Info("policy in a protected namespace: nothing is reloaded", "namespace", p.Namespace)
	return true, nil
}

// refuseInvalid stops a policy whose durations do not parse (stored before
// the schema checked them): Ready=False with reason InvalidSpec naming the
// field, and a Warning Event when the status first says so. Other policies
// are unaffected: each is parsed on its own here, not when listed.
func (r *ReloadReconciler) refuseInvalid(ctx context.Context, p *v1alpha1.ConfigReloadPolicy) (bool, error) {
	invalid := p.Spec.ValidateDurations()
	if invalid == nil {
		return false, nil
	}
	log.FromContext(ctx).Info("policy has an invalid spec: nothing is reloaded", "error", invalid.Error())
	status := invalidSpecStatus(p, invalid, r.Clock.Now())
	if status == nil {
		return true, nil
	}
	p.Status = *status
	if err := r.writeStatus(ctx, p); err != nil {
		return true, err
	}
	r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, v1alpha1.ReasonInvalidSpec, "Reconcile", "%s",
		meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady).Message)
	return true, nil
}

func (r *ReloadReconciler) writeStatus(ctx context.Context, p *v1alpha1.ConfigReloadPolicy) error {
	if err := r.Status().Update(ctx, p); err != nil {
		// A conflict means a newer object is queued; the next reconcile plans again.
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}

// observe lists the selected ConfigMaps (skipping ones being deleted) and workloads.
func (r *ReloadReconciler) observe(ctx context.Context, p *v1alpha1.ConfigReloadPolicy) ([]reloadConfigMap, []reloadWorkload, map[string]ctrlclient.Object, error) {
	cmSel, err := metav1.LabelSelectorAsSelector(&p.Spec.ConfigMapSelector)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("configMapSelector: %w", err)
	}
	wlSel, err := metav1.LabelSelectorAsSelector(&p.Spec.WorkloadSelector)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("workloadSelector: %w", err)
	}
	scope := scopeLabel(p)
	var cmList corev1.ConfigMapList
	if err := r.List(ctx, &cmList, ctrlclient.InNamespace(p.Namespace), ctrlclient.MatchingLabelsSelector{Selector: cmSel}); err != nil {
		return nil, nil, nil, fmt.Errorf("list configmaps: %w", err)
	}
	var cms []reloadConfigMap
	for i := range cmList.Items {
		cm := &cmList.Items[i]
		if cm.DeletionTimestamp.IsZero() {
			cms = append(cms, reloadConfigMap{Name: cm.Name, Scope: cm.Labels[scope], Hash: configMapHash(cm)})
		}
	}
	var wls []reloadWorkload
	objs := map[string]ctrlclient.Object{}
	add := func(kind string, obj ctrlclient.Object, template corev1.PodTemplateSpec) {
		wls = append(wls, reloadWorkload{Kind: kind, Name: obj.GetName(), Scope: obj.GetLabels()[scope],
			Meta: obj.GetAnnotations(), Template: template.Annotations, ResourceVersion: obj.GetResourceVersion()})
		objs[kind+"/"+obj.GetName()] = obj
	}
	opts := []ctrlclient.ListOption{ctrlclient.InNamespace(p.Namespace), ctrlclient.MatchingLabelsSelector{Selector: wlSel}}
	var deps appsv1.DeploymentList
	var sts appsv1.StatefulSetList
	var dss appsv1.DaemonSetList
	for _, l := range []ctrlclient.ObjectList{&deps, &sts, &dss} {
		if err := r.List(ctx, l, opts...); err != nil {
			return nil, nil, nil, fmt.Errorf("list workloads: %w", err)
		}
	}
	for i := range deps.Items {
		add("Deployment", &deps.Items[i], deps.Items[i].Spec.Template)
	}
	for i := range sts.Items {
		add("StatefulSet", &sts.Items[i], sts.Items[i].Spec.Template)
	}
	for i := range dss.Items {
		add("DaemonSet", &dss.Items[i], dss.Items[i].Spec.Template)
	}
	return cms, wls, objs, nil
}

// signal delivers one change to the workload's workflow, starting it when
// none runs; repeats are harmless because the workflow ignores known hashes.
// approval combines every policy that selects the workload, this one's
// among them, strictly: if any requires approval the run asks. (The run
// learns the same from the live policies before each restart, and the write
// gate refuses an unapproved one, so a run started earlier without it still asks.)
func (r *ReloadReconciler) signal(ctx context.Context, p *v1alpha1.ConfigReloadPolicy, s reloadSignal, approval *workflows.ReloadApproval) error {
	id := v1alpha1.ReloadWorkflowID(p.Namespace, s.Kind, s.Name)
	in := workflows.ReloadInput{Namespace: p.Namespace, Kind: s.Kind, Name: s.Name, Scope: s.Scope, Policy: p.Name, Approval: approval}
	// Reconcile refused the policy if any of these did not parse; 0 takes the workflow's default.
	in.Debounce, in.MaxWait = p.Spec.Debounce.Or(0), p.Spec.MaxWait.Or(0)
	if rt := p.Spec.Retry; rt != nil {
		in.RetryInitial, in.RetryMax = rt.InitialInterval.Or(0), rt.MaxInterval.Or(0)
	}
	_, err := r.Temporal.SignalWithStartWorkflow(ctx, id, workflows.SignalConfigChanged, s.Change, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// Each run ends once its workload is current, so the ID is reused by the next change.
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.AttrKind.ValueSet("ConfigReloadPolicy"),
			workflows.AttrTarget.ValueSet(p.Namespace+"/"+s.Kind+"/"+s.Name),
		),
	}, workflows.ReloadWorkflow, in)
	if err != nil {
		return fmt.Errorf("signal-with-start %s: %w", id, err)
	}
	return nil
}

// cacheBehind reports whether the live workload carries a config hash its
// cached copy obj (planned from) lacks.
func (r *ReloadReconciler) cacheBehind(ctx context.Context, obj ctrlclient.Object) (bool, error) {
	if r.Live == nil {
		return false, nil
	}
	live := obj.DeepCopyObject().(ctrlclient.Object)
	if err := r.Live.Get(ctx, ctrlclient.ObjectKeyFromObject(obj), live); err != nil {
		return false, ctrlclient.IgnoreNotFound(fmt.Errorf("read %s live: %w", obj.GetName(), err))
	}
	return anyConfigHash(live.GetAnnotations(), podTemplateAnnotations(live)), nil
}

// podTemplateAnnotations are the pod template's annotations of a workload.
func podTemplateAnnotations(obj ctrlclient.Object) map[string]string {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return w.Spec.Template.Annotations
	case *appsv1.StatefulSet:
		return w.Spec.Template.Annotations
	case *appsv1.DaemonSet:
		return w.Spec.Template.Annotations
	}
	return nil
}

// updateDeclined drops stale declined entries. The patch is conditional on
// the resourceVersion planned from: if the worker declined something since,
// the conflict requeues and the next plan sees it.
func (r *ReloadReconciler) updateDeclined(ctx context.Context, obj ctrlclient.Object, d reloadDeclinedUpdate) error {
	var value any
	if d.Value != "" {
		value = d.Value
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": d.ResourceVersion,
		"annotations":     map[string]any{v1alpha1.DeclinedAnnotation: value},
	}})
	if err != nil {
		return fmt.Errorf("encode declined update: %w", err)
	}
	if err := r.Patch(ctx, obj, ctrlclient.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("update declined data on %s %s: %w", d.Kind, d.Name, err)
	}
	log.FromContext(ctx).Info("declined data changed since; asking again when signalled", "kind", d.Kind, "workload", d.Name)
	return nil
}

// setPending keeps the pending-restarts gauge the sum over all policies.
func (r *ReloadReconciler) setPending(key types.NamespacedName, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = map[types.NamespacedName]int{}
	}
	if n == 0 {
		delete(r.pending, key)
	} else {
		r.pending[key] = n
	}
	total := 0
	for _, v := range r.pending {
		total += v
	}
	metrics.ReloadPending.Set(float64(total))
}

// policiesInNamespace maps a ConfigMap or workload event to every policy in its namespace.
func (r *ReloadReconciler) policiesInNamespace(ctx context.Context, obj ctrlclient.Object) []reconcile.Request {
	return r.policiesIn(ctx, obj.GetNamespace())
}

// policiesOfNamespace maps a Namespace event (its labels may have changed
// protection) to every policy in it.
func (r *ReloadReconciler) policiesOfNamespace(ctx context.Context, obj ctrlclient.Object) []reconcile.Request {
	return r.policiesIn(ctx, obj.GetName())
}

func (r *ReloadReconciler) policiesIn(ctx context.Context, namespace string) []reconcile.Request {
	var list v1alpha1.ConfigReloadPolicyList
	if err := r.List(ctx, &list, ctrlclient.InNamespace(namespace)); err != nil {
		log.FromContext(ctx).Error(err, "list ConfigReloadPolicies", "namespace", namespace)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
	}
	return reqs
}

// SetupWithManager registers the reconciler. Status-only policy updates
// (its own writes) do not trigger it; ConfigMap, workload and Namespace events do.
func (r *ReloadReconciler) SetupWithManager(mgr manager.Manager) error {
	toPolicies := handler.EnqueueRequestsFromMapFunc(r.policiesInNamespace)
	return ctrl.ControllerManagedBy(mgr).
		For(&v1alpha1.ConfigReloadPolicy{}, ctrl.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.ConfigMap{}, toPolicies).
		Watches(&appsv1.Deployment{}, toPolicies).
		Watches(&appsv1.StatefulSet{}, toPolicies).
		Watches(&appsv1.DaemonSet{}, toPolicies).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.policiesOfNamespace), ctrl.WithPredicates(predicate.LabelChangedPredicate{})).
		Named("configreloadpolicy").
		Complete(requeueOnConflict(r))
}
