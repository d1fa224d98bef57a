package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/activity"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/authz"
	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/policy"
)

// Validation holds the checks that run before anything changes. It uses the
// worker's own identity, which may only read.
type Validation struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapper
	// ActionNamespace holds the action ServiceAccounts and the policy ConfigMaps.
	ActionNamespace string
	Policy          *policy.Engine
	// Reads serves namespaces and policy ConfigMaps from watches; nil reads them from the API server.
	Reads *PolicyReads
	// LastGood decides with the last good safety policy while the current
	// one is broken; nil fails every evaluation of a broken policy.
	LastGood *LastGoodPolicy
	// Runs binds EvaluateCondition, a read made for a person, to the run
	// its subject records; nil refuses it.
	Runs ReadBinder
}

// CheckSpec validates the action's parameters and compiles every condition
// module, and names every problem it finds, not only the first, as
// admission does. An error that is not a problem of the spec (discovery
// down) is returned alone, as it was, to be retried.
func (v *Validation) CheckSpec(ctx context.Context, spec v1alpha1.KubernetesExecutionSpec, req actions.Request) error {
	var problems []error
	if _, err := actions.Validate(req); err != nil {
		var inv *actions.InvalidError
		if !errors.As(err, &inv) {
			return fail.Classify(v1alpha1.ReasonInvalidParameters, err)
		}
		problems = append(problems, err)
	}
	for _, c := range append(append([]v1alpha1.Condition{}, spec.PreConditions...), spec.PostConditions...) {
		if err := v.Policy.CheckCondition(ctx, c.Name, c.Rego); err != nil {
			problems = append(problems, err)
		}
	}
	if len(problems) > 0 {
		return fail.Permanent(v1alpha1.ReasonInvalidParameters, errors.Join(problems...))
	}
	activity.GetLogger(ctx).Info("spec valid", "action", req.Action, "target", req.Target.String())
	return nil
}

// CheckRBAC checks that the action's ServiceAccount exists, then asks the API
// server, by SubjectAccessReview, whether it may use every verb its action
// needs on the target.
func (v *Validation) CheckRBAC(ctx context.Context, req actions.Request) error {
	a, err := actions.Validate(req)
	if err != nil {
		return fail.Classify(v1alpha1.ReasonInvalidParameters, err)
	}
	if err := v.checkServiceAccount(ctx, req.Action); err != nil {
		return err
	}
	gvr, err := v.resourceOf(req.Target)
	if err != nil {
		return err
	}
	user := actions.ServiceAccountUser(v.ActionNamespace, req.Action)
	review := authz.SARReview(v.Kube.AuthorizationV1().SubjectAccessReviews())
	verbs := authz.Verbs(a, gvr)
	if len(verbs) == 0 {
		// No verb to ask about is no grant at all, never "may do every one".
		return fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf("action %s names no verb on %s: Remedy cannot authorize it, so it does not run it", req.Action, gvr.GroupResource()))
	}
	var denied []string
	for _, verb := range verbs {
		ok, err := review(ctx, authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + v.ActionNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: req.Target.Namespace, Verb: verb, Group: gvr.Group, Resource: gvr.Resource, Name: req.Target.Name,
			},
		})
		if err != nil {
			return err
		}
		if !ok {
			denied = append(denied, verb)
		}
	}
	if len(denied) > 0 {
		where := "cluster-wide"
		if req.Target.Namespace != "" {
			where = "in namespace " + req.Target.Namespace
		}
		return fail.Permanent(v1alpha1.ReasonForbidden, fmt.Errorf("RBAC: %s may not %s %s %s; grant it in the ClusterRole %s",
			user, strings.Join(denied, ", "), gvr.GroupResource(), where, actions.ServiceAccountName(req.Action)))
	}
	return nil
}

