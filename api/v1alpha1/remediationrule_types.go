package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResolvePolicy says what a resolved alert does to the work it started.
// +kubebuilder:validation:Enum=Cancel;Finish
type ResolvePolicy string

const (
	// ResolveCancel ends approval waits, queued permits and steps that have not started.
	ResolveCancel ResolvePolicy = "Cancel"
	// ResolveFinish lets what was started run to its end.
	ResolveFinish ResolvePolicy = "Finish"
)

// GitOpsPolicy says what a rule does with a target that Argo CD or Flux manages.
// +kubebuilder:validation:Enum=Refuse;Approve;Act
type GitOpsPolicy string

const (
	GitOpsRefuse  GitOpsPolicy = "Refuse"
	GitOpsApprove GitOpsPolicy = "Approve"
	GitOpsAct     GitOpsPolicy = "Act"
)

// CircuitBreakerSpec stops a rule from remediating one target again and
// again: after MaxRuns runs on the same workload within Window, a new alert
// for it is refused and escalated instead of run.
type CircuitBreakerSpec struct {
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxRuns int32 `json:"maxRuns,omitempty"`
	// +optional
	// +kubebuilder:default="1h"
	Window *Duration `json:"window,omitempty"`
}

// BudgetSpec bounds a rule's blast radius in its namespace.
type BudgetSpec struct {
	// MaxPercent of the namespace's workloads (Deployments, StatefulSets,
	// DaemonSets) that may be in remediation by alert rules at once; at
	// least one is always allowed.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxPercent int32 `json:"maxPercent,omitempty"`
}

// FreezeAction says what a rule does with an alert inside a freeze window.
// +kubebuilder:validation:Enum=Wait;RequireApproval
type FreezeAction string

const (
	// FreezeWait holds the run on a durable timer until the window ends.
	FreezeWait FreezeAction = "Wait"
	// FreezeRequireApproval asks a person instead of acting on their own.
	FreezeRequireApproval FreezeAction = "RequireApproval"
)

// TimeRange is a times entry of Alertmanager's time_intervals: "HH:MM",
// start inclusive, end exclusive (end_time may be "24:00").
type TimeRange struct {
	// +kubebuilder:validation:Pattern=`^[0-9]{2}:[0-9]{2}$`
	StartTime string `json:"start_time"`
	// +kubebuilder:validation:Pattern=`^[0-9]{2}:[0-9]{2}$`
	EndTime string `json:"end_time"`
}

// TimeInterval is one entry of Alertmanager's time_intervals, in its own
// syntax (github.com/prometheus/alertmanager/timeinterval): a time matches
// when it is within every field that is set. Ranges are "a:b" or a single
// value, e.g. weekdays ["monday:friday"], days_of_month ["1:5", "-1"],
// months ["december"], years ["2026"]; location is an IANA zone (UTC if unset).
type TimeInterval struct {
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Times []TimeRange `json:"times,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	Weekdays []string `json:"weekdays,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	DaysOfMonth []string `json:"days_of_month,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	Months []string `json:"months,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	Years []string `json:"years,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Location string `json:"location,omitempty"`
}

// FreezeSpec is a change freeze: while the time is inside any of
// TimeIntervals, the rule does not act on its own.
type FreezeSpec struct {
	// TimeIntervals in Alertmanager's time_intervals syntax; the rule is
	// frozen while the time is inside any of them.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	TimeIntervals []TimeInterval `json:"timeIntervals"`
	// Action: Wait (default) holds the run until the window ends;
	// RequireApproval asks a person before acting inside the window.
	// +optional
	// +kubebuilder:default=Wait
	Action FreezeAction `json:"action,omitempty"`
}

// SilenceSpec silences the alert in Alertmanager while its remediation runs.
type SilenceSpec struct {
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// Duration of the silence; it is renewed for as long again each time
	// half of it has passed while the remediation still runs, and expired
	// when the run ends.
	// +optional
	// +kubebuilder:default="10m"
	Duration *Duration `json:"duration,omitempty"`
}

// RemediationTemplate is the RemediationRequest a matching alert starts.
// Every string in it is a Go text/template over {.Labels, .Annotations,
// .Fingerprint, .StartsAt} of the alert and .Workload {.Kind, .Name,
// .APIVersion}, the workload that controls the Pod the alert's pod label
// names (a template that uses it for an alert without one fails the run),
// with the functions lower, upper, trim, trimPrefix, trimSuffix, replace
// and default only.
type RemediationTemplate struct {
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=map
	// +listMapKey=name
	Steps []RemediationStep `json:"steps"`
	// +optional
	// +kubebuilder:default=OnRequiredPostConditionFailure
	RollbackPolicy RollbackPolicy `json:"rollbackPolicy,omitempty"`
}

