package harness

// WriteKubeconfig writes a cluster-admin kubeconfig of the parts to path,
// for kubectl and the kubectl plugin.
func WriteKubeconfig(path string) error { return env.WriteAdminKubeconfig(path) }
