package authz

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// MayRead returns nil when the requester may use attrs' verb on attrs'
// resource themselves, a *Denied naming the grant when not, and other errors
// when it could not ask. Remedy asks it before it reads anything on a
// requester's behalf whose content goes back to them (a condition's input,
// whose message lands in .status): the worker's own read rights are not the
// requester's.
func MayRead(ctx context.Context, review Review, u v1alpha1.Requester, attrs authorizationv1.ResourceAttributes) error {
	ok, err := review(ctx, sarSpec(u, attrs))
	if err != nil || ok {
		return err
	}
	where := "at cluster scope"
	if attrs.Namespace != "" {
		where = "in the namespace " + attrs.Namespace
	}
	res := attrs.Resource
	if attrs.Group != "" {
		res += "." + attrs.Group
	}
	named := ""
	if attrs.Name != "" {
		named = fmt.Sprintf(" (resourceName %q)", attrs.Name)
		res += "/" + attrs.Name
	}
	return &Denied{Msg: fmt.Sprintf("user %q cannot %s resource %q in API group %q %s%s: grant the verb %q on %s",
		u.Username, attrs.Verb, attrs.Resource, attrs.Group, where, named, attrs.Verb, res)}
}