// checkServiceAccount fails at once when the action's account is gone. Both
// executors act as it (a Job's pod runs as it, the inline executor
// impersonates it), and RBAC bound to its name would still answer the
// SubjectAccessReview: without this check a Job's pod is never created and
// the run only ends at ExecutionTimeout.
func (v *Validation) checkServiceAccount(ctx context.Context, action string) error {
	name := actions.ServiceAccountName(action)
	err := v.serviceAccountExists(ctx, name)
	if apierrors.IsNotFound(err) {
		return fail.Permanent(v1alpha1.ReasonForbidden, fmt.Errorf("ServiceAccount %s/%s does not exist: the %s action runs as it; install deploy/actions/%s.yaml",
			v.ActionNamespace, name, action, action))
	}
	if err != nil {
		return fmt.Errorf("read ServiceAccount %s/%s: %w", v.ActionNamespace, name, err)
	}
	return nil
}

// RequesterCheck is one action a run's requester wants made.
type RequesterCheck struct {
	// Namespace of the KubernetesExecution.
	Namespace string              `json:"namespace"`
	Requester *v1alpha1.Requester `json:"requester,omitempty"`
	Action    string              `json:"action"`
	Target    v1alpha1.ObjectRef  `json:"target"`
}

// CheckRequester asks again, before anything changes, whether the requester
// may have Remedy run the action: RBAC may have changed since admission, for
// example while the run waited for approval.
func (v *Validation) CheckRequester(ctx context.Context, in RequesterCheck) error {
	if in.Requester == nil || in.Requester.Username == "" {
		return fail.Permanent(v1alpha1.ReasonForbidden, errors.New(
			"the execution has no spec.requester: Remedy's admission webhook (deploy/webhook/requester.yaml) stamps it on create, and nothing runs without one"))
	}
	err := authz.Authorize(ctx, authz.SARReview(v.Kube.AuthorizationV1().SubjectAccessReviews()), v.Mapper,
		authz.Request{Requester: *in.Requester, Namespace: in.Namespace, Action: in.Action, Target: in.Target})
	var denied *authz.Denied
	var malformed *authz.Malformed
	switch {
	case errors.As(err, &malformed):
		return fail.Permanent(v1alpha1.ReasonInvalidParameters, err)
	case errors.As(err, &denied):
		return fail.Permanent(v1alpha1.ReasonForbidden, err)
	}
	if err != nil {
		return fmt.Errorf("authorize requester %s: %w", in.Requester.Username, err)
	}
	activity.GetLogger(ctx).Info("requester authorized", "requester", in.Requester.Username, "action", in.Action, "target", in.Target.String())
	return nil
}

// builtinProtected names the protected-namespace rule in a policy verdict.
const builtinProtected = "builtin/protected-namespaces"

// PolicyResult is the safety policy's verdict as recorded in status.
type PolicyResult struct {
	Validation      v1alpha1.PolicyValidation `json:"validation"`
	ApprovalTimeout string                    `json:"approvalTimeout,omitempty"`
	// DistinctApprover is the policy's require_distinct_approver (by default
	// its require_approval): an approval needs someone other than the requester.
	DistinctApprover bool `json:"distinctApprover,omitempty"`
}

