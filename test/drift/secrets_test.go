package drift

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
)

// A Kausality policy that would route Secrets through the drift webhook is
// refused at admission, so their data never goes into a drift signal, a
// workflow history or a DriftReport. Other core kinds, a wildcard that
// excludes secrets, and another group's "secrets" are fine. Callback URLs
// must be http(s).
func TestPolicyRoutingSecretsIsRefused(t *testing.T) {
	c := policyClient(t)
	rule := func(group string, resources []string, excluded ...string) kv1.KausalitySpec {
		return kv1.KausalitySpec{Resources: []kv1.ResourceRule{{APIGroups: []string{group}, Resources: resources, Excluded: excluded}}}
	}
	const secretsMsg = "may not route Secrets through the drift webhook"
	for _, tc := range []struct {
		name string
		spec kv1.KausalitySpec
		msg  string // "": admitted
	}{
		{"secrets named", rule("", []string{"configmaps", "secrets"}), secretsMsg},
		{"the core wildcard", rule("", []string{"*"}), secretsMsg},
		{"the core wildcard excluding other kinds", rule("", []string{"*"}, "configmaps"), secretsMsg},
		{"the core wildcard excluding secrets", rule("", []string{"*"}, "secrets"), ""},
		{"core kinds but secrets", rule("", []string{"configmaps", "pods"}), ""},
		{"another group's secrets", rule("example.com", []string{"secrets"}), ""},
		{"a callback that is no http URL", kv1.KausalitySpec{Resources: rule("apps", []string{"replicasets"}).Resources,
			Reporting: &kv1.DriftReporting{CallbackURLs: []string{"file:///etc/passwd"}}}, "callbackURLs must be http or https URLs"},
		{"an http callback", kv1.KausalitySpec{Resources: rule("apps", []string{"replicasets"}).Resources,
			Reporting: &kv1.DriftReporting{CallbackURLs: []string{"https://127.0.0.1:9/drift"}, RequestApproval: true}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Create(context.Background(), &kv1.Kausality{ObjectMeta: metav1.ObjectMeta{GenerateName: "secrets-"}, Spec: tc.spec}, ctrlclient.DryRunAll)
			if tc.msg == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, apierrors.IsInvalid(err), "%v", err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}
