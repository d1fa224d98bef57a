package devenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Namespace is where Remedy's own identities live.
const Namespace = "remedy-system"

// InstallRemedy applies Remedy's identities, RBAC, per-action accounts and
// admission policies from the repository's deploy/ tree. It applies all of
// deploy/rbac, so also the example roles deploy/rbac/*-example.yaml, which
// are not in its kustomization: on purpose, so that `make dev` and the tests
// have remedy-oncall and remedy-approver (group sre-approvers) as the docs
// describe.
func (e *Env) InstallRemedy(ctx context.Context, repoRoot string) error {
	return Install(ctx, e.Config, filepath.Join(repoRoot, "deploy", "rbac"), filepath.Join(repoRoot, "deploy", "actions"),
		filepath.Join(repoRoot, "deploy", "admission"))
}

// Install server-side-applies every manifest under dirs (recursively, skipping
// kustomization.yaml), Namespaces first, as `kubectl apply -k` would.
func Install(ctx context.Context, cfg *rest.Config, dirs ...string) error {
	return install(ctx, cfg, false, dirs)
}

// InstallAsKubectl is Install recording each object's
// kubectl.kubernetes.io/last-applied-configuration exactly as `kubectl apply`
// would, so that a person's `kubectl apply` of the same file says "unchanged"
// rather than "configured" with a warning about the missing annotation.
func InstallAsKubectl(ctx context.Context, cfg *rest.Config, dirs ...string) error {
	return install(ctx, cfg, true, dirs)
}

// lastApplied is kubectl's last-applied-configuration of o: the object
// without that annotation, encoded as unstructured JSON with its newline
// (k8s.io/kubectl/pkg/util GetModifiedConfiguration).
func lastApplied(o *unstructured.Unstructured) (string, error) {
	c := o.DeepCopy()
	annots := c.GetAnnotations()
	delete(annots, corev1.LastAppliedConfigAnnotation)
	// kubectl keeps an empty annotations map; SetAnnotations would drop it.
	if err := unstructured.SetNestedStringMap(c.Object, annots, "metadata", "annotations"); err != nil {
		return "", fmt.Errorf("annotate %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	var b bytes.Buffer
	if err := unstructured.UnstructuredJSONScheme.Encode(c, &b); err != nil {
		return "", fmt.Errorf("encode %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return b.String(), nil
}

func install(ctx context.Context, cfg *rest.Config, asKubectl bool, dirs []string) error {
	var objs []*unstructured.Unstructured
	for _, dir := range dirs {
		found, err := readManifests(dir)
		if err != nil {
			return err
		}
		objs = append(objs, found...)
	}
	sort.SliceStable(objs, func(i, j int) bool { return objs[i].GetKind() == "Namespace" && objs[j].GetKind() != "Namespace" })

	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("build dynamic client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("build discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("map %s: %w", gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		if asKubectl {
			applied, err := lastApplied(o)
			if err != nil {
				return err
			}
			annots := o.GetAnnotations()
			if annots == nil {
				annots = map[string]string{}
			}
			annots[corev1.LastAppliedConfigAnnotation] = applied
			o.SetAnnotations(annots)
		}
		body, err := o.MarshalJSON()
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", gvk.Kind, o.GetName(), err)
		}
		if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "remedy-install", Force: ptrTrue()}); err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, o.GetName(), err)
		}
	}
	return nil
}

func readManifests(dir string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") || d.Name() == "kustomization.yaml" {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var o unstructured.Unstructured
			if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return fmt.Errorf("decode %s: %w", path, err)
			}
			if len(o.Object) > 0 {
				objs = append(objs, &o)
			}
		}
	})
	return objs, err
}

func ptrTrue() *bool { t := true; return &t }

// ServiceAccountConfig returns a config that authenticates as the
// ServiceAccount namespace/name with a token from the TokenRequest API, so the
// API server enforces exactly that account's RBAC, including whom it may impersonate.
func ServiceAccountConfig(ctx context.Context, admin *rest.Config, namespace, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, fmt.Errorf("build clientset: %w", err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrInt64(48 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("request token for %s/%s: %w", namespace, name, err)
	}
	c := rest.AnonymousClientConfig(admin)
	c.BearerToken = tr.Status.Token
	return c, nil
}

func ptrInt64(v int64) *int64 { return &v }