// VerifyFailure says what a run does when its remediation did not resolve its alerts.
// +kubebuilder:validation:Enum=Escalate;Page;None
type VerifyFailure string

const (
	// VerifyEscalate runs the next step of spec.escalation.
	VerifyEscalate VerifyFailure = "Escalate"
	// VerifyPage asks a person, by an approval request.
	VerifyPage VerifyFailure = "Page"
	// VerifyNone records the run Ineffective and does nothing more.
	VerifyNone VerifyFailure = "None"
)

// DefaultVerifyWindow is spec.verify.window when unset.
const DefaultVerifyWindow = "10m"

// VerifySpec proves a remediation by its alert resolving: after the
// RemediationRequest completes, the run waits Window, then it is Verified
// only if Alertmanager holds none of the alerts it answers for (its own and
// those that joined it) as firing. Window must cover how long the alert
// takes to clear once its cause is gone, and at least the alert's own
// `for`, which a relapse needs before it fires again.
type VerifySpec struct {
	// +optional
	// +kubebuilder:default="10m"
	Window *Duration `json:"window,omitempty"`
	// OnFailure: Escalate (default when spec.escalation is set) runs the
	// next step of the ladder; Page asks a person; None (default otherwise) stops.
	// +optional
	OnFailure VerifyFailure `json:"onFailure,omitempty"`
}

// EscalationStep is one rung of spec.escalation, run when the rung before it
// was Ineffective: either a template, acted on and verified like spec.template
// (approval, gates, guard, breaker and budget included), or a page (an
// approval request that asks a person to take over).
// +kubebuilder:validation:XValidation:rule="has(self.template) != (has(self.page) && self.page)",message="an escalation step sets exactly one of template or page: true"
type EscalationStep struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// +optional
	Template *RemediationTemplate `json:"template,omitempty"`
	// Page asks a person by an approval request, and ends the ladder.
	// +optional
	Page bool `json:"page,omitempty"`
}

