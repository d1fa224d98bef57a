package operator

// The operator serves Remedy's codec server (internal/codecserver,
// compose.ServeCodec, --codec-addr): it already holds the payload keys and
// asks SubjectAccessReviews, and needs TokenReviews to learn who a person's
// token is. No new identity holds the keys.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
