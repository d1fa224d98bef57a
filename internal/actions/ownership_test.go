package actions

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/remedy-dev/remedy/internal/metrics"
	"github.com/remedy-dev/remedy/internal/release"
)

const (
	// A split: the applier owns only the image, an Update manager the rest.
	applierImage   = `{"f:spec":{"f:template":{"f:spec":{"f:initContainers":{"k:{\"name\":\"base-os-bash\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`
	updaterRest    = `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}},"f:initContainers":{".":{},"k:{\"name\":\"base-os-bash\"}":{".":{},"f:command":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{},"f:securityContext":{}}}}}}}`
	ownsAll        = `{"f:spec":{"f:template":{"f:spec":{"f:initContainers":{"k:{\"name\":\"base-os-bash\"}":{".":{},"f:command":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{},"f:securityContext":{}}}}}}}`
	ownsFields     = `{"f:spec":{"f:template":{"f:spec":{"f:initContainers":{"k:{\"name\":\"base-os-bash\"}":{"f:command":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{},"f:securityContext":{}}}}}}}`
	ownsAtomic     = `{"f:spec":{"f:template":{"f:spec":{"f:initContainers":{}}}}}`
	containersOnly = `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`
)

func entry(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "apps/v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

func initContainer(name string) map[string]any {
	return map[string]any{
		"name": name, "image": "busybox:1.37", "command": []any{"sh", "-c", "true"},
		"imagePullPolicy": "IfNotPresent", "resources": map[string]any{}, "securityContext": map[string]any{},
	}
}

func workload(kind string, inits []any, managed ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	podSpec := map[string]any{"containers": []any{map[string]any{"name": "app", "image": release.Image()}}}
	if inits != nil {
		podSpec["initContainers"] = inits
	}
	spec := map[string]any{"template": map[string]any{"spec": podSpec}}
	if kind == "CronJob" {
		spec = map[string]any{"jobTemplate": map[string]any{"spec": spec}}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": kind,
		"metadata": map[string]any{"name": "web", "namespace": "shop", "resourceVersion": "42"},
		"spec":     spec,
	}}
	u.SetManagedFields(managed)
	return u
}

func TestCheckOwnership(t *testing.T) {
	one := []any{initContainer("base-os-bash")}
	const apply, update = metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate
	for _, tc := range []struct {
		name       string
		obj        *unstructured.Unstructured
		scope      string
		wantNeeds  bool
		wantExists bool
		wantOwners []string
		wantOthers []string
	}{
		{"split ownership", workload("Deployment", one, entry("remedy", apply, applierImage), entry("Go-http-client", update, updaterRest)),
			"", true, true, []string{"Go-http-client", "remedy"}, []string{"Go-http-client"}},
		{"fully owned by the applier", workload("Deployment", one, entry("remedy", apply, ownsAll), entry("Go-http-client", update, containersOnly)),
			"", false, true, []string{"remedy"}, []string{}},
		{"owned as one atomic value", workload("Deployment", one, entry("remedy", apply, ownsAtomic)),
			"", false, true, []string{"remedy"}, []string{}},
		{"no managedFields at all", workload("Deployment", one),
			"", true, true, []string{}, []string{}},
		{"applier owns only part and nobody the rest", workload("Deployment", one, entry("remedy", apply, applierImage)),
			"", true, true, []string{"remedy"}, []string{}},
		{"applier owns the fields but not the item", workload("Deployment", one, entry("remedy", apply, ownsFields)),
			"", true, true, []string{"remedy"}, []string{}},
		{"the manager's own update entry is another owner", workload("Deployment", one, entry("remedy", update, ownsAll)),
			"", true, true, []string{"remedy (Update)"}, []string{"remedy (Update)"}},
		{"another manager is asked about", workload("Deployment", one, entry("remedy", apply, ownsAll)),
			"", true, true, []string{"remedy"}, []string{"remedy"}},
		{"second item owned by nobody", workload("Deployment", []any{initContainer("base-os-bash"), initContainer("setup")}, entry("remedy", apply, ownsAll)),
			"", true, true, []string{"remedy"}, []string{}},
		{"scope absent", workload("Deployment", nil, entry("Go-http-client", update, containersOnly)),
			"", false, false, []string{}, []string{}},
		{"scope empty", workload("Deployment", []any{}, entry("Go-http-client", update, containersOnly)),
			"", false, false, []string{}, []string{}},
		{"cronjob path", workload("CronJob", one),
			"", true, true, []string{}, []string{}},
		{"custom scope owned by an updater", workload("Deployment", one, entry("remedy", apply, ownsAll), entry("Go-http-client", update, containersOnly)),
			"spec.template.spec.containers", true, true, []string{"Go-http-client"}, []string{"Go-http-client"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			manager := "remedy"
			if tc.name == "another manager is asked about" {
				manager = "eno"
			}
			o, err := CheckOwnership(tc.obj, ScopePath(tc.obj.GetKind(), tc.scope), manager)
			require.NoError(t, err)
			assert.Equal(t, tc.wantNeeds, o.NeedsMigration())
			assert.Equal(t, tc.wantExists, o.Exists)
			assert.Equal(t, tc.wantOwners, o.Owners)
			assert.Equal(t, tc.wantOthers, o.Others)
		})
	}
}

