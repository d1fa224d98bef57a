package v1alpha1

const (
	// RollbackAnnotation asks a RollbackReady execution to roll back; its value is the reason.
	RollbackAnnotation = "remedy.dev/rollback"
	// RollbackRequesterAnnotation names who set RollbackAnnotation. Remedy's
	// admission webhook writes it from the authenticated user; nobody else can.
	RollbackRequesterAnnotation = "remedy.dev/rollback-requester"
)
