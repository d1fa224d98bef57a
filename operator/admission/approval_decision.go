// Package webhook holds Remedy's admission webhooks. Decisions are pure
// functions; the handlers only decode requests and map verdicts to responses.
package admission

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// ApproveVerb is the custom verb a user needs on remediationapprovalrequests
// to decide one, as the CertificateSigningRequest API does with "approve".
const ApproveVerb = "approve"

// StatusChange is one update of a RAR's status as the webhook sees it.
type StatusChange struct {
	Namespace, Name string
	Old, New        v1alpha1.RemediationApprovalRequestStatus
	// User is the authenticated requester, never anything from the body.
	User string
	// Trusted requesters (Remedy's worker) record decisions Temporal already attributed.
	Trusted bool
	// Expirer is the operator, which records Expired, and nothing else, on a
	// request past requiredBy whose workflow is gone: no timer is left to.
	Expirer bool
	// Authorized is the SubjectAccessReview's answer for ApproveVerb; only
	// asked when NeedsAuthorization.
	Authorized bool
	// Anonymous: the API server authenticated nobody (see Anonymous); such a
	// user decides nothing, whatever RBAC grants them.
	Anonymous bool
	// Requester and DistinctApprover are the stored request's
	// spec.approvalContext requester and requireDistinctApprover: then the
	// requester may reject, not approve.
	Requester        string
	DistinctApprover bool
	// RequiredBy is the request's spec.requiredBy; no person decides after it.
	RequiredBy time.Time
	Now        time.Time
}

// Verdict is the admission answer: a refusal with an HTTP code, or the status to store.
type Verdict struct {
	Allowed bool
	Code    int32
	Message string
	// Status is the mutated status to store; nil leaves the request as sent.
	Status *v1alpha1.RemediationApprovalRequestStatus
}

// NeedsAuthorization reports whether the change sets a decision, which only
// users granted ApproveVerb may do. The expirer's Expired needs no grant:
// DecideStatusChange lets it through only past requiredBy.
func NeedsAuthorization(old, new v1alpha1.RemediationApprovalRequestStatus, expirer bool) bool {
	return old.Decision == "" && new.Decision != "" && !(expirer && new.Decision == v1alpha1.DecisionExpired)
}

// DecideStatusChange is the whole policy of RAR status updates: a decision
// needs the approve verb and is final; only trusted recorders (the worker,
// writing the decision the workflow took) set status.decision. A person's
// decision becomes status.requestedDecision, attributed to the requester,
// for the operator to relay: the workflow takes the first decision that
// reaches it, and the worker records that one.
func DecideStatusChange(c StatusChange) Verdict {
	if !c.Trusted && !c.Expirer && c.Old.Decision == "" && equality.Semantic.DeepEqual(c.Old, c.New) {
		// The API server dropped what the patch said (a typo such as
		// "decison") before admission: without this refusal kubectl exits 0
		// with "patched (no change)".
		return Verdict{Code: http.StatusUnprocessableEntity, Message: fmt.Sprintf(
			"the update changes nothing in the status of RemediationApprovalRequest %s/%s: the API server drops fields the schema does not have (see its \"unknown field\" warning); %s",
			c.Namespace, c.Name, howToDecide)}
	}
	if c.Old.RequestedDecision == nil || c.New.RequestedDecision != nil {
		return decideStatusChange(c)
	}
	// The writer read the request before a kubectl decision arrived (the
	// worker recording, the operator refreshing): keep the requested decision,
	// and the API server's resourceVersion check answers the stale write with
	// 409 Conflict, which the writer retries on a fresh read.
	c.New = *c.New.DeepCopy()
	c.New.RequestedDecision = c.Old.RequestedDecision
	v := decideStatusChange(c)
	if v.Allowed && v.Status == nil {
		v.Status = &c.New
	}
	return v
}