func TestCheckOwnershipRejectsUndecodableFields(t *testing.T) {
	obj := workload("Deployment", []any{initContainer("x")}, entry("Go-http-client", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"i:x":{}}}`))
	_, err := CheckOwnership(obj, ScopePath("Deployment", ""), "remedy")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "decode managedFields of Go-http-client")
}

func TestOwnershipSummary(t *testing.T) {
	assert.Equal(t, "owners: Go-http-client, remedy", Ownership{Owners: []string{"Go-http-client", "remedy"}}.Summary())
	assert.Equal(t, "owners: none", Ownership{}.Summary())
}

func TestScopePath(t *testing.T) {
	assert.Equal(t, []string{"spec", "template", "spec", "initContainers"}, ScopePath("StatefulSet", ""))
	assert.Equal(t, []string{"spec", "jobTemplate", "spec", "template", "spec", "initContainers"}, ScopePath("CronJob", ""))
	assert.Equal(t, []string{"spec", "template", "spec", "volumes"}, ScopePath("Job", "spec.template.spec.volumes"))
}

func TestExtractKeepsExactlyTheOwnedFields(t *testing.T) {
	obj := workload("Deployment", []any{initContainer("base-os-bash"), initContainer("setup")})
	set, err := decodeFields(entry("remedy", metav1.ManagedFieldsOperationApply,
		`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:image":{}}},"f:initContainers":{"k:{\"name\":\"setup\"}":{".":{},"f:command":{}}}}}}}`))
	require.NoError(t, err)
	got, err := json.Marshal(extract(obj.Object, set))
	require.NoError(t, err)
	assert.JSONEq(t, `{"spec":{"template":{"spec":{
		"containers":[{"name":"app","image":"`+release.Image()+`"}],
		"initContainers":[{"name":"setup","command":["sh","-c","true"]}]}}}}`, string(got))
}

var deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

func counter(status string) float64 {
	var m dto.Metric
	_ = metrics.OwnershipMigrations.WithLabelValues(status).Write(&m)
	return m.GetCounter().GetValue()
}

func TestMigrateOwnershipSendsForcedApplyThenDropsCoOwners(t *testing.T) {
	const apply, update = metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate
	live := workload("Deployment", []any{initContainer("base-os-bash")}, entry("remedy", apply, applierImage), entry("Go-http-client", update, updaterRest))
	dyn := dynfake.NewSimpleDynamicClient(runtime.NewScheme())
	var sent []k8stesting.PatchActionImpl
	dyn.PrependReactor("patch", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sent = append(sent, a.(k8stesting.PatchActionImpl))
		out := live.DeepCopy()
		// Applying unchanged values leaves the updater a co-owner; the second
		// write is the managedFields the migration computed.
		out.SetManagedFields([]metav1.ManagedFieldsEntry{entry("remedy", apply, ownsAll), entry("Go-http-client", update, updaterRest)})
		if len(sent) == 2 {
			out.SetManagedFields([]metav1.ManagedFieldsEntry{entry("remedy", apply, ownsAll), entry("Go-http-client", update, containersOnly)})
		}
		return true, out, nil
	})
	before := counter(metrics.MigrationSuccess)

	out, rep, err := MigrateOwnership(context.Background(), dyn.Resource(deployments).Namespace("shop"), live, "", "", true)
	require.NoError(t, err)
	require.Len(t, sent, 2)
	assert.Equal(t, types.ApplyPatchType, sent[0].PatchType)
	assert.Equal(t, "remedy", sent[0].PatchOptions.FieldManager)
	require.NotNil(t, sent[0].PatchOptions.Force)
	assert.True(t, *sent[0].PatchOptions.Force)
	assert.Equal(t, []string{metav1.DryRunAll}, sent[0].PatchOptions.DryRun)
	assert.JSONEq(t, `{"apiVersion":"apps/v1","kind":"Deployment",
		"metadata":{"name":"web","namespace":"shop","resourceVersion":"42"},
		"spec":{"template":{"spec":{"initContainers":[{"name":"base-os-bash","image":"busybox:1.37","command":["sh","-c","true"],
			"imagePullPolicy":"IfNotPresent","resources":{},"securityContext":{}}]}}}}`, string(sent[0].Patch))

	assert.Equal(t, types.MergePatchType, sent[1].PatchType)
	assert.Equal(t, []string{metav1.DryRunAll}, sent[1].PatchOptions.DryRun)
	var patch struct {
		Metadata struct {
			ResourceVersion string                      `json:"resourceVersion"`
			ManagedFields   []metav1.ManagedFieldsEntry `json:"managedFields"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal(sent[1].Patch, &patch))
	assert.Equal(t, "42", patch.Metadata.ResourceVersion, "pinned to the object the dry-run started from")
	entries := patch.Metadata.ManagedFields
	require.Len(t, entries, 2)
	assert.JSONEq(t, ownsAll, string(entries[0].FieldsV1.Raw))
	assert.JSONEq(t, containersOnly, string(entries[1].FieldsV1.Raw))

	assert.True(t, rep.Wrote)
	assert.Equal(t, []string{"Go-http-client"}, rep.Displaced)
	assert.Equal(t, "owners: Go-http-client, remedy", rep.Before.Summary())
	assert.Equal(t, "owners: remedy", rep.After.Summary())
	assert.False(t, rep.After.NeedsMigration())
	assert.Len(t, out.GetManagedFields(), 2)
	assert.Equal(t, before, counter(metrics.MigrationSuccess), "dry-runs are not counted")
}