// RemediationRuleSpec maps alerts to remediations.
// +kubebuilder:validation:XValidation:rule="!has(self.escalation) || size(self.escalation) == 0 || has(self.verify)",message="spec.escalation needs spec.verify: a step escalates only when the one before it is verified Ineffective"
// +kubebuilder:validation:XValidation:rule="!has(self.verify) || !has(self.verify.onFailure) || self.verify.onFailure != 'Escalate' || (has(self.escalation) && size(self.escalation) > 0)",message="spec.verify.onFailure Escalate needs at least one step in spec.escalation"
// +kubebuilder:validation:XValidation:rule="!has(self.dryRun) || !self.dryRun || (!has(self.verify) && !has(self.escalation))",message="spec.verify and spec.escalation need a rule that acts: shadow mode (spec.dryRun) writes nothing to verify"
type RemediationRuleSpec struct {
	// Matchers in Alertmanager's syntax, all of which an alert's labels must
	// satisfy, e.g. `alertname="DemoHighLatency"` or `severity=~"critical|page"`.
	// Only alerts whose namespace label is this rule's namespace are ever
	// matched, whatever the matchers say.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	Matchers []string `json:"matchers"`
	// Template is the RemediationRequest to run, filled from the alert.
	Template RemediationTemplate `json:"template"`
	// Approval asks a person before each run; unset leaves it to the safety policy.
	// +optional
	Approval *ApprovalSpec `json:"approval,omitempty"`
	// Cooldown after a run ends before the same workload is remediated again.
	// +optional
	// +kubebuilder:default="5m"
	Cooldown *Duration `json:"cooldown,omitempty"`
	// MaxConcurrent remediations of this rule at once. An alert beyond it
	// puts the rule into storm mode: it is refused, and so is every new
	// alert of the rule, until Cooldown passes.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxConcurrent int32 `json:"maxConcurrent,omitempty"`
	// +optional
	// +kubebuilder:default={maxRuns:3,window:"1h"}
	CircuitBreaker *CircuitBreakerSpec `json:"circuitBreaker,omitempty"`
	// +optional
	// +kubebuilder:default={maxPercent:100}
	Budget *BudgetSpec `json:"budget,omitempty"`
	// DryRun (shadow mode) records what the rule would do, the server-side
	// dry-run of every step, and writes nothing.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// ResolvePolicy: Cancel ends pending work when the alert resolves; Finish lets it run.
	// +optional
	// +kubebuilder:default=Cancel
	ResolvePolicy ResolvePolicy `json:"resolvePolicy,omitempty"`
	// GitOps: what to do with a target carrying Argo CD's or Flux's tracking
	// labels or annotations. Refuse (default) never fights the GitOps controller.
	// +optional
	// +kubebuilder:default=Refuse
	GitOps GitOpsPolicy `json:"gitOps,omitempty"`
	// Freeze is a change-freeze calendar: inside it the rule waits, or asks
	// for approval, instead of acting.
	// +optional
	Freeze *FreezeSpec `json:"freeze,omitempty"`
	// BlockWhileFiring is a health gate: matchers in Alertmanager's syntax
	// (e.g. `alertname="ClusterDegraded"`); while any alert in Alertmanager
	// matches one of them, the run waits before acting and checks again.
	// An Alertmanager that cannot be read holds the run too (fail closed).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	BlockWhileFiring []string `json:"blockWhileFiring,omitempty"`
	// Silence the alert in Alertmanager while its remediation runs.
	// +optional
	Silence *SilenceSpec `json:"silence,omitempty"`
	// HoldFor waits this long after the alert arrives, then acts only if
	// Alertmanager still holds the alert as firing (phase Held meanwhile).
	// +optional
	HoldFor *Duration `json:"holdFor,omitempty"`
	// Verify proves each remediation by its alerts resolving (phases
	// Verifying, Verified, Ineffective). It also makes the run answer for its
	// workload: another alert of this rule for the same workload joins the
	// open run instead of starting one (phase Joined).
	// +optional
	Verify *VerifySpec `json:"verify,omitempty"`
	// Escalation is the ladder after spec.template: when a step is verified
	// Ineffective and spec.verify.onFailure is Escalate, the next one runs.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +listType=map
	// +listMapKey=name
	Escalation []EscalationStep `json:"escalation,omitempty"`
	// Suspend stops new alerts from starting anything.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
	// Author is who created or last changed the rule's spec: its
	// remediations run in their name. Set by Remedy's admission webhook from
	// the authenticated user; a value in the body is ignored. The author must
	// hold "execute" on every action of the template in the namespace.
	// +optional
	Author *Requester `json:"author,omitempty"`
}

// Alert phases recorded in RemediationRuleStatus.Alerts.
const (
	AlertQueued   = "Queued"
	AlertWaiting  = "WaitingApproval"
	AlertRunning  = "Running"
	AlertDone     = "Done"
	AlertRefused  = "Refused"
	AlertCanceled = "Canceled"
	AlertShadow   = "Shadow"
	// AlertHeld: spec.holdFor runs; the alert must still fire when it ends.
	AlertHeld = "Held"
	// AlertVerifying: the run acted and waits spec.verify.window for its alerts to resolve.
	AlertVerifying = "Verifying"
	// AlertVerified: the run acted and every alert it answers for resolved.
	AlertVerified = "Verified"
	// AlertIneffective: the run acted and an alert it answers for still fired.
	AlertIneffective = "Ineffective"
	// AlertJoined: the alert joined the open run of another alert for the same workload.
	AlertJoined = "Joined"
)

// AlertRecord is what the rule did with one alert.
type AlertRecord struct {
	Fingerprint string `json:"fingerprint"`
	// +optional
	AlertName string `json:"alertName,omitempty"`
	// Phase is Queued, WaitingApproval, Running, Done, Refused, Canceled or Shadow,
	// and for rules with holdFor, verify or escalation also Held, Verifying,
	// Verified, Ineffective or Joined: a blocked alert is either Queued (it
	// runs when its target is free) or Refused (dropped).
	Phase string `json:"phase"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	Target string `json:"target,omitempty"`
	// +optional
	Request string `json:"request,omitempty"`
	// +optional
	WorkflowID string `json:"workflowID,omitempty"`
	// +optional
	GeneratorURL string `json:"generatorURL,omitempty"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Until is when a run held by a freeze (reason Frozen) may act.
	// +optional
	Until *metav1.Time `json:"until,omitempty"`
	// Silence is the ID of the Alertmanager silence the run holds on the alert.
	// +optional
	Silence string `json:"silence,omitempty"`
	// DryRun holds, in shadow mode, each step's server-side dry-run diff.
	// +optional
	DryRun []string `json:"dryRun,omitempty"`
	// +optional
	At *metav1.Time `json:"at,omitempty"`
	// RunID is the workflow run this record is of. With Started it makes
	// the rule's counters idempotent per run: a retried status write of the
	// same run counts nothing again.
	// +optional
	RunID string `json:"runID,omitempty"`
	// Started is set once the run was counted in runsStarted.
	// +optional
	Started bool `json:"started,omitempty"`
	// RunbookURL is the alert's runbook_url annotation, as Alertmanager
	// holds it: an http(s) URL, shown as text only.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	RunbookURL string `json:"runbookURL,omitempty"`
	// Summary is the alert's summary annotation, bounded, shown as text only.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Summary string `json:"summary,omitempty"`
}

