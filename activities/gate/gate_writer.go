package gate

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// Target is the one object w may write.
func (w Writer) Target() v1alpha1.ObjectRef { return w.target }

// Resource is the target's resource as a dynamic client bound to the target:
// every call that names another object, and every create, list, watch or
// collection delete, is refused before it is sent. The actions package and
// the reload and drift writes write through it.
func (w Writer) Resource() dynamic.ResourceInterface { return boundResource{w} }

// Reads is a client that only reads (and dry-runs) as the writer's
// account, for what an action plans from besides its target (rollout-undo
// lists the Deployment's ReplicaSets); its transport refuses every write.
func (w Writer) Reads() dynamic.Interface { return w.reads }

// boundResource is a Writer seen as a dynamic.ResourceInterface. It embeds
// nothing: a method it does not write out cannot reach the client.
type boundResource struct{ w Writer }

var _ dynamic.ResourceInterface = boundResource{}

// only refuses a call about any object but the writer's target, or on a
// Writer that Pass did not make.
func (b boundResource) only(verb, name string) error {
	switch {
	case b.w.ri == nil:
		return fmt.Errorf("%s %s refused: this writer was not handed out by the write gate", verb, name)
	case name != b.w.target.Name:
		return fmt.Errorf("%s %s refused: the write gate passed a write to %s only, as %s", verb, name, b.w.target.String(), b.w.as)
	}
	return nil
}

func (b boundResource) refused(verb string) error {
	return fmt.Errorf("%s refused: the write gate passed a write to %s only, as %s", verb, b.w.target.String(), b.w.as)
}

func (b boundResource) Get(ctx context.Context, name string, opts metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error) {
	if err := b.only("get", name); err != nil {
		return nil, err
	}
	return b.w.ri.Get(ctx, name, opts, sub...)
}

func (b boundResource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	if err := b.only("patch", name); err != nil {
		return nil, err
	}
	return b.w.ri.Patch(ctx, name, pt, data, opts, sub...)
}

func (b boundResource) Apply(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions, sub ...string) (*unstructured.Unstructured, error) {
	if err := b.only("apply", name); err != nil {
		return nil, err
	}
	if err := b.only("apply", obj.GetName()); err != nil {
		return nil, err
	}
	return b.w.ri.Apply(ctx, name, obj, opts, sub...)
}

func (b boundResource) ApplyStatus(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions) (*unstructured.Unstructured, error) {
	if err := b.only("apply status", name); err != nil {
		return nil, err
	}
	if err := b.only("apply status", obj.GetName()); err != nil {
		return nil, err
	}
	return b.w.ri.ApplyStatus(ctx, name, obj, opts)
}

func (b boundResource) Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, sub ...string) (*unstructured.Unstructured, error) {
	if err := b.only("update", obj.GetName()); err != nil {
		return nil, err
	}
	return b.w.ri.Update(ctx, obj, opts, sub...)
}

func (b boundResource) UpdateStatus(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	if err := b.only("update status", obj.GetName()); err != nil {
		return nil, err
	}
	return b.w.ri.UpdateStatus(ctx, obj, opts)
}

func (b boundResource) Delete(ctx context.Context, name string, opts metav1.DeleteOptions, sub ...string) error {
	if err := b.only("delete", name); err != nil {
		return err
	}
	return b.w.ri.Delete(ctx, name, opts, sub...)
}

func (b boundResource) Create(context.Context, *unstructured.Unstructured, metav1.CreateOptions, ...string) (*unstructured.Unstructured, error) {
	return nil, b.refused("create")
}

func (b boundResource) DeleteCollection(context.Context, metav1.DeleteOptions, metav1.ListOptions) error {
	return b.refused("delete collection")
}

func (b boundResource) List(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return nil, b.refused("list")
}

func (b boundResource) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, b.refused("watch")
}
