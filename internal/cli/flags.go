// Package cli holds what the product command (cmd/remedy) and the developer
// command (cmd/remedy-dev) share: flags both take, and serving /metrics.
package cli

import (
	"flag"
	"fmt"
	"strings"
)

// ListFlag collects a repeated flag.
type ListFlag []string

func (l *ListFlag) String() string     { return strings.Join(*l, ",") }
func (l *ListFlag) Set(v string) error { *l = append(*l, v); return nil }

// DriftReportingFlags registers the worker's drift reporting flags; check
// validates what they were given.
func DriftReportingFlags(fs *flag.FlagSet) (callbacks *ListFlag, approval *bool, check func() error) {
	callbacks = &ListFlag{}
	fs.Var(callbacks, "drift-callback-url", "URL that receives every drift's DriftReports (repeatable; Kausality policies' spec.reporting add URLs per namespace)")
	approval = fs.Bool("drift-approval", false, "ask for a RemediationApprovalRequest on every drift in an unprotected namespace; approve writes a once approval, reject a rejection")
	return callbacks, approval, func() error {
		for _, u := range *callbacks {
			if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
				return fmt.Errorf("--drift-callback-url %q: want an http or https URL", u)
			}
		}
		return nil
	}
}
