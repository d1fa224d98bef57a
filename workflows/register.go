package workflows

import "go.temporal.io/sdk/workflow"

// Registry is what workers and replayers register workflows with.
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// RegisterAll registers every Remedy workflow under its contract name.
func RegisterAll(r Registry) {
	r.RegisterWorkflowWithOptions(ExecutionWorkflow, workflow.RegisterOptions{Name: "ExecutionWorkflow"})
	r.RegisterWorkflowWithOptions(RemediationWorkflow, workflow.RegisterOptions{Name: "RemediationWorkflow"})
	r.RegisterWorkflowWithOptions(ReloadWorkflow, workflow.RegisterOptions{Name: "ReloadWorkflow"})
	r.RegisterWorkflowWithOptions(DriftWorkflow, workflow.RegisterOptions{Name: "DriftWorkflow"})
	r.RegisterWorkflowWithOptions(AlertWorkflow, workflow.RegisterOptions{Name: "AlertWorkflow"})
	r.RegisterWorkflowWithOptions(AlertGuardWorkflow, workflow.RegisterOptions{Name: "AlertGuardWorkflow"})
}
