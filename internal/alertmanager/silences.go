package alertmanager

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Silences are written only through the write gate (gate_silence.go):
// this file reads them.

// SilenceCreator is the createdBy of every silence Remedy creates.
const SilenceCreator = "remedy"

// Silence is a silence as Alertmanager's API v2 reads and writes it.
type Silence struct {
	ID        string           `json:"id,omitempty"`
	Matchers  []SilenceMatcher `json:"matchers"`
	StartsAt  time.Time        `json:"startsAt"`
	EndsAt    time.Time        `json:"endsAt"`
	CreatedBy string           `json:"createdBy"`
	Comment   string           `json:"comment"`
	Status    *struct {
		State string `json:"state"`
	} `json:"status,omitempty"`
}

// SilenceMatcher is one matcher of a silence.
type SilenceMatcher struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	IsRegex bool   `json:"isRegex"`
	IsEqual bool   `json:"isEqual"`
}

// EqualMatchers are the matchers that select exactly these labels' alerts:
// name="value" for each label, sorted by name.
func EqualMatchers(labels map[string]string) []SilenceMatcher {
	out := make([]SilenceMatcher, 0, len(labels))
	for k, v := range labels {
		out = append(out, SilenceMatcher{Name: k, Value: v, IsEqual: true})
	}
	slices.SortFunc(out, func(a, b SilenceMatcher) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// Silences lists the silences Remedy created (every state).
func (a *Client) Silences(ctx context.Context) ([]Silence, error) {
	var all []Silence
	if err := a.Call(ctx, http.MethodGet, "/api/v2/silences", nil, &all); err != nil {
		return nil, fmt.Errorf("list alertmanager silences: %w", err)
	}
	return slices.DeleteFunc(all, func(s Silence) bool { return s.CreatedBy != SilenceCreator }), nil
}
