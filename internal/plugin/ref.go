package plugin

import (
	"fmt"
	"slices"
	"strings"
)

// Kind is a Remedy resource the plugin acts on, named as kubectl names it.
type Kind string

const (
	KindExecution   Kind = "kexec"
	KindRemediation Kind = "rr"
	KindApproval    Kind = "rar"
)

// kindNames maps every name kubectl accepts for a Remedy kind (short name,
// singular, plural, kind, with or without the group) to the kind.
var kindNames = map[string]Kind{}

func init() {
	for k, names := range map[Kind][]string{
		KindExecution:   {"kexec", "kubernetesexecution", "kubernetesexecutions"},
		KindRemediation: {"rr", "remediationrequest", "remediationrequests"},
		KindApproval:    {"rar", "remediationapprovalrequest", "remediationapprovalrequests"},
	} {
		for _, n := range names {
			kindNames[n] = k
			kindNames[n+".remedy.dev"] = k
		}
	}
}

// Long is the kind's full name, as in messages from the API server.
func (k Kind) Long() string {
	switch k {
	case KindExecution:
		return "KubernetesExecution"
	case KindRemediation:
		return "RemediationRequest"
	case KindApproval:
		return "RemediationApprovalRequest"
	}
	return string(k)
}

// Ref names one object: its kind and name (the namespace comes from the flags).
type Ref struct {
	Kind Kind
	Name string
}

func (r Ref) String() string { return string(r.Kind) + "/" + r.Name }

// ParseRef reads a command's arguments: KIND NAME, KIND/NAME, or NAME alone
// (a KubernetesExecution). allowed lists the kinds the command takes, the
// first being the default.
func ParseRef(cmd string, args []string, allowed ...Kind) (Ref, error) {
	usage := fmt.Sprintf("usage: kubectl remedy %s [%s] NAME", cmd, joinKinds(allowed, "|"))
	var kind, name string
	switch len(args) {
	case 0:
		return Ref{}, fmt.Errorf("%s needs the name of a %s: %s", cmd, describeKinds(allowed), usage)
	case 1:
		if k, n, ok := strings.Cut(args[0], "/"); ok {
			kind, name = k, n
		} else if _, isKind := kindNames[strings.ToLower(args[0])]; isKind {
			return Ref{}, fmt.Errorf("%s %s needs a name: %s", cmd, args[0], usage)
		} else {
			kind, name = string(allowed[0]), args[0]
		}
	case 2:
		kind, name = args[0], args[1]
	default:
		return Ref{}, fmt.Errorf("%s takes one object, got %d arguments %q: %s", cmd, len(args), args, usage)
	}
	k, ok := kindNames[strings.ToLower(kind)]
	if !ok {
		return Ref{}, fmt.Errorf("%s: unknown kind %q: want %s", cmd, kind, describeKinds(allowed))
	}
	if !slices.Contains(allowed, k) {
		return Ref{}, fmt.Errorf("%s does not act on a %s: want %s", cmd, k.Long(), describeKinds(allowed))
	}
	if name == "" {
		return Ref{}, fmt.Errorf("%s %s needs a name: %s", cmd, kind, usage)
	}
	return Ref{Kind: k, Name: name}, nil
}

func joinKinds(ks []Kind, sep string) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, sep)
}

// describeKinds is "kexec (KubernetesExecution) or rr (RemediationRequest)".
func describeKinds(ks []Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = fmt.Sprintf("%s (%s)", k, k.Long())
	}
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