func TestWithoutOthersUnder(t *testing.T) {
	const apply, update = metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate
	scope := ScopePath("Deployment", "")
	for _, tc := range []struct {
		name        string
		in          []metav1.ManagedFieldsEntry
		want        []string // manager: fields of each entry kept
		wantChanged bool
	}{
		{"co-owner keeps its fields outside the scope",
			[]metav1.ManagedFieldsEntry{entry("remedy", apply, ownsAll), entry("Go-http-client", update, updaterRest)},
			[]string{"remedy: " + ownsAll, "Go-http-client: " + containersOnly}, true},
		{"entry owning only the scope is dropped",
			[]metav1.ManagedFieldsEntry{entry("remedy", apply, ownsAll), entry("kubectl-client-side-apply", update, ownsAll)},
			[]string{"remedy: " + ownsAll}, true},
		{"the manager's own update entry is stripped too",
			[]metav1.ManagedFieldsEntry{entry("remedy", apply, applierImage), entry("remedy", update, updaterRest)},
			[]string{"remedy: " + applierImage, "remedy: " + containersOnly}, true},
		{"nothing under the scope",
			[]metav1.ManagedFieldsEntry{entry("remedy", apply, ownsAll), entry("Go-http-client", update, containersOnly)},
			[]string{"remedy: " + ownsAll, "Go-http-client: " + containersOnly}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, changed, err := WithoutOthersUnder(tc.in, scope, "remedy")
			require.NoError(t, err)
			assert.Equal(t, tc.wantChanged, changed)
			require.Len(t, out, len(tc.want))
			for i, w := range tc.want {
				manager, fields, _ := strings.Cut(w, ": ")
				assert.Equal(t, manager, out[i].Manager)
				assert.JSONEq(t, fields, string(out[i].FieldsV1.Raw))
			}
		})
	}
}

func TestMigrateOwnershipSkipsWithoutWriting(t *testing.T) {
	for name, live := range map[string]*unstructured.Unstructured{
		"complete":     workload("Deployment", []any{initContainer("base-os-bash")}, entry("remedy", metav1.ManagedFieldsOperationApply, ownsAll)),
		"scope absent": workload("Deployment", nil, entry("Go-http-client", metav1.ManagedFieldsOperationUpdate, containersOnly)),
	} {
		t.Run(name, func(t *testing.T) {
			dyn := dynfake.NewSimpleDynamicClient(runtime.NewScheme())
			before := counter(metrics.MigrationSkipped)
			out, rep, err := MigrateOwnership(context.Background(), dyn.Resource(deployments).Namespace("shop"), live, "", "remedy", false)
			require.NoError(t, err)
			assert.Same(t, live, out)
			assert.False(t, rep.Wrote)
			assert.Empty(t, dyn.Actions(), "a skipped migration makes no API call")
			assert.Equal(t, before+1, counter(metrics.MigrationSkipped))
		})
	}
}

func TestApplyAsReappliesWhatTheManagerOwns(t *testing.T) {
	live := workload("Deployment", []any{initContainer("base-os-bash"), initContainer("setup")},
		entry("remedy", metav1.ManagedFieldsOperationApply, `{"f:metadata":{"f:labels":{"f:team":{}}},"f:spec":{"f:template":{"f:spec":{
			"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}},"f:initContainers":{"k:{\"name\":\"base-os-bash\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`),
		entry("Go-http-client", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{"f:owner":{}}}}`))
	live.SetLabels(map[string]string{"team": "core", "owner": "ops"})
	dyn := dynfake.NewSimpleDynamicClient(runtime.NewScheme())
	var sent k8stesting.PatchActionImpl
	dyn.PrependReactor("patch", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sent = a.(k8stesting.PatchActionImpl)
		return true, live, nil
	})
	_, err := ApplyAs(context.Background(), dyn.Resource(deployments).Namespace("shop"), live, "remedy", ScopePath("Deployment", ""), []any{}, false, false)
	require.NoError(t, err)
	assert.Equal(t, types.ApplyPatchType, sent.PatchType)
	assert.False(t, *sent.PatchOptions.Force)
	assert.Empty(t, sent.PatchOptions.DryRun)
	// Omitting the label or the app container would give them up, and with no
	// other owner the API server would delete them.
	assert.JSONEq(t, `{"apiVersion":"apps/v1","kind":"Deployment",
		"metadata":{"name":"web","namespace":"shop","resourceVersion":"42","labels":{"team":"core"}},
		"spec":{"template":{"spec":{"containers":[{"name":"app","image":"`+release.Image()+`"}],"initContainers":[]}}}}`, string(sent.Patch))
}
