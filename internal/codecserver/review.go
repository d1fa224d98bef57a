package codecserver

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/internal/seal"
)

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// KubeReviewer asks the API server: TokenReview for who, SubjectAccessReview for may.
type KubeReviewer struct {
	Client ctrlclient.Client
}

// Authenticate reviews a token.
func (k KubeReviewer) Authenticate(ctx context.Context, token string) (seal.Person, bool, error) {
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if err := k.Client.Create(ctx, tr); err != nil {
		return seal.Person{}, false, fmt.Errorf("create TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return seal.Person{}, false, nil
	}
	u := tr.Status.User
	who := seal.Person{Username: u.Username, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		who.Extra = map[string][]string{}
		for k, v := range u.Extra {
			who.Extra[k] = v
		}
	}
	return who, true, nil
}

// MayDecode asks whether who may use DecodeVerb on payloads.remedy.dev.
func (k KubeReviewer) MayDecode(ctx context.Context, who seal.Person) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: who.Username, UID: who.UID, Groups: who.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: DecodeVerb, Group: Group, Resource: Resource},
	}}
	if len(who.Extra) > 0 {
		sar.Spec.Extra = map[string]authorizationv1.ExtraValue{}
		for k, v := range who.Extra {
			sar.Spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	if err := k.Client.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("create SubjectAccessReview: %w", err)
	}
	return sar.Status.Allowed, nil
}
