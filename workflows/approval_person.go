package workflows

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/remedy-dev/remedy/activities/approval"
	"github.com/remedy-dev/remedy/activities/gate"
	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/seal"
)

// versionPersonDecisions gates the authorization of a person's decision
// (one sent through Remedy's codec server, docs/security.md). A history
// without its marker never held one: runs before it could not decode them.
const versionPersonDecisions = "person-decisions"

// decisionPayload is an approval decision as it arrives on the approve and
// reject signals or the decide update: its JSON, which the handler decodes
// strictly, and, when a person sent it through the codec server, who they
// are (seal.PersonConverter signs it with their Kubernetes identity). A
// decision without a person's seal was sealed by Remedy's own parts: the
// operator's relay of a kubectl decision the approval webhook authorized.
type decisionPayload struct {
	raw json.RawMessage
	by  *seal.Person
}

var _ seal.PersonSigned = (*decisionPayload)(nil)

// UnmarshalJSON keeps the JSON for the strict decoding.
func (d *decisionPayload) UnmarshalJSON(b []byte) error {
	d.raw = append(json.RawMessage(nil), b...)
	return nil
}

// SignedBy records the person the codec server authenticated.
func (d *decisionPayload) SignedBy(p seal.Person) { d.by = &p }

// authorizePerson asks whether the person may decide the open request (the
// verb approve on it, as kubectl needs; approval.Approvals.AuthorizeApprover) and
// returns the request they may decide, or nil with why not. The requester
// check runs first, as the webhook's does, and offer repeats it.
func (g *approvalGate) authorizePerson(ctx workflow.Context, namespace, request string, who seal.Person, decision v1alpha1.Decision) (*openApproval, string) {
	if v := workflow.GetVersion(ctx, versionPersonDecisions, workflow.DefaultVersion, 1); v == workflow.DefaultVersion {
		return nil, "a person's decision reached a run that predates them"
	}
	open := g.open
	if open == nil || open.decision != nil || !open.is(namespace, request) {
		return nil, "no such approval request is open"
	}
	if err := open.refuses(who.Username, decision); err != nil {
		return nil, err.Error()
	}
	var why string
	in := approval.ApproverInput{Namespace: open.namespace, Name: open.name, Person: who}
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, quickOptions), approvals.AuthorizeApprover, in).Get(ctx, &why); err != nil {
		return nil, fmt.Sprintf("could not authorize %s: %v", who.Username, err)
	}
	if why != "" {
		return nil, why
	}
	return open, ""
}

// offerPerson authorizes a person's decision and, if they may decide, offers
// it to the request it was authorized for; it returns why not otherwise.
func (g *approvalGate) offerPerson(ctx workflow.Context, namespace, request string, who seal.Person, d gate.Decision) string {
	d.DecidedBy = who.Username
	open, why := g.authorizePerson(ctx, namespace, request, who, d.Decision)
	if open == nil {
		workflow.GetLogger(ctx).Warn("ignoring a person's approval decision: "+why, "decision", d.Decision, "approver", who.Username, "via", d.Via,
			"namespace", namespace, "request", request)
		return why
	}
	if g.open != open {
		// Another decision, the timer or a supersession closed it while the
		// authorization was asked.
		workflow.GetLogger(ctx).Info("ignoring approval decision: its request closed while it was authorized", "approver", who.Username, "request", open.name)
		return fmt.Sprintf("approval request %s/%s closed before the decision was authorized", open.namespace, open.name)
	}
	d.At = workflow.Now(ctx)
	g.offer(ctx, open.namespace, open.name, d)
	return ""
}
