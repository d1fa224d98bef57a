package gate

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/authz"
)

// Markers that stand in for values a run does not publish.
const (
	// SecretMarker: a Secret's content is never published, whatever the grants.
	SecretMarker = "<redacted: Secret data is never shown>"
	// unknownMarker: the run could not tell whether its requester may read
	// the target (or never asked), so it shows nothing.
	unknownMarker = "<redacted: the requester's read access to the target is unknown>"
)

// Readable says whether a run may publish the values it reads from its
// target (before/after, dry-run impact, the captured inverse) in the
// execution's status and Events, which whoever may get the execution reads:
// only when its requester may get the target themselves, and never a
// Secret's. The zero value publishes nothing.
type Readable struct {
	Allowed bool `json:"allowed"`
	// Marker replaces each value when not Allowed, saying why.
	Marker string `json:"marker,omitempty"`
}

// MayReadTarget asks the API server, by SubjectAccessReview as the
// requester, whether they may get the target. A refusal is a result, not an
// error: the run goes on and publishes markers instead of values.
func (v *Validation) MayReadTarget(ctx context.Context, in RequesterCheck) (Readable, error) {
	if IsSecret(in.Target) {
		return Readable{Marker: SecretMarker}, nil
	}
	if in.Requester == nil || in.Requester.Username == "" {
		return Readable{Marker: unknownMarker}, nil
	}
	gvr, err := v.resourceOf(in.Target)
	if err != nil {
		return Readable{}, err
	}
	attrs := authorizationv1.ResourceAttributes{
		Namespace: in.Target.Namespace, Verb: "get", Group: gvr.Group, Resource: gvr.Resource, Name: in.Target.Name,
	}
	err = authz.MayRead(ctx, authz.SARReview(v.Kube.AuthorizationV1().SubjectAccessReviews()), *in.Requester, attrs)
	var denied *authz.Denied
	switch {
	case errors.As(err, &denied):
		activity.GetLogger(ctx).Info("values redacted: the requester may not get the target", "requester", in.Requester.Username, "target", in.Target.String())
		return Readable{Marker: NotReadableMarker(in.Requester.Username, gvr.GroupResource().String(), in.Target.Name)}, nil
	case err != nil:
		return Readable{}, fmt.Errorf("ask whether %s may get %s: %w", in.Requester.Username, in.Target.String(), err)
	}
	return Readable{Allowed: true}, nil
}

// NotReadableMarker is the marker for a requester who may not get the object.
func NotReadableMarker(user, resource, name string) string {
	return fmt.Sprintf("<redacted: %s may not get %s/%s>", user, resource, name)
}

// IsSecret reports whether ref is a core Secret.
func IsSecret(ref v1alpha1.ObjectRef) bool {
	return ref.Kind == "Secret" && ref.APIVersion == "v1"
}

func (r Readable) marker() string {
	if r.Marker == "" {
		return unknownMarker
	}
	return r.Marker
}

// Value is s as the run may publish it.
func (r Readable) Value(s string) string {
	if r.Allowed || s == "" {
		return s
	}
	return r.marker()
}

// Change is c with its before and after as the run may publish them.
func (r Readable) Change(c v1alpha1.ResourceChange) v1alpha1.ResourceChange {
	c.Before, c.After = r.Value(c.Before), r.Value(c.After)
	return c
}

// Rollback is the captured inverse as the run may publish it: its
// parameters only when Allowed, and then without any valueFrom. digest is
// RollbackDigest of the real parameters, by which the write gate recognises
// the rollback.
func (r Readable) Rollback(info v1alpha1.RollbackInformation, digest string) v1alpha1.RollbackInformation {
	info.ParametersDigest = digest
	if info.RollbackParameters == nil {
		return info
	}
	if !r.Allowed {
		info.RollbackParameters, info.Redacted = nil, r.marker()
		return info
	}
	p := *info.RollbackParameters
	if p.Patch != nil {
		p.Patch = scrubPatch(p.Patch.Raw)
	}
	info.RollbackParameters = &p
	return info
}

// scrubPatch is the merge patch raw with every valueFrom replaced; a patch
// that does not decode is shown as a marker object, not as itself.
func scrubPatch(raw []byte) *apiextensionsv1.JSON {
	var body any
	if err := json.Unmarshal(raw, &body); err == nil {
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(actions.ScrubSecretRefs(body)); err == nil {
			return &apiextensionsv1.JSON{Raw: bytes.TrimSpace(out.Bytes())}
		}
	}
	return &apiextensionsv1.JSON{Raw: []byte(`{"redacted":"` + unknownMarker + `"}`)}
}

// RollbackDigest is the HMAC-SHA256 under key of p in a canonical JSON form
// (sorted keys, numbers as written), so the same parameters give the same
// digest however they were encoded on the way. Keyed with a secret only the
// run holds, it tells nothing about the parameters to whoever reads it:
// a plain hash of a short value could be reversed by guessing.
func RollbackDigest(key []byte, p v1alpha1.ActionParameters) (string, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encode rollback parameters: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("decode rollback parameters: %w", err)
	}
	canonical, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode rollback parameters: %w", err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(canonical)
	return "hmac-sha256:" + hex.EncodeToString(mac.Sum(nil)), nil
}

// matchesDigest reports whether p is the parameters digest was made of under key.
func matchesDigest(key []byte, p v1alpha1.ActionParameters, digest string) bool {
	if len(key) == 0 {
		return false
	}
	got, err := RollbackDigest(key, p)
	return err == nil && hmac.Equal([]byte(got), []byte(digest))
}
