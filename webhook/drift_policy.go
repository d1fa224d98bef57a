package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/webhook/kausality"
)

// The drift webhook follows the Kausality policies: it reads them, keeps
// its own configuration's rules in step and reports on each policy.
// +kubebuilder:rbac:groups=kausality.io,resources=kausalities,verbs=get;list;watch
// +kubebuilder:rbac:groups=kausality.io,resources=kausalities/status,verbs=patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=get;update,resourceNames=remedy-drift

// DriftWebhookConfiguration is the MutatingWebhookConfiguration whose rules
// the policies decide (deploy/webhook/drift.yaml).
const DriftWebhookConfiguration = "remedy-drift"

// policyResync re-reads every policy now and then, so a "*" with
// exclusions picks up kinds registered since.
const policyResync = 5 * time.Minute

// Policy conditions.
const (
	ConditionReady             = "Ready"
	ConditionWebhookConfigured = "WebhookConfigured"
)

// Policies keeps the compiled Kausality policies current and the drift
// webhook configuration's rules in step with them.
type Policies struct {
	dyn       dynamic.Interface
	kube      kubernetes.Interface
	discovery discovery.DiscoveryInterface
	// Configuration is the MutatingWebhookConfiguration to maintain; "" leaves rules alone.
	Configuration string
	// DefaultMode is the webhook's --default-mode, reported as the mode of a
	// policy that names none.
	DefaultMode kv1.Mode
	log         logr.Logger

	inf      cache.SharedIndexInformer
	current  atomic.Pointer[kausality.Policies]
	changed  chan struct{}
	compiled chan struct{}
}

// NewPolicies watches Kausality policies with dyn; Run starts it.
func NewPolicies(dyn dynamic.Interface, kube kubernetes.Interface, dc discovery.DiscoveryInterface, configuration string, log logr.Logger) *Policies {
	p := &Policies{dyn: dyn, kube: kube, discovery: dc, Configuration: configuration, log: log,
		changed: make(chan struct{}, 1), compiled: make(chan struct{})}
	p.inf = dynamicinformer.NewDynamicSharedInformerFactory(dyn, policyResync).ForResource(kv1.KausalityResource).Informer()
	return p
}

// Current is the policies as last compiled; nil before the first.
func (p *Policies) Current() *kausality.Policies {
	if p == nil {
		return nil
	}
	return p.current.Load()
}

// Run watches the policies until ctx ends. It returns once they are read
// and compiled, so the webhook never admits with an empty policy set.
func (p *Policies) Run(ctx context.Context) error {
	if _, err := p.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.kick() },
		UpdateFunc: func(any, any) { p.kick() },
		DeleteFunc: func(any) { p.kick() },
	}); err != nil {
		return fmt.Errorf("watch kausality policies: %w", err)
	}
	go p.inf.Run(ctx.Done())
	go p.loop(ctx)
	select {
	case <-p.compiled:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(cacheSyncTimeout):
		return fmt.Errorf("read kausality policies: not synced after %s", cacheSyncTimeout)
	}
}

func (p *Policies) kick() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

func (p *Policies) loop(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), p.inf.HasSynced) {
		return
	}
	p.kick()
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.changed:
		}
		if err := p.reconcile(ctx, first); apierrors.IsNotFound(err) {
			// The install creates the configuration beside the webhook's
			// Deployment, so at startup it may not exist yet: not an error.
			p.log.Info("the drift webhook configuration does not exist yet; retrying", "reason", err.Error())
			time.AfterFunc(2*time.Second, p.kick)
		} else if err != nil {
			p.log.Error(err, "apply kausality policies; retrying")
			time.AfterFunc(2*time.Second, p.kick)
		}
		first = false
	}
}

// reconcile compiles the policies, applies the webhook rules and reports
// on each policy.
func (p *Policies) reconcile(ctx context.Context, first bool) error {
	var list []kv1.Kausality
	for _, o := range p.inf.GetStore().List() {
		var k kv1.Kausality
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.(*unstructured.Unstructured).Object, &k); err != nil {
			return fmt.Errorf("decode kausality policy: %w", err)
		}
		list = append(list, k)
	}
	compiled, bad := kausality.CompilePolicies(list)
	p.current.Store(compiled)
	if first {
		close(p.compiled)
	}
	webhookErr := p.applyRules(ctx, list)
	if webhookErr != nil && !apierrors.IsNotFound(webhookErr) {
		p.log.Error(webhookErr, "update the drift webhook configuration")
	}
	for i := range list {
		if err := p.report(ctx, &list[i], bad[list[i].Name], webhookErr); err != nil {
			return err
		}
	}
	return webhookErr
}

