// Package reloadrule holds the reload contract that the operator, which
// signals reload runs, and the activities, which restart workloads, must read
// alike: what a change is, how ConfigMap data is hashed, which policies select
// a workload, and what they ask of a restart. It does no I/O.
package reloadrule

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/remedy-dev/remedy/api/v1alpha1"
)

// ConfigChange is one ConfigMap's new data hash, the payload of the config-changed signal.
type ConfigChange struct {
	ConfigMap string `json:"configMap"`
	Hash      string `json:"hash"`
}

// DescribeChanges renders changes as sorted "configmap=hash" pairs, for
// logs, Events and approval reasons.
func DescribeChanges(changes []ConfigChange) string {
	parts := make([]string, 0, len(changes))
	for _, c := range changes {
		parts = append(parts, c.ConfigMap+"="+c.Hash)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// Declined is the value of v1alpha1.DeclinedAnnotation.
type Declined struct {
	// ConfigMaps maps each declined ConfigMap to the data hash that was declined.
	ConfigMaps map[string]string `json:"configMaps"`
	// Request and Decision name the last RemediationApprovalRequest that declined.
	Request  string `json:"request,omitempty"`
	Decision string `json:"decision,omitempty"`
}

// ParseDeclined reads the annotation; a missing or unreadable value declines nothing.
func ParseDeclined(value string) Declined {
	var d Declined
	if value == "" || json.Unmarshal([]byte(value), &d) != nil || d.ConfigMaps == nil {
		return Declined{ConfigMaps: map[string]string{}}
	}
	return d
}

// Encode renders the annotation value.
func (d Declined) Encode() string {
	b, _ := json.Marshal(d) // a struct of strings always encodes
	return string(b)
}

// DefaultScopeLabel is a policy's scopeLabel when it names none.
const DefaultScopeLabel = "env"

// ScopeLabel is the label whose value a ConfigMap and a workload must share.
func ScopeLabel(p *v1alpha1.ConfigReloadPolicy) string {
	if p.Spec.ScopeLabel == "" {
		return DefaultScopeLabel
	}
	return p.Spec.ScopeLabel
}

// ConfigMapHash is the sha256 of data and binaryData in canonical order:
// section, then keys sorted, each key and value length-prefixed so no two
// different maps encode alike. Labels and annotations do not count.
func ConfigMapHash(cm *corev1.ConfigMap) string {
	h := sha256.New()
	write := func(s string) { fmt.Fprintf(h, "%d:%s", len(s), s) }
	write("data")
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		write(k)
		write(cm.Data[k])
	}
	write("binaryData")
	for _, k := range slices.Sorted(maps.Keys(cm.BinaryData)) {
		write(k)
		write(string(cm.BinaryData[k]))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Selects reports whether p's workloadSelector matches a workload's
// labels. A policy being deleted, or whose selector does not parse (stored
// before admission checked it; the operator marks it InvalidSelector and
// acts on nothing for it), selects nothing.
func Selects(p *v1alpha1.ConfigReloadPolicy, workload map[string]string) bool {
	if !p.DeletionTimestamp.IsZero() {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.WorkloadSelector)
	return err == nil && sel.Matches(labels.Set(workload))
}

// ApprovalRule is what overlapping policies ask of a restart, combined
// strictly: it needs approval if any selecting policy requires it, and waits
// at most the shortest timeout any of those set.
type ApprovalRule struct {
	Required bool          `json:"required,omitempty"`
	Timeout  time.Duration `json:"timeout,omitempty"`
	// Policies names the policies that require it.
	Policies []string `json:"policies,omitempty"`
}

// CombineApproval combines the approval of every selecting policy.
func CombineApproval(policies []v1alpha1.ConfigReloadPolicy) ApprovalRule {
	var r ApprovalRule
	for _, p := range policies {
		a := p.Spec.Approval
		if a == nil || !a.Required {
			continue
		}
		r.Required = true
		r.Policies = append(r.Policies, p.Name)
		if t := a.Timeout.Or(0); t > 0 && (r.Timeout == 0 || t < r.Timeout) {
			r.Timeout = t
		}
	}
	return r
}
