package gate

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/policy"
)

// policySet is the safety policy: the *.rego keys of the labelled ConfigMaps.
type policySet struct {
	Maps    []*corev1.ConfigMap
	Names   []string
	Modules map[string]string
	Hash    string
}

func policySetOf(cms []*corev1.ConfigMap) policySet {
	cms = append([]*corev1.ConfigMap(nil), cms...)
	sort.Slice(cms, func(i, j int) bool { return cms[i].Name < cms[j].Name })
	s := policySet{Maps: cms, Modules: map[string]string{}}
	for _, cm := range cms {
		s.Names = append(s.Names, cm.Name)
		for k, src := range cm.Data {
			if strings.HasSuffix(k, ".rego") {
				s.Modules[cm.Name+"/"+k] = src
			}
		}
	}
	s.Hash = policy.Hash(s.Modules)
	return s
}

func (s policySet) name() string { return strings.Join(s.Names, ",") }

// modulesOf returns the modules of one ConfigMap of the set.
func (s policySet) modulesOf(cm *corev1.ConfigMap) map[string]string {
	out := map[string]string{}
	for k, src := range s.Modules {
		if strings.HasPrefix(k, cm.Name+"/") {
			out[k] = src
		}
	}
	return out
}

// LastGoodPolicy keeps the last safety policy that compiled, so that a
// broken edit of a policy ConfigMap (made while the admission webhook that
// refuses it was down) does not stop every remediation in the cluster: the
// worker goes on deciding with the policy it had, records a Warning Event on
// the ConfigMap that broke it and sets remedy_safety_policy_broken. A worker
// that starts on a broken policy has none to keep, and fails closed.
type LastGoodPolicy struct {
	// Events records the Warning Events, as the worker.
	Events kubernetes.Interface
	Log    logr.Logger

	mu     sync.Mutex
	good   *policySet
	warned map[string]bool
}

// keep records s as the last good policy.
func (l *LastGoodPolicy) keep(s policySet) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.good == nil || l.good.Hash != s.Hash {
		l.Log.Info("safety policy loaded", "policy", s.name(), "hash", s.Hash)
	}
	l.good = &s
	metrics.SafetyPolicyBroken.Set(0)
}

// broken reports s, which failed with err, once per content, and returns
// the last good policy to decide with instead, or nil when there is none.
func (l *LastGoodPolicy) broken(ctx context.Context, engine *policy.Engine, s policySet, err error) *policySet {
	metrics.SafetyPolicyBroken.Set(1)
	l.mu.Lock()
	good := l.good
	first := !l.warned[s.Hash]
	if l.warned == nil {
		l.warned = map[string]bool{}
	}
	l.warned[s.Hash] = true
	l.mu.Unlock()
	if first {
		l.report(ctx, engine, s, good, err)
	}
	return good
}

// Observe checks the policy the ConfigMaps cms make up, as the worker's
// watch sees them change, so a broken edit is reported when it is made, not
// when a run next needs the policy.
func (l *LastGoodPolicy) Observe(ctx context.Context, engine *policy.Engine, cms []*corev1.ConfigMap) {
	s := policySetOf(cms)
	if len(s.Modules) == 0 {
		return
	}
	if err := engine.CheckSafety(ctx, s.Modules); err != nil {
		l.broken(ctx, engine, s, err)
		return
	}
	l.keep(s)
}

// report records a Warning Event on each ConfigMap that broke s: those that
// fail on their own, else those that changed since good, else all of them.
func (l *LastGoodPolicy) report(ctx context.Context, engine *policy.Engine, s policySet, good *policySet, err error) {
	fallback := "no earlier policy compiled in this worker, so every execution fails PolicyDenied until the policy is fixed"
	if good != nil {
		fallback = fmt.Sprintf("the worker keeps deciding with the last good policy (%s, hash %.12s) until it is fixed", good.name(), good.Hash)
	}
	l.Log.Info("safety policy is broken", "policy", s.name(), "hash", s.Hash, "error", err.Error(), "fallback", good != nil)
	for _, cm := range culprits(ctx, engine, s, good) {
		w := fail.Warning{
			Regarding: corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name,
				UID: cm.UID, ResourceVersion: cm.ResourceVersion},
			Key:    "policy-broken/" + string(cm.UID) + "/" + cm.ResourceVersion + "/" + s.Hash,
			Action: "LoadPolicy", Reason: v1alpha1.ReasonPolicyBroken,
			Note: fmt.Sprintf("safety policy %s is broken: %v; %s", s.name(), err, fallback),
		}
		if evErr := fail.RecordWarning(ctx, l.Events, w); evErr != nil {
			l.Log.Error(evErr, "policy warning not recorded", "configMap", cm.Namespace+"/"+cm.Name)
		}
	}
}

func culprits(ctx context.Context, engine *policy.Engine, s policySet, good *policySet) []*corev1.ConfigMap {
	var alone, changed []*corev1.ConfigMap
	for _, cm := range s.Maps {
		mods := s.modulesOf(cm)
		if len(mods) == 0 {
			continue
		}
		if engine.CheckSafety(ctx, mods) != nil {
			alone = append(alone, cm)
		}
		if good == nil || policy.Hash(good.modulesOf(cm)) != policy.Hash(mods) {
			changed = append(changed, cm)
		}
	}
	switch {
	case len(alone) > 0:
		return alone
	case len(changed) > 0:
		return changed
	}
	return s.Maps
}
