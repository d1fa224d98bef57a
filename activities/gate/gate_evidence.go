package gate

import (
	"time"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/alertrule"
)

// The evidence a write carries that the gate verifies: what a person
// decided, and what an alert run was started for.

// Decision is one decision as the RAR's status records it.
type Decision struct {
	Decision  v1alpha1.Decision   `json:"decision"`
	DecidedBy string              `json:"decidedBy"`
	Via       v1alpha1.DecidedVia `json:"via"`
	At        time.Time           `json:"at"`
	Message   string              `json:"message,omitempty"`
}

// AlertSubject is what an alert workflow was started for.
type AlertSubject struct {
	Namespace string          `json:"namespace"`
	Rule      string          `json:"rule"`
	Alert     alertrule.Alert `json:"alert"`
}