// AlertOutcome is the last outcome of one of the rule's alerts: refused,
// held, gated, waiting for approval, done, verified, ineffective, ...
type AlertOutcome struct {
	// Outcome is the key it is counted under in outcomes (see alert outcomes in docs/alerts.md).
	Outcome string `json:"outcome"`
	Phase   string `json:"phase"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	Fingerprint string `json:"fingerprint,omitempty"`
	// +optional
	AlertName string `json:"alertName,omitempty"`
	// +optional
	At *metav1.Time `json:"at,omitempty"`
}

// Refusal is the last alert the rule did not act on, and why.
type Refusal struct {
	Reason string `json:"reason"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	Fingerprint string `json:"fingerprint,omitempty"`
	// +optional
	At *metav1.Time `json:"at,omitempty"`
}

// RemediationRuleStatus counts and records what the rule did.
type RemediationRuleStatus struct {
	// Matches counts alerts (distinct firings) that matched.
	// +optional
	Matches int64 `json:"matches,omitempty"`
	// RunsStarted counts RemediationRequests (or shadow runs) started.
	// +optional
	RunsStarted int64 `json:"runsStarted,omitempty"`
	// +optional
	LastRun *metav1.Time `json:"lastRun,omitempty"`
	// +optional
	LastRefusal *Refusal `json:"lastRefusal,omitempty"`
	// Outcomes counts the rule's alert runs by outcome (Refused, Held,
	// Gated, WaitingApproval, Done, Verified, Ineffective, Joined, Canceled,
	// Shadow), each run's entry into each outcome once.
	// +optional
	Outcomes map[string]int64 `json:"outcomes,omitempty"`
	// LastOutcome is the most recent outcome of any of the rule's alerts.
	// +optional
	LastOutcome *AlertOutcome `json:"lastOutcome,omitempty"`
	// StormUntil is set while the rule is in storm mode.
	// +optional
	StormUntil *metav1.Time `json:"stormUntil,omitempty"`
	// Alerts are the most recent alerts, newest first (at most 20).
	// +optional
	// +kubebuilder:validation:MaxItems=20
	Alerts []AlertRecord `json:"alerts,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Conditions of a RemediationRule besides Ready.
const (
	ConditionCircuitOpen = "CircuitOpen"
	ConditionStorm       = "Storm"
)

// RemediationRule starts a RemediationRequest for each matching Alertmanager alert.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rrule,categories=remedy
// +kubebuilder:printcolumn:name="Matches",type=integer,JSONPath=`.status.matches`
// +kubebuilder:printcolumn:name="Runs",type=integer,JSONPath=`.status.runsStarted`
// +kubebuilder:printcolumn:name="LastRun",type=date,JSONPath=`.status.lastRun`
// +kubebuilder:printcolumn:name="LastRefusal",type=string,JSONPath=`.status.lastRefusal.reason`
// +kubebuilder:printcolumn:name="LastOutcome",type=string,JSONPath=`.status.lastOutcome.outcome`
// +kubebuilder:printcolumn:name="DryRun",type=boolean,JSONPath=`.spec.dryRun`,priority=1
// +kubebuilder:printcolumn:name="Author",type=string,JSONPath=`.spec.author.username`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RemediationRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RemediationRuleSpec   `json:"spec"`
	Status RemediationRuleStatus `json:"status,omitempty"`
}

// RemediationRuleList is a list of RemediationRule.
// +kubebuilder:object:root=true
type RemediationRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RemediationRule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RemediationRule{}, &RemediationRuleList{})
}
