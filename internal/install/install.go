// Package install renders what README's install procedure applies from
// deploy/, in its order, as one list of objects: `make release` writes it as
// the install manifest (with the image pinned by digest) and the Helm chart
// is generated from it (hack/genchart), so the three cannot drift apart.
package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Part is one step of the install: a directory of deploy/ applied with
// `kubectl apply -k` (Kustomize) or `kubectl apply -f`.
type Part struct {
	Dir       string
	Kustomize bool
}

// CRDs are applied first, on their own: Helm keeps them in the chart's crds/.
var CRDs = Part{Dir: "deploy/crd"}

// Parts are README's steps after the CRDs, in its order. The Secret
// remedy-webhook-client-ca between admission and manager is the installer's
// (its CA is the cluster's).
var Parts = []Part{
	{Dir: "deploy/rbac", Kustomize: true},
	{Dir: "deploy/actions", Kustomize: true},
	{Dir: "deploy/policies"},
	{Dir: "deploy/admission", Kustomize: true},
	{Dir: "deploy/manager", Kustomize: true},
	{Dir: "deploy/webhook", Kustomize: true},
}

// Object is one manifest, as its YAML decodes.
type Object = map[string]any

// Render returns the objects of part under root, in file order (Kustomize's
// own order for a kustomization).
func Render(root string, part Part) ([]Object, error) {
	dir := filepath.Join(root, part.Dir)
	if part.Kustomize {
		res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			return nil, fmt.Errorf("kustomize %s: %w", part.Dir, err)
		}
		raw, err := res.AsYaml()
		if err != nil {
			return nil, fmt.Errorf("render %s: %w", part.Dir, err)
		}
		return Decode(raw)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Object
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		objs, err := Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", f, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// All renders the CRDs and then every part.
func All(root string) ([]Object, error) {
	var out []Object
	for _, p := range append([]Part{CRDs}, Parts...) {
		objs, err := Render(root, p)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// Decode splits a multi-document YAML stream into objects, skipping empty ones.
func Decode(raw []byte) ([]Object, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []Object
	for {
		var o Object
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(o) > 0 {
			out = append(out, o)
		}
	}
}

// Encode writes objects as one YAML stream.
func Encode(objs []Object) ([]byte, error) {
	var b bytes.Buffer
	for i, o := range objs {
		raw, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("encode object %d: %w", i, err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(raw)
	}
	return b.Bytes(), nil
}
