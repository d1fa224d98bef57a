package admission

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/remedy-dev/remedy/deploy/crd"
)

// crdSchema is one kind's schema as the API server validates it: OpenAPI
// (types, enums, bounds, patterns) and the CEL rules.
type crdSchema struct {
	openapi    apiextensionsvalidation.SchemaValidator
	structural *structuralschema.Structural
	cel        *cel.Validator
}

// schemas are the served versions' schemas by "Kind/version", built once
// from the CRDs embedded at build time (the same files `kubectl apply -k
// deploy/` installs).
var schemas = sync.OnceValues(func() (map[string]*crdSchema, error) {
	files, err := fs.Glob(crd.FS, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("list CRDs: %w", err)
	}
	out := map[string]*crdSchema{}
	for _, f := range files {
		raw, err := crd.FS.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read CRD %s: %w", f, err)
		}
		var def apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &def); err != nil {
			return nil, fmt.Errorf("decode CRD %s: %w", f, err)
		}
		for _, v := range def.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			var props apiextensions.JSONSchemaProps
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &props, nil); err != nil {
				return nil, fmt.Errorf("convert CRD %s schema: %w", f, err)
			}
			openapi, _, err := apiextensionsvalidation.NewSchemaValidator(&props)
			if err != nil {
				return nil, fmt.Errorf("CRD %s schema: %w", f, err)
			}
			structural, err := structuralschema.NewStructural(&props)
			if err != nil {
				return nil, fmt.Errorf("CRD %s structural schema: %w", f, err)
			}
			out[def.Spec.Names.Kind+"/"+v.Name] = &crdSchema{openapi: openapi, structural: structural,
				cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}
		}
	}
	return out, nil
})

// schemaErrors are the errors the API server's schema and CEL rules would
// report for the object, in its words: a webhook runs before them (it is
// mutating), so a refusal that named only the webhook's own problems would
// leave these for the next attempt. Nil when the kind is not Remedy's or the object does not decode: the API
// server still checks it.
func schemaErrors(ctx context.Context, kind, version, namespace string, raw, oldRaw []byte) field.ErrorList {
	all, err := schemas()
	s := all[kind+"/"+version]
	if err != nil || s == nil {
		return nil
	}
	var obj, old map[string]any
	// util/json decodes whole numbers as int64, as the API server does, so
	// a type error names "integer" where it would.
	if utiljson.Unmarshal(raw, &obj) != nil || asStamped(kind, namespace, obj) != nil {
		return nil
	}
	if len(oldRaw) > 0 && utiljson.Unmarshal(oldRaw, &old) != nil {
		old = nil
	}
	var errs field.ErrorList
	var celOpts []cel.Option
	var oldObj any
	if old == nil {
		errs = apiextensionsvalidation.ValidateCustomResource(nil, obj, s.openapi)
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, s.structural, obj)...)
	} else {
		// Ratcheting, as the API server (on by default): a value an update
		// leaves as it was is not refused for rules added since it was stored.
		_ = asStamped(kind, namespace, old)
		correlated := common.NewCorrelatedObject(obj, old, &model.Structural{Structural: s.structural})
		errs = apiextensionsvalidation.ValidateCustomResourceUpdate(nil, obj, old, s.openapi, apiextensionsvalidation.WithRatcheting(correlated))
		if len(structurallisttype.ValidateListSetsAndMaps(nil, s.structural, old)) == 0 {
			errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, s.structural, obj)...)
		}
		celOpts, oldObj = append(celOpts, cel.WithRatcheting(correlated)), old
	}
	errs = append(errs, schemaobjectmeta.Validate(nil, obj, s.structural, false)...)
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			// As the API server: CEL rules assume the schema holds.
			return append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
		}
	}
	celErrs, _ := s.cel.Validate(ctx, nil, s.structural, obj, oldObj, celconfig.RuntimeCELCostBudget, celOpts...)
	return append(errs, celErrs...)
}

// asStamped makes obj what the API server validates once this webhook's
// patch is applied: the requester and author are the webhook's to write
// (whatever the body says of them), and a rule's template targets get the
// rule's namespace. Otherwise the refusal would name problems the API
// server never sees.
func asStamped(kind, namespace string, obj map[string]any) error {
	unstructured.RemoveNestedField(obj, "spec", "requester")
	unstructured.RemoveNestedField(obj, "spec", "author")
	switch kind {
	case "RemediationRequest":
		steps, _, _ := unstructured.NestedSlice(obj, "spec", "steps")
		for _, s := range steps {
			if m, ok := s.(map[string]any); ok {
				unstructured.RemoveNestedField(m, "execution", "requester")
			}
		}
		if len(steps) > 0 {
			return unstructured.SetNestedSlice(obj, steps, "spec", "steps")
		}
	case "RemediationRule":
		return fillTargetNamespaces(obj, namespace)
	}
	return nil
}

// withSchemaErrors puts the schema's errors first (the earliest layer's,
// as the API server would list them) before the webhook's own, leaving out
// a schema error of the kind the webhook already names for the same field
// (a wrong type, which the webhook's decoder finds too).
func withSchemaErrors(schemaErrs, own field.ErrorList) field.ErrorList {
	named := map[string]bool{}
	for _, e := range own {
		named[string(e.Type)+" "+e.Field] = true
	}
	var out field.ErrorList
	for _, e := range schemaErrs {
		if !named[string(e.Type)+" "+e.Field] {
			out = append(out, e)
		}
	}
	// The validators walk maps: sorted by field, the same object gets the
	// same answer every time. The note that CEL was not run stays last.
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Field, out[j].Field
		return a != "<nil>" && (b == "<nil>" || a < b)
	})
	return append(out, own...)
}

// refuseInvalid answers 422 with every problem of the object: the schema's
// and CEL's first, then the webhook's own, each naming its field, in one
// Status whose causes kubectl prints.
func refuseInvalid(ctx context.Context, req admission.Request, own field.ErrorList) admission.Response {
	errs := withSchemaErrors(schemaErrors(ctx, req.Kind.Kind, req.Kind.Version, req.Namespace, req.Object.Raw, req.OldObject.Raw), own)
	log.FromContext(ctx).Info(req.Kind.Kind+" refused", "user", req.UserInfo.Username,
		"object", req.Namespace+"/"+req.Name, "reason", errs.ToAggregate().Error())
	st := apierrors.NewInvalid(schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}, req.Name, errs).ErrStatus
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &st}}
}
