package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/duration"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// RunRow is one row of `kubectl remedy list`: an execution or a remediation.
type RunRow struct {
	Kind      string    `json:"kind"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Action    string    `json:"action,omitempty"`
	Target    string    `json:"target,omitempty"`
	Phase     string    `json:"phase,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Requester string    `json:"requester,omitempty"`
	Created   time.Time `json:"created"`
	// Request names the RemediationRequest an execution is a step of.
	Request    string `json:"request,omitempty"`
	WorkflowID string `json:"workflowID,omitempty"`
}

// Pending is one row of `kubectl remedy pending`: an approval request that
// waits for a decision the user may take.
type Pending struct {
	Namespace  string    `json:"namespace"`
	Name       string    `json:"name"`
	Action     string    `json:"action"`
	Target     string    `json:"target"`
	Requester  string    `json:"requester,omitempty"`
	Subject    string    `json:"subject"`
	RequiredBy time.Time `json:"requiredBy"`
	// Remaining until requiredBy, to the second.
	Remaining  string `json:"remaining"`
	WorkflowID string `json:"workflowID"`
	// OtherApprover: the requester may not approve it; another person must.
	OtherApprover bool `json:"otherApprover,omitempty"`
	// Runbook and Summary are, for a request an alert's run opened, the
	// alert's runbook link and summary, as plain text.
	Runbook string `json:"runbook,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// listing holds the flags the list commands share.
type listing struct {
	output        string
	allNamespaces bool
}

func (l *listing) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&l.output, "output", "o", "", "output format: json or yaml (default: a table)")
	cmd.Flags().BoolVarP(&l.allNamespaces, "all-namespaces", "A", false, "list across all namespaces")
}

func (l *listing) check() error {
	if l.output != "" && l.output != "json" && l.output != "yaml" {
		return fmt.Errorf("--output %q: want json or yaml", l.output)
	}
	return nil
}

func (l *listing) in(namespace string) []ctrlclient.ListOption {
	if l.allNamespaces {
		return nil
	}
	return []ctrlclient.ListOption{ctrlclient.InNamespace(namespace)}
}

func newListCommand(s *session) *cobra.Command {
	var l listing
	var since time.Duration
	var today bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the executions and remediations of the namespace, newest first",
		Long: `Lists KubernetesExecutions and RemediationRequests with their action, target,
phase, reason and requester, newest first. --today keeps those created since
local midnight, --since those created within a duration. -o json|yaml prints
{"items":[...]} for scripts.`,
		Example: "  kubectl remedy list -n demo --today\n  kubectl remedy list -A --since 1h -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := l.check(); err != nil {
				return err
			}
			if err := s.connect(); err != nil {
				return err
			}
			var after time.Time
			now := time.Now()
			switch {
			case today:
				y, m, d := now.Date()
				after = time.Date(y, m, d, 0, 0, 0, 0, now.Location())
			case since > 0:
				after = now.Add(-since)
			}
			runs, err := s.runs(cmd.Context(), &l, after)
			if err != nil {
				return err
			}
			return write(s.out, l.output, runs, func(w io.Writer) { writeRuns(w, runs, l.allNamespaces, now) })
		},
	}
	l.addFlags(cmd)
	cmd.Flags().DurationVar(&since, "since", 0, "only runs created within this duration (0: all)")
	cmd.Flags().BoolVar(&today, "today", false, "only runs created since local midnight")
	return cmd
}

func newPendingCommand(s *session) *cobra.Command {
	var l listing
	cmd := &cobra.Command{
		Use:   "pending",
		Short: "List the approval requests waiting for a decision you may take",
		Long: `Lists the open RemediationApprovalRequests (no decision, requiredBy not passed)
in namespaces where you hold the verb approve on remediationapprovalrequests,
leaving out those you asked for that need another approver. -o json|yaml
prints {"items":[...]} for scripts.`,
		Example: "  kubectl remedy pending -n demo\n  kubectl remedy pending -A -o yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := l.check(); err != nil {
				return err
			}
			if err := s.connect(); err != nil {
				return err
			}
			now := time.Now()
			pending, err := s.pending(cmd.Context(), &l, now)
			if err != nil {
				return err
			}
			return write(s.out, l.output, pending, func(w io.Writer) { writePending(w, pending, l.allNamespaces) })
		},
	}
	l.addFlags(cmd)
	return cmd
}

// runs lists executions and remediations created after after, newest first.
func (s *session) runs(ctx context.Context, l *listing, after time.Time) ([]RunRow, error) {
	var kexecs v1alpha1.KubernetesExecutionList
	if err := s.kube.List(ctx, &kexecs, l.in(s.namespace)...); err != nil {
		return nil, fmt.Errorf("list kubernetesexecutions: %w", err)
	}
	var rrs v1alpha1.RemediationRequestList
	if err := s.kube.List(ctx, &rrs, l.in(s.namespace)...); err != nil {
		return nil, fmt.Errorf("list remediationrequests: %w", err)
	}
	runs := make([]RunRow, 0, len(kexecs.Items)+len(rrs.Items))
	for _, k := range kexecs.Items {
		r := RunRow{Kind: "KubernetesExecution", Namespace: k.Namespace, Name: k.Name, Action: k.Spec.Action, Target: k.Spec.Target.KindName(),
			Phase: string(k.Status.Phase), Reason: k.Status.Reason, Requester: requesterOf(k.Spec.Requester), Created: k.CreationTimestamp.Time,
			WorkflowID: k.Status.WorkflowID}
		if ref := k.Spec.RemediationRequestRef; ref != nil {
			r.Request = ref.Name
		}
		runs = append(runs, r)
	}
	for _, rr := range rrs.Items {
		actions := make([]string, 0, len(rr.Spec.Steps))
		for _, st := range rr.Spec.Steps {
			actions = append(actions, st.Execution.Action)
		}
		runs = append(runs, RunRow{Kind: "RemediationRequest", Namespace: rr.Namespace, Name: rr.Name, Action: strings.Join(actions, ","),
			Target: v1alpha1.StepsProgress(rr.Status.Steps, len(rr.Spec.Steps)) + " steps", Phase: string(rr.Status.Phase), Reason: rr.Status.Reason,
			Requester: requesterOf(rr.Spec.Requester), Created: rr.CreationTimestamp.Time, WorkflowID: rr.Status.WorkflowID})
	}
	runs = slices.DeleteFunc(runs, func(r RunRow) bool { return r.Created.Before(after) })
	slices.SortStableFunc(runs, func(a, b RunRow) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return runs, nil
}

// pending lists the open requests the user may decide, soonest due first.
func (s *session) pending(ctx context.Context, l *listing, now time.Time) ([]Pending, error) {
	var rars v1alpha1.RemediationApprovalRequestList
	if err := s.kube.List(ctx, &rars, l.in(s.namespace)...); err != nil {
		return nil, s.unlisted(ctx, l, err)
	}
	me, err := s.whoAmI(ctx)
	if err != nil {
		return nil, err
	}
	mayApprove := map[string]bool{}
	var out []Pending
	for _, rar := range rars.Items {
		c := rar.Spec.ApprovalContext
		if rar.Status.Decision != "" || !rar.Spec.RequiredBy.After(now) {
			continue
		}
		if c.RequireDistinctApprover && c.Requester != "" && c.Requester == me {
			continue
		}
		ok, seen := mayApprove[rar.Namespace]
		if !seen {
			if ok, err = s.canApprove(ctx, rar.Namespace); err != nil {
				return nil, err
			}
			mayApprove[rar.Namespace] = ok
		}
		if !ok {
			continue
		}
		left := rar.Spec.RequiredBy.Sub(now).Round(time.Second)
		out = append(out, Pending{Namespace: rar.Namespace, Name: rar.Name, Action: c.Action, Target: c.Target.KindName(), Requester: c.Requester,
			Subject: rar.Spec.SubjectRef.KindName(), RequiredBy: rar.Spec.RequiredBy.UTC(), Remaining: left.String(),
			WorkflowID: rar.Spec.WorkflowID, OtherApprover: c.RequireDistinctApprover, Runbook: plainText(c.RunbookURL), Summary: plainText(c.Summary)})
	}
	slices.SortStableFunc(out, func(a, b Pending) int { return a.RequiredBy.Compare(b.RequiredBy) })
	return out, nil
}

// unlisted explains a refused list of approval requests: in a namespace
// where the user may not approve, nothing waits for them (nil); elsewhere
// the error names the grant that is missing.
func (s *session) unlisted(ctx context.Context, l *listing, err error) error {
	if !apierrors.IsForbidden(err) {
		return fmt.Errorf("list remediationapprovalrequests: %w", err)
	}
	if l.allNamespaces {
		return fmt.Errorf("list remediationapprovalrequests in all namespaces: you may not; name a namespace where you approve with -n (%w)", err)
	}
	ok, rerr := s.canApprove(ctx, s.namespace)
	switch {
	case rerr != nil:
		return rerr
	case !ok:
		return nil
	}
	return fmt.Errorf("list remediationapprovalrequests in %s: you hold approve there but not list; the role in deploy/rbac/approver-example.yaml grants both (%w)", s.namespace, err)
}

// whoAmI is the username the API server authenticates the flags' credentials as.
func (s *session) whoAmI(ctx context.Context) (string, error) {
	r := &authenticationv1.SelfSubjectReview{}
	if err := s.kube.Create(ctx, r); err != nil {
		return "", fmt.Errorf("review own identity: %w", err)
	}
	return r.Status.UserInfo.Username, nil
}

// canApprove asks the API server whether the user holds the verb approve on
// approval requests in namespace, as the approval webhook will.
func (s *session) canApprove(ctx context.Context, namespace string) (bool, error) {
	r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "approve",
			Group: v1alpha1.GroupVersion.Group, Resource: "remediationapprovalrequests"}}}
	if err := s.kube.Create(ctx, r); err != nil {
		return false, fmt.Errorf("review approve permission in %s: %w", namespace, err)
	}
	return r.Status.Allowed, nil
}

func requesterOf(r *v1alpha1.Requester) string {
	if r == nil {
		return ""
	}
	return r.Username
}

// write prints items as {"items":[...]} in json or yaml, or as table.
func write[T any](out io.Writer, format string, items []T, table func(io.Writer)) error {
	if items == nil {
		items = []T{}
	}
	list := struct {
		Items []T `json:"items"`
	}{items}
	switch format {
	case "json":
		b, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			return fmt.Errorf("encode json: %w", err)
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(list)
		if err != nil {
			return fmt.Errorf("encode yaml: %w", err)
		}
		_, err = out.Write(b)
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	table(w)
	return w.Flush()
}

func writeRuns(w io.Writer, runs []RunRow, withNamespace bool, now time.Time) {
	if len(runs) == 0 {
		fmt.Fprintln(w, "No runs found.")
		return
	}
	fmt.Fprintln(w, columns(withNamespace, "NAME\tACTION\tTARGET\tPHASE\tREASON\tREQUESTER\tAGE"))
	for _, r := range runs {
		name := "kexec/" + r.Name
		if r.Kind == "RemediationRequest" {
			name = "rr/" + r.Name
		}
		fmt.Fprintln(w, columns(withNamespace, strings.Join([]string{name, r.Action, r.Target, orDash(r.Phase), orDash(r.Reason), orDash(r.Requester),
			duration.HumanDuration(now.Sub(r.Created))}, "\t"), r.Namespace))
	}
}

func writePending(w io.Writer, pending []Pending, withNamespace bool) {
	if len(pending) == 0 {
		fmt.Fprintln(w, "No approval requests wait for you.")
		return
	}
	fmt.Fprintln(w, columns(withNamespace, "NAME\tACTION\tTARGET\tREQUESTER\tSUBJECT\tREMAINING\tRUNBOOK"))
	for _, p := range pending {
		fmt.Fprintln(w, columns(withNamespace, strings.Join([]string{"rar/" + p.Name, p.Action, p.Target, orDash(p.Requester), p.Subject, p.Remaining, orDash(p.Runbook)}, "\t"), p.Namespace))
	}
}

// columns prefixes a row with its namespace (or the header with NAMESPACE) under -A.
func columns(withNamespace bool, row string, namespace ...string) string {
	if !withNamespace {
		return row
	}
	if len(namespace) == 0 {
		return "NAMESPACE\t" + row
	}
	return namespace[0] + "\t" + row
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
