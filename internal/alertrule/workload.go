package alertrule

import (
	"encoding/json"
	"fmt"
	"regexp"
)

// PodLabel is the alert label that names the Pod an alert is about, as the
// community's Pod alerts (KubePodCrashLooping, KubePodNotReady) carry it.
const PodLabel = "pod"

// Workload is what a template sees as .Workload: the workload that
// controls the Pod the alert's pod label names (through its ReplicaSet to a
// Deployment, or a StatefulSet, DaemonSet or Job directly). The worker
// resolves it before rendering; Render itself reads nothing.
type Workload struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
}

// usesWorkload finds .Workload in a template string (a field of the data,
// not a label called Workload).
var usesWorkload = regexp.MustCompile(`(^|[^\w\]])\.Workload\b`)

// UsesWorkload reports whether any string of t (a template, or a whole rule
// spec with its other steps) uses .Workload: only
// then does the worker resolve the alert's Pod.
func UsesWorkload(t any) bool {
	raw, err := json.Marshal(t)
	return err == nil && usesWorkload.Match(raw)
}

// MissingWorkloadError is a template's use of .Workload for an alert that
// names none; Render reports it without text/template's own wording.
type MissingWorkloadError struct{ Msg string }

func (e *MissingWorkloadError) Error() string { return e.Msg }

// workloadView is .Workload in a template: each field is a method, so a
// workload that could not be resolved fails the template with the reason
// instead of rendering an empty name.
type workloadView struct {
	w       *Workload
	missing string
}

func (v workloadView) get(field string) (string, error) {
	if v.w == nil {
		why := v.missing
		if why == "" {
			why = "no workload was resolved for this alert"
		}
		return "", &MissingWorkloadError{Msg: fmt.Sprintf("the template uses .Workload.%s, but %s", field, why)}
	}
	switch field {
	case "Kind":
		return v.w.Kind, nil
	case "Name":
		return v.w.Name, nil
	}
	return v.w.APIVersion, nil
}

// APIVersion, Kind and Name are the workload's, or the reason it is missing.
func (v workloadView) APIVersion() (string, error) { return v.get("APIVersion") }
func (v workloadView) Kind() (string, error)       { return v.get("Kind") }
func (v workloadView) Name() (string, error)       { return v.get("Name") }