func decideStatusChange(c StatusChange) Verdict {
	old, next := c.Old, c.New
	if !sameRequest(old.RequestedDecision, next.RequestedDecision) {
		return Verdict{Code: http.StatusUnprocessableEntity, Message: "requestedDecision is set by the server from a decision patched with kubectl"}
	}
	if old.Decision != "" {
		if !sameDecision(old, next) {
			return Verdict{Code: http.StatusConflict, Message: fmt.Sprintf("RemediationApprovalRequest %s was already decided (%s): decision is final once set",
				c.Name, v1alpha1.DecisionText(old.Decision, old.DecidedBy, old.DecidedVia))}
		}
		return Verdict{Allowed: true}
	}
	if next.Decision == "" {
		if next.DecidedBy != "" || next.DecidedVia != "" || next.DecidedAt != nil {
			return Verdict{Code: http.StatusUnprocessableEntity, Message: "decidedBy, decidedVia and decidedAt are set by the server with a decision"}
		}
		return Verdict{Allowed: true}
	}
	if c.Expirer && !c.Trusted && next.Decision == v1alpha1.DecisionExpired {
		if c.Now.Before(c.RequiredBy) {
			return Verdict{Code: http.StatusConflict, Message: fmt.Sprintf("RemediationApprovalRequest %s/%s is open until %s (spec.requiredBy): it cannot be expired before",
				c.Namespace, c.Name, c.RequiredBy.UTC().Format(time.RFC3339))}
		}
		return Verdict{Allowed: true}
	}
	if c.Anonymous {
		return Verdict{Code: http.StatusForbidden, Message: fmt.Sprintf(
			"an anonymous user (%q) may not decide RemediationApprovalRequest %s/%s: every decision is attributed to an authenticated user",
			c.User, c.Namespace, c.Name)}
	}
	if !c.Authorized {
		return Verdict{Code: http.StatusForbidden, Message: fmt.Sprintf(
			"user %q may not decide RemediationApprovalRequest %s/%s: it needs the verb %q on remediationapprovalrequests.remedy.dev in namespace %s (see deploy/rbac/approver-example.yaml)",
			c.User, c.Namespace, c.Name, ApproveVerb, c.Namespace)}
	}
	if c.Trusted {
		return Verdict{Allowed: true}
	}
	if next.Decision != v1alpha1.DecisionApproved && next.Decision != v1alpha1.DecisionRejected && next.Decision != v1alpha1.DecisionExpired {
		// Checked before the decision moves to requestedDecision, whose
		// schema would name a field the person never wrote.
		return Verdict{Code: http.StatusUnprocessableEntity, Message: fmt.Sprintf(
			"status.decision: Unsupported value %q: %s", next.Decision, howToDecide)}
	}
	if c.DistinctApprover && next.Decision == v1alpha1.DecisionApproved && c.Requester != "" && c.User == c.Requester {
		return Verdict{Code: http.StatusForbidden, Message: fmt.Sprintf(
			"user %q requested this change and may not approve it: RemediationApprovalRequest %s/%s needs an approver other than the requester (spec.approvalContext.requireDistinctApprover); ask another approver, or reject it to withdraw the request",
			c.User, c.Namespace, c.Name)}
	}
	if closed := closedBy(old); closed != nil {
		return Verdict{Code: http.StatusConflict, Message: fmt.Sprintf("RemediationApprovalRequest %s/%s is closed (%s: %s): it accepts no decision",
			c.Namespace, c.Name, closed.Reason, closed.Message)}
	}
	if next.Decision == v1alpha1.DecisionExpired {
		return Verdict{Code: http.StatusUnprocessableEntity, Message: "only the timer expires a request; decide Approved or Rejected"}
	}
	if !c.Now.Before(c.RequiredBy) {
		return Verdict{Code: http.StatusConflict, Message: fmt.Sprintf("RemediationApprovalRequest %s/%s expired at %s (spec.requiredBy): no decision is accepted after it",
			c.Namespace, c.Name, c.RequiredBy.UTC().Format(time.RFC3339))}
	}
	if r := old.RequestedDecision; r != nil {
		return Verdict{Code: http.StatusConflict, Message: fmt.Sprintf("RemediationApprovalRequest %s/%s already has a decision on its way to the workflow (%s by %s at %s): the first decision wins",
			c.Namespace, c.Name, r.Decision, r.RequestedBy, r.RequestedAt.UTC().Format(time.RFC3339))}
	}
	out := next.DeepCopy()
	out.RequestedDecision = &v1alpha1.RequestedDecision{Decision: next.Decision, RequestedBy: c.User, RequestedAt: metav1.NewTime(c.Now), Message: next.DecisionMessage}
	out.Decision, out.DecisionMessage, out.DecidedBy, out.DecidedVia, out.DecidedAt = "", "", "", "", nil
	return Verdict{Allowed: true, Status: out}
}

// howToDecide ends every refusal of a malformed decision.
const howToDecide = `a person decides with status.decision "Approved" or "Rejected" (and, optionally, status.decisionMessage) on the status subresource: ` +
	`kubectl patch rar <name> --subresource=status --type=merge -p '{"status":{"decision":"Approved"}}', or kubectl remedy approve|reject rar <name>`

// closedBy returns the Ready=False condition of a request the operator closed
// without a decision (its subject ended, or it names another workflow);
// nothing waits for a decision on it any more.
// AnonymousUser and UnauthenticatedGroup are what the API server calls a
// request it authenticated nobody for.
const (
	AnonymousUser        = "system:anonymous"
	UnauthenticatedGroup = "system:unauthenticated"
)

// Anonymous reports whether the API server authenticated nobody: the
// anonymous user, its group, or no name at all.
func Anonymous(user string, groups []string) bool {
	return strings.TrimSpace(user) == "" || user == AnonymousUser || slices.Contains(groups, UnauthenticatedGroup)
}

func closedBy(s v1alpha1.RemediationApprovalRequestStatus) *metav1.Condition {
	if c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
		return c
	}
	return nil
}

func sameRequest(a, b *v1alpha1.RequestedDecision) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Decision == b.Decision && a.RequestedBy == b.RequestedBy && a.RequestedAt.Equal(&b.RequestedAt) && a.Message == b.Message
}

func sameDecision(a, b v1alpha1.RemediationApprovalRequestStatus) bool {
	return a.Decision == b.Decision && a.DecidedBy == b.DecidedBy && a.DecidedVia == b.DecidedVia &&
		a.DecisionMessage == b.DecisionMessage && a.DecidedAt.Equal(b.DecidedAt)
}
