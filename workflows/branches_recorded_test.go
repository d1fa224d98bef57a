package workflows

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// recorded is what a committed history shows of the branches it took.
type recorded struct {
	workflowType string
	// child: started by a parent workflow; continued: started by continue-as-new.
	child, continued bool
	// closed is the last event's type.
	closed string
	// reasons are the "reason" values in its payloads and the types of its
	// application failures (activities', retried activities', the run's own).
	reasons map[string]bool
	phases  map[string]bool
	// activities are the types of the activities it scheduled (not local ones).
	activities map[string]bool
	// payloads is every payload decoded, one a line.
	payloads string
}

var (
	reasonField = regexp.MustCompile(`"reason":"([A-Za-z]+)"`)
	phaseField  = regexp.MustCompile(`"phase":"([A-Za-z]+)"`)
)

func recordedHistories(t *testing.T) map[string]recorded {
	t.Helper()
	files, err := filepath.Glob("testdata/histories/*.json")
	require.NoError(t, err)
	out := map[string]recorded{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var h struct {
			Events []map[string]any `json:"events"`
		}
		require.NoError(t, json.Unmarshal(b, &h), f)
		require.NotEmpty(t, h.Events, f)
		r := recorded{reasons: map[string]bool{}, phases: map[string]bool{}, activities: map[string]bool{}}
		start, _ := h.Events[0]["workflowExecutionStartedEventAttributes"].(map[string]any)
		r.workflowType = str(start, "workflowType", "name")
		r.child = start["parentWorkflowExecution"] != nil
		r.continued = str(start, "continuedExecutionRunId") != ""
		r.closed, _ = h.Events[len(h.Events)-1]["eventType"].(string)
		var payloads []string
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				if _, meta := v["metadata"]; meta {
					if data, ok := v["data"].(string); ok {
						d, err := base64.StdEncoding.DecodeString(data)
						require.NoError(t, err, f)
						payloads = append(payloads, string(d))
					}
				}
				if typ := str(v, "applicationFailureInfo", "type"); typ != "" {
					r.reasons[typ] = true
				}
				if a, ok := v["activityTaskScheduledEventAttributes"].(map[string]any); ok {
					r.activities[str(a, "activityType", "name")] = true
				}
				for _, e := range v {
					walk(e)
				}
			case []any:
				for _, e := range v {
					walk(e)
				}
			}
		}
		for _, e := range h.Events {
			walk(e)
		}
		r.payloads = strings.Join(payloads, "\n")
		for _, m := range reasonField.FindAllStringSubmatch(r.payloads, -1) {
			r.reasons[m[1]] = true
		}
		for _, m := range phaseField.FindAllStringSubmatch(r.payloads, -1) {
			r.phases[m[1]] = true
		}
		out[filepath.Base(f)] = r
	}
	return out
}

// str reads a string at path in nested JSON objects.
func str(m map[string]any, path ...string) string {
	for i, k := range path {
		if i == len(path)-1 {
			s, _ := m[k].(string)
			return s
		}
		m, _ = m[k].(map[string]any)
	}
	return ""
}
