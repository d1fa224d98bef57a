package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/authz"
)

// Objects with a spec.author (ConfigReloadPolicy, RemediationRule) act in
// their author's name; these helpers are what their admission handlers share.

// decodeWrite decodes the written object and, on update, the stored one.
func decodeWrite[T any](req admission.Request, kind string) (cur, old *T, err error) {
	cur = new(T)
	if err := decodeObject(req.Object.Raw, cur); err != nil {
		return nil, nil, fmt.Errorf("decode %s: %w", kind, err)
	}
	if req.Operation == admissionv1.Update {
		old = new(T)
		if err := decodeObject(req.OldObject.Raw, old); err != nil {
			return nil, nil, fmt.Errorf("decode old %s: %w", kind, err)
		}
	}
	return cur, old, nil
}

// authorRefused answers an author check that failed: 403 naming the
// missing grant when the author was denied, 500 when the check could not run.
func authorRefused(ctx context.Context, req admission.Request, kind, why string, err error) admission.Response {
	var denied *authz.Denied
	if !errors.As(err, &denied) {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	log.FromContext(ctx).Info(kind+" refused", "user", req.UserInfo.Username, "object", req.Namespace+"/"+req.Name, "reason", denied.Msg)
	resp := admission.Denied("the author of a " + kind + " must be allowed to " + why + ": " + denied.Msg)
	resp.Result.Code, resp.Result.Reason = http.StatusForbidden, metav1.StatusReasonForbidden
	return resp
}

func authorUnchanged(stored, author *v1alpha1.Requester) bool {
	return author == nil && stored == nil || author != nil && stored != nil && sameRequester(*stored, *author)
}

// patchAuthor answers with the patch that writes author into spec.author
// (or removes it), after edit, if any, has changed the object too.
func patchAuthor(req admission.Request, author *v1alpha1.Requester, edit func(obj map[string]any) error) admission.Response {
	var obj map[string]any
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode object: %w", err))
	}
	if author == nil {
		unstructured.RemoveNestedField(obj, "spec", "author")
	} else if err := setRequester(obj, *author, "spec", "author"); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if edit != nil {
		if err := edit(obj); err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encode object: %w", err))
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}