func (p *Policies) applyRules(ctx context.Context, list []kv1.Kausality) error {
	if p.Configuration == "" {
		return nil
	}
	rules, err := DriftRules(list, p.discover)
	if err != nil {
		return err
	}
	mwcs := p.kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	mwc, err := mwcs.Get(ctx, p.Configuration, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get webhook configuration %s: %w", p.Configuration, err)
	}
	if len(mwc.Webhooks) == 0 {
		return fmt.Errorf("webhook configuration %s has no webhooks", p.Configuration)
	}
	if reflect.DeepEqual(mwc.Webhooks[0].Rules, rules) {
		return nil
	}
	mwc.Webhooks[0].Rules = rules
	if _, err := mwcs.Update(ctx, mwc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update webhook configuration %s: %w", p.Configuration, err)
	}
	p.log.Info("drift webhook rules follow the policies", "policies", len(list), "rules", len(rules))
	return nil
}

// discover lists group's resources that can be updated, without subresources.
func (p *Policies) discover(group string) ([]string, error) {
	_, lists, err := p.discovery.ServerGroupsAndResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discover resources: %w", err)
	}
	var out []string
	for _, l := range lists {
		gv, err := schemaGroup(l.GroupVersion)
		if err != nil || gv != group {
			continue
		}
		for _, r := range l.APIResources {
			if !strings.Contains(r.Name, "/") && slices.Contains(r.Verbs, "update") && !slices.Contains(out, r.Name) {
				out = append(out, r.Name)
			}
		}
	}
	return out, nil
}

func schemaGroup(groupVersion string) (string, error) {
	if i := strings.Index(groupVersion, "/"); i >= 0 {
		return groupVersion[:i], nil
	}
	return "", nil
}

// report sets the policy's conditions when they changed: Ready says this
// webhook resolves modes with the policy's generation, WebhookConfigured
// whether its kinds are in the configuration.
func (p *Policies) report(ctx context.Context, k *kv1.Kausality, bad, webhookErr error) error {
	if k.DeletionTimestamp != nil {
		return nil
	}
	conds := slices.Clone(k.Status.Conditions)
	ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Resolving", Message: "the drift webhook resolves modes with this policy", ObservedGeneration: k.Generation}
	if bad != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "InvalidSelector", bad.Error()+"; the policy matches nothing"
	}
	configured := metav1.Condition{Type: ConditionWebhookConfigured, Status: metav1.ConditionTrue, Reason: "RulesApplied", Message: "its resources are in " + p.Configuration, ObservedGeneration: k.Generation}
	if webhookErr != nil {
		configured.Status, configured.Reason, configured.Message = metav1.ConditionFalse, "UpdateFailed", webhookErr.Error()
	}
	if p.Configuration == "" {
		configured.Reason, configured.Message = "Unmanaged", "the webhook does not maintain its configuration's rules"
	}
	apimeta.SetStatusCondition(&conds, ready)
	apimeta.SetStatusCondition(&conds, configured)
	mode := k.Spec.Mode
	if mode == "" {
		mode = p.DefaultMode
	}
	if sameConditions(conds, k.Status.Conditions) && mode == k.Status.Mode {
		return nil
	}
	status := map[string]any{"conditions": conds}
	if mode != "" {
		status["mode"] = mode
	}
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return fmt.Errorf("encode status of policy %s: %w", k.Name, err)
	}
	if _, err := p.dyn.Resource(kv1.KausalityResource).Patch(ctx, k.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("report status of policy %s: %w", k.Name, err)
	}
	return nil
}

// sameConditions compares what matters, not the transition times.
func sameConditions(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for _, c := range a {
		o := apimeta.FindStatusCondition(b, c.Type)
		if o == nil || o.Status != c.Status || o.Reason != c.Reason || o.Message != c.Message || o.ObservedGeneration != c.ObservedGeneration {
			return false
		}
	}
	return true
}

// policyMode is the mode the winning policy gives the request's object,
// else the webhook's default.
func (d *Drift) policyMode(ctx context.Context, req admission.Request, obj *unstructured.Unstructured) (kv1.Mode, error) {
	ps := d.Policies.Current()
	if ps == nil || req.SubResource != "" {
		return d.DefaultMode, nil
	}
	nsLabels, err := d.Parents.NamespaceLabels(ctx, req.Namespace)
	if err != nil {
		return "", err
	}
	m, ok := ps.Resolve(kausality.PolicyTarget{Group: req.Resource.Group, Resource: req.Resource.Resource,
		Namespace: req.Namespace, NamespaceLabels: nsLabels, ObjectLabels: obj.GetLabels()})
	if !ok || m.Mode == "" {
		return d.DefaultMode, nil
	}
	return m.Mode, nil
}
