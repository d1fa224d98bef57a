package drift

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/remedy-dev/remedy/activities/fail"
	"github.com/remedy-dev/remedy/activities/gate"
	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
)

// Parents of drifts: the worker reads them to verify a drift and to tell
// whether it resolved; approvals and rejections are written onto them as
// remedy-drift (Identities), with a client only the write gate hands out.
// +kubebuilder:rbac:groups=apps,resources=deployments;replicasets;statefulsets;daemonsets,verbs=get
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get
// Children of those parents, read to tell whether a drifted child is gone.
// +kubebuilder:rbac:groups="",resources=pods;persistentvolumeclaims,verbs=get
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get

// Reasons a drift resolves.
const (
	DriftParentChanged = "ParentChanged"
	DriftParentDeleted = "ParentDeleted"
	DriftApproved      = "Approved"
	DriftChildDeleted  = "ChildDeleted"
)

// Drift holds the activities of the drift workflow.
type Drift struct {
	// Dynamic reads parents and children of any kind, as the worker.
	Dynamic dynamic.Interface
	// Gate checks each approval or rejection right before it is written and
	// hands out the remedy-drift client it is written with: the worker's own
	// role cannot write parents.
	Gate *gate.Gate
	// Config says where reports go and whether a person is asked.
	Config *gate.DriftConfig
	// Mapper resolves kinds to resources.
	Mapper meta.RESTMapper
}

// DriftObject names a drift's parent or child.
type DriftObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
}

func (o DriftObject) String() string { return o.Namespace + "/" + o.Kind + "/" + o.Name }

// DriftCheck is one open drift to look at.
type DriftCheck struct {
	ID    string      `json:"id"`
	Child DriftObject `json:"child"`
	// Operation is the drifting request's; a CREATE's child may never have existed.
	Operation string `json:"operation"`
	// ParentSpecHash is the parent's kv1.SpecHash when the drift was detected.
	ParentSpecHash string `json:"parentSpecHash"`
	// ParentGeneration is the generation approvals for this drift are written with.
	ParentGeneration int64 `json:"parentGeneration"`
}

// CheckDriftsInput lists a parent's open drifts.
type CheckDriftsInput struct {
	Parent DriftObject  `json:"parent"`
	Drifts []DriftCheck `json:"drifts"`
}

// DriftResolution says one drift resolved, and why.
type DriftResolution struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// CheckDriftsResult lists the drifts that resolved, in input order.
type CheckDriftsResult struct {
	Resolved []DriftResolution `json:"resolved,omitempty"`
}

// CheckDrifts reads the parent and each drifted child. A drift resolves when
// the parent's spec changed, the parent carries an approval for the child,
// or the child is gone.
func (d *Drift) CheckDrifts(ctx context.Context, in CheckDriftsInput) (CheckDriftsResult, error) {
	var res CheckDriftsResult
	if err := d.Gate.Runs.Drift(ctx, in.Parent.UID); err != nil {
		return res, err
	}
	parent, err := d.get(ctx, in.Parent)
	if apierrors.IsNotFound(err) || (err == nil && in.Parent.UID != "" && string(parent.GetUID()) != in.Parent.UID) {
		for _, c := range in.Drifts {
			res.Resolved = append(res.Resolved, DriftResolution{ID: c.ID, Reason: DriftParentDeleted})
		}
		return res, nil
	}
	if err != nil {
		return res, fail.Classify(v1alpha1.ReasonInvalidParameters, fmt.Errorf("read parent %s: %w", in.Parent, err))
	}
	hash := kv1.SpecHash(parent.Object)
	approvals, err := kv1.ParseApprovals(parent.GetAnnotations()[kv1.AnnotationApprovals])
	if err != nil {
		// A person's typo must not resolve anything, nor stop the other checks.
		activity.GetLogger(ctx).Warn("ignoring unparseable approvals on parent", "parent", in.Parent.String(), "error", err)
		approvals = nil
	}
	for _, c := range in.Drifts {
		reason, err := d.resolution(ctx, c, hash, parent.GetGeneration(), approvals)
		if err != nil {
			return CheckDriftsResult{}, err
		}
		if reason != "" {
			res.Resolved = append(res.Resolved, DriftResolution{ID: c.ID, Reason: reason})
		}
	}
	return res, nil
}

// resolution says why check c is resolved, "" if it is not; the parent's
// spec hash and metadata.generation are read once for every check.
func (d *Drift) resolution(ctx context.Context, c DriftCheck, parentHash string, parentGeneration int64, approvals []kv1.Approval) (string, error) {
	if parentHash != c.ParentSpecHash {
		return DriftParentChanged, nil
	}
	ref := kv1.ChildRef{APIVersion: c.Child.APIVersion, Kind: c.Child.Kind, Name: c.Child.Name}
	for _, a := range approvals {
		if a.Matches(ref, kv1.Generations{Spec: c.ParentGeneration, Metadata: parentGeneration}) {
			return DriftApproved, nil
		}
	}
	child, err := d.get(ctx, c.Child)
	switch {
	case apierrors.IsNotFound(err):
		// A denied CREATE never made the child, so its absence proves nothing.
		if c.Operation == "CREATE" && c.Child.UID == "" {
			return "", nil
		}
		return DriftChildDeleted, nil
	case err != nil:
		return "", fail.Classify(v1alpha1.ReasonInvalidParameters, fmt.Errorf("read child %s: %w", c.Child, err))
	case c.Child.UID != "" && string(child.GetUID()) != c.Child.UID:
		// Same name, new object: the drifted one is gone.
		return DriftChildDeleted, nil
	}
	return "", nil
}

func (d *Drift) resource(client dynamic.Interface, o DriftObject) (dynamic.ResourceInterface, error) {
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil {
		return nil, &actions.InvalidError{Msg: fmt.Sprintf("apiVersion %q of %s: %v", o.APIVersion, o, err)}
	}
	m, err := d.Mapper.RESTMapping(gv.WithKind(o.Kind).GroupKind(), gv.Version)
	if meta.IsNoMatchError(err) {
		return nil, &actions.InvalidError{Msg: fmt.Sprintf("the API server does not serve %s %s", o.APIVersion, o.Kind)}
	}
	if err != nil {
		return nil, fmt.Errorf("map %s %s: %w", o.APIVersion, o.Kind, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return client.Resource(m.Resource).Namespace(o.Namespace), nil
	}
	return client.Resource(m.Resource), nil
}

func (d *Drift) get(ctx context.Context, o DriftObject) (*unstructured.Unstructured, error) {
	r, err := d.resource(d.Dynamic, o)
	if err != nil {
		return nil, err
	}
	return r.Get(ctx, o.Name, metav1.GetOptions{})
}
