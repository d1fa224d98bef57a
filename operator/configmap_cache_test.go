package operator

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestStripConfigMapKeepsOnlyTheHash(t *testing.T) {
	big := strings.Repeat("x", 100<<10)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{"env": "prod"}, Annotations: map[string]string{"a": "b"}},
		Data: map[string]string{"big": big}, BinaryData: map[string][]byte{"bin": []byte("1")}}
	want := configMapHash(cm.DeepCopy())

	out, err := stripConfigMap(cm)
	require.NoError(t, err)
	got := out.(*corev1.ConfigMap)
	assert.Nil(t, got.Data, "the cache holds no data")
	assert.Nil(t, got.BinaryData)
	assert.Equal(t, "prod", got.Labels["env"])
	assert.Equal(t, "b", got.Annotations["a"])
	assert.Equal(t, want, configMapHash(got), "the hash survives the transform")

	again, err := stripConfigMap(got)
	require.NoError(t, err)
	assert.Equal(t, want, configMapHash(again.(*corev1.ConfigMap)), "stripping twice changes nothing")

	// A ConfigMap whose own annotation claims a hash but carries data is hashed from its data.
	forged := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{DataHashAnnotation: "forged"}}, Data: map[string]string{"k": "v"}}
	assert.NotEqual(t, "forged", configMapHash(forged))
}

// A data-less ConfigMap whose own annotation claims a hash is hashed from
// its (empty) data: the cache's hash is under a key the API server refuses,
// so no user can hand the operator a hash of their choosing.
func TestStripConfigMapNeverTrustsAUsersHash(t *testing.T) {
	want := configMapHash(&corev1.ConfigMap{})
	forged := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Annotations: map[string]string{"remedy.dev/data-hash": "forged"}}}
	assert.Equal(t, want, configMapHash(forged.DeepCopy()), "unstripped")
	out, err := stripConfigMap(forged)
	require.NoError(t, err)
	assert.Equal(t, want, configMapHash(out.(*corev1.ConfigMap)), "through the cache")
	assert.NotEmpty(t, validation.IsQualifiedName(strings.ToLower(DataHashAnnotation)), "the API server refuses the cache's key")
}