// EvaluatePolicy applies the protected-namespace rule and the Rego safety
// policy from the labelled ConfigMaps. A denial is a result, not an error, so
// the verdict is recorded; the workflow fails the run with PolicyDenied.
func (v *Validation) EvaluatePolicy(ctx context.Context, req actions.Request) (PolicyResult, error) {
	in := policy.SafetyInput{Action: req.Action, Namespace: policy.NamespaceInput{Name: req.Target.Namespace}}
	if r := req.Requester; r != nil {
		in.Requester = &policy.RequesterInput{Username: r.Username, Groups: r.Groups}
	}
	if err := remarshal(req.Target, &in.Target); err != nil {
		return PolicyResult{}, err
	}
	if err := remarshal(req.Params, &in.Parameters); err != nil {
		return PolicyResult{}, err
	}
	if req.Target.Namespace != "" {
		ns, err := v.namespace(ctx, req.Target.Namespace)
		if err != nil {
			return PolicyResult{}, fail.Classify(v1alpha1.ReasonPolicyDenied, err)
		}
		in.Namespace.Labels = ns.Labels
		if v1alpha1.IsProtectedNamespace(ns) {
			return PolicyResult{Validation: v1alpha1.PolicyValidation{
				PolicyName: builtinProtected,
				Messages:   []string{v1alpha1.ProtectedNamespaceMessage(ns.Name)},
			}}, nil
		}
	}

	cms, err := v.policyMaps(ctx)
	if err != nil {
		return PolicyResult{}, err
	}
	set := policySetOf(cms)
	if len(set.Modules) == 0 {
		// Fail closed: a missing policy must not read as "everything is allowed".
		return PolicyResult{}, fail.Permanent(v1alpha1.ReasonPolicyMissing, fmt.Errorf(
			"no safety policy is loaded: no ConfigMap in %s labelled %s=true has a *.rego key (install deploy/policies/safety.yaml)", v.ActionNamespace, v1alpha1.PolicyLabel))
	}
	name := set.name()
	verdict, err := v.Policy.EvalSafety(ctx, set.Modules, in)
	if policy.IsInvalid(err) && v.LastGood != nil {
		good := v.LastGood.broken(ctx, v.Policy, set, err)
		if good == nil {
			metrics.SafetyPolicyFallbacks.WithLabelValues("none").Inc()
		} else {
			metrics.SafetyPolicyFallbacks.WithLabelValues("last_good").Inc()
			activity.GetLogger(ctx).Warn("safety policy is broken; deciding with the last good policy", "policy", name, "error", err.Error(), "lastGood", good.Hash)
			name = fmt.Sprintf("%s (last good: %s is broken)", good.name(), name)
			set = *good
			verdict, err = v.Policy.EvalSafety(ctx, set.Modules, in)
		}
	} else if err == nil && v.LastGood != nil {
		v.LastGood.keep(set)
	}
	switch {
	case policy.IsInvalid(err):
		return PolicyResult{}, fail.Permanent(v1alpha1.ReasonPolicyDenied, fmt.Errorf("safety policy %s is broken: %w", name, err))
	case policy.IsTimeout(err):
		// A policy that cannot decide in time denies; retrying would only
		// burn the same time again.
		return PolicyResult{}, fail.Permanent(v1alpha1.ReasonPolicyDenied, fmt.Errorf("safety policy %s did not decide: %w", name, err))
	case err != nil:
		return PolicyResult{}, err
	}
	res := PolicyResult{Validation: v1alpha1.PolicyValidation{
		PolicyName:       name,
		PolicyHash:       set.Hash,
		Allowed:          len(verdict.Deny) == 0,
		RequiredApproval: verdict.RequireApproval,
		RequiredDryRun:   verdict.RequireDryRun,
		Messages:         verdict.Deny,
	}, DistinctApprover: verdict.RequireDistinctApprover}
	if verdict.ApprovalTimeout > 0 {
		res.ApprovalTimeout = verdict.ApprovalTimeout.String()
	}
	return res, nil
}

func (v *Validation) resourceOf(ref v1alpha1.ObjectRef) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupVersionResource{}, fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf("target.apiVersion %q: %w", ref.APIVersion, err))
	}
	m, err := v.Mapper.RESTMapping(gv.WithKind(ref.Kind).GroupKind(), gv.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return schema.GroupVersionResource{}, fail.Permanent(v1alpha1.ReasonInvalidParameters, fmt.Errorf("the API server does not serve %s %s", ref.APIVersion, ref.Kind))
		}
		return schema.GroupVersionResource{}, fmt.Errorf("map %s %s: %w", ref.APIVersion, ref.Kind, err)
	}
	return m.Resource, nil
}

func remarshal(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode policy input: %w", err)
	}
	return json.Unmarshal(b, out)
}
