package procs

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// HelmConfig is the Helm SDK's configuration for the package's API server,
// keeping releases as Secrets (Helm's default driver) in namespace default.
func HelmConfig(t testing.TB) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig, ns := AdminKubeconfig(), "default"
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := new(action.Configuration)
	require.NoError(t, cfg.Init(flags, ns, "secret", func(format string, v ...any) { fmt.Fprintf(Log(), "helm: "+format+"\n", v...) }))
	return cfg
}
