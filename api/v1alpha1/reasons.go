package v1alpha1

// Reasons are API values: a .status.reason, a condition's reason, an Event's
// reason, or the type of a permanent activity failure (which a run then
// reports as its reason). Every process takes them from here, so each is
// spelled once.

// Why a write or its checks failed for good. These are also the
// ApplicationError types a RetryPolicy must not retry.
const (
	ReasonInvalidParameters = "InvalidParameters"
	ReasonForbidden         = "Forbidden"
	ReasonNotFound          = "NotFound"
	ReasonPolicyDenied      = "PolicyDenied"
	ReasonDryRunFailed      = "DryRunFailed"
	ReasonExecutionFailed   = "ExecutionFailed"
	ReasonExecutionTimeout  = "ExecutionTimeout"
	// ReasonPolicyMissing: no safety policy is loaded, so nothing may run.
	ReasonPolicyMissing = "PolicyMissing"
	// ReasonSubjectMismatch: the workflow's object is gone, or is not the one it was started for.
	ReasonSubjectMismatch = "SubjectMismatch"
	// ReasonProtectedNamespace is the failure type, and the Event and condition
	// reason, of a write refused because its namespace is protected.
	ReasonProtectedNamespace = "ProtectedNamespace"
	// ReasonPolicyBroken is the Warning Event on a policy ConfigMap whose Rego
	// breaks the safety policy.
	ReasonPolicyBroken = "PolicyBroken"
)

// How a KubernetesExecution's run ends or where it stands.
const (
	ReasonSucceeded           = "Succeeded"
	ReasonRollbackAvailable   = "RollbackAvailable"
	ReasonRollingBack         = "RollingBack"
	ReasonRolledBack          = "RolledBack"
	ReasonRollbackFailed      = "RollbackFailed"
	ReasonCanceled            = "Canceled"
	ReasonPostConditionFailed = "PostConditionFailed"
	ReasonPreconditionFailed  = "PreconditionFailed"
	// ReasonNoChange ends a run whose target was already in the desired state:
	// nothing was written, so nothing waits for approval or offers a rollback.
	ReasonNoChange = "NoChange"
	// ReasonOpenRunsLimited is the reason of a KubernetesExecution or
	// RemediationRequest held Pending, not started, because its namespace has
	// --max-open-runs-per-namespace runs open.
	ReasonOpenRunsLimited = "OpenRunsLimited"
	// ReasonWorkflowLost is the reason of a KubernetesExecution or
	// RemediationRequest the operator failed because its workflow is gone before
	// writing a final phase: Temporal has no such workflow, or it was terminated
	// or timed out, or it closed without a final phase that could be read.
	ReasonWorkflowLost = "WorkflowLost"
)

// How a RemediationRequest's steps end when one fails.
const (
	// ReasonStepFailed: a step failed and nothing was rolled back, because
	// the rollback policy keeps the completed steps or none changed anything.
	ReasonStepFailed = "StepFailed"
	// ReasonRollbackIncomplete: a step failed and every rollback tried
	// succeeded, but a completed step's action has no inverse, so its change stays.
	ReasonRollbackIncomplete = "RollbackIncomplete"
)

// Approval waits.
const (
	ReasonApprovalRequested = "ApprovalRequested"
	ReasonApprovalRejected  = "ApprovalRejected"
	ReasonApprovalExpired   = "ApprovalExpired"
)

// Signals refused before a workflow acts on them (Warning Events).
const (
	// ReasonUnknownSignal: no handler of the workflow reads a signal of that name.
	ReasonUnknownSignal = "UnknownSignal"
	// ReasonMalformedSignal: the signal's payload does not decode strictly.
	ReasonMalformedSignal = "MalformedSignal"
	// ReasonApproverRefused: a person's decision, sent through Temporal,
	// came from someone who may not decide the request.
	ReasonApproverRefused = "ApproverRefused"
	// ReasonRefusedSignal: a signal whose payload Remedy's parts did not seal, refused before delivery.
	ReasonRefusedSignal = "RefusedSignal"
)

// A ConfigReloadPolicy's Ready condition, and how a reload ends.
const (
	ReasonWatching        = "Watching"
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonInvalidSpec is a spec the schema should have refused, e.g. a
	// duration stored before the schema checked it.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonNothingToReload is the Ready=False reason and the Warning Event
	// of a policy that matches no workload to any ConfigMap; the message says
	// why. It turns Watching once a workload matches.
	ReasonNothingToReload = "NothingToReload"
	// ReasonWorkloadGone is the failure type of a reload whose workload was deleted.
	ReasonWorkloadGone = "WorkloadGone"
)

// A RemediationRule's Ready condition.
const (
	ReasonRuleValid     = "Valid"
	ReasonRuleInvalid   = "Invalid"
	ReasonRuleNoAuthor  = "NoAuthor"
	ReasonRuleForbidden = "Forbidden"
	ReasonRuleSuspended = "Suspended"
)

// How an alert's run ends or waits.
const (
	ReasonGitOpsManaged = "GitOpsManaged"
	ReasonResolved      = "Resolved"
	ReasonRejected      = "Rejected"
	// ReasonAlertSuspended ends an alert's run because its rule is suspended.
	ReasonAlertSuspended = "Suspended"
	// ReasonFrozen: the time is inside the rule's freeze calendar.
	ReasonFrozen = "Frozen"
	// ReasonGatedByAlert: an alert the rule's blockWhileFiring matches fires.
	ReasonGatedByAlert = "GatedByAlert"
	// ReasonGateUnknown: Alertmanager could not be read, so the gate holds (fail closed).
	ReasonGateUnknown = "GateUnknown"
	ReasonCircuitOpen = ConditionCircuitOpen
	ReasonStorm       = ConditionStorm
	// ReasonVerified: after the run acted, every alert it answers for resolved within spec.verify.window.
	ReasonVerified = AlertVerified
	// ReasonIneffective: an alert the run answers for still fired when spec.verify.window ended.
	ReasonIneffective = AlertIneffective
	// ReasonHeld: spec.holdFor has not passed; the run re-checks that the alert still fires before acting.
	ReasonHeld = AlertHeld
	// ReasonResolvedWhileHeld: the alert resolved during spec.holdFor, so nothing was done.
	ReasonResolvedWhileHeld = "ResolvedWhileHeld"
	// ReasonJoined: another alert's open run already answers for the same workload; this alert joined it.
	ReasonJoined = AlertJoined
	// ReasonEscalated: the run moved to the next step of spec.escalation.
	ReasonEscalated = "Escalated"
	// ReasonLadderExhausted: every step of spec.escalation ran and the alert still fires.
	ReasonLadderExhausted = "LadderExhausted"
)

// Drift decisions and their reports.
const (
	// ReasonDriftDenied is the reason of the Warning Event on a parent whose
	// child's change the drift webhook denied.
	ReasonDriftDenied = "DriftDenied"
	// ReasonCallbackRejected is the failure type of a callback URL that refused a
	// report for good (a 4xx other than 408 and 429).
	ReasonCallbackRejected = "CallbackRejected"
	// ReasonCallbackNotAcknowledged is the (retried) failure type of a receiver
	// that answered 2xx with a DriftReportResponse whose acknowledged is false.
	ReasonCallbackNotAcknowledged = "CallbackNotAcknowledged"
	// ReasonCallbackNotConfigured is the failure type of a report for a URL
	// that no configuration names for the parent's namespace (any more).
	ReasonCallbackNotConfigured = "CallbackNotConfigured"
)
