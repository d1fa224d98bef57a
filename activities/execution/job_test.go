package execution

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/actions"
	"github.com/remedy-dev/remedy/internal/release"
)

func testInput(ns string) JobInput {
	return JobInput{
		ExecutionNamespace: ns, ExecutionName: strings.Repeat("long-name-", 10), ExecutionUID: "0b7d1c7e-5d0f-4f5e-9a51-6d3f2b1f7e21",
		Request: actions.Request{
			Action: "migrate-field-ownership",
			Target: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
		},
		Timeout: 90 * time.Second, MaxRetries: 2,
	}
}

func TestJobNameIsDeterministicPerExecutionAndRequest(t *testing.T) {
	in := testInput("shop")
	name := JobName(in)
	assert.Equal(t, name, JobName(in), "a retried activity must find its Job by name")
	assert.Empty(t, validation.IsDNS1123Label(name), "the name is also the pods' job-name label value")
	assert.True(t, strings.HasPrefix(name, "remedy-migrate-field-ownership-"), name)

	other := in
	other.ExecutionUID = "another-uid"
	assert.NotEqual(t, name, JobName(other))
	rollback := in
	rollback.Request.Params = v1alpha1.ActionParameters{Replicas: ptr.To[int32](1)}
	assert.NotEqual(t, name, JobName(rollback), "a rollback in the same execution is a new Job")
}

func TestJobSpecOwnerAndLabels(t *testing.T) {
	j := &Jobs{Namespace: "remedy-system", ExecGate: &ExecGate{URL: "https://gate.example:9444/exec-gate", CA: "ca"}}
	job, err := j.job(testInput("shop"))
	require.NoError(t, err)
	assert.Equal(t, ptr.To[int32](0), job.Spec.BackoffLimit, "never retried, whatever maxRetries says")
	assert.Empty(t, job.OwnerReferences, "owner references cannot cross namespaces")
	assert.Equal(t, ptr.To[int64](90), job.Spec.ActiveDeadlineSeconds)
	assert.Equal(t, release.Image(), job.Spec.Template.Spec.Containers[0].Image)
	for k, v := range job.Labels {
		assert.Empty(t, validation.IsValidLabelValue(v), "label %s=%q", k, v)
	}

	job, err = j.job(testInput("remedy-system"))
	require.NoError(t, err)
	require.Len(t, job.OwnerReferences, 1)
	ref := job.OwnerReferences[0]
	assert.Equal(t, "remedy.dev/v1alpha1", ref.APIVersion)
	assert.Equal(t, "KubernetesExecution", ref.Kind)
	assert.EqualValues(t, "0b7d1c7e-5d0f-4f5e-9a51-6d3f2b1f7e21", ref.UID)
}
