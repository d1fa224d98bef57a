package gate

// The worker's own permissions, beyond impersonating the action accounts
// (deploy/actions/worker-impersonation.yaml): it asks the API server whether an
// action account may act (SubjectAccessReview), reads namespace labels for the
// protected-namespace rule, reads policy ConfigMaps in its own namespace and
// checks that an action's ServiceAccount exists there (from a watch of them).

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=remedy-system,resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=remedy-system,resources=serviceaccounts,verbs=get;list;watch
