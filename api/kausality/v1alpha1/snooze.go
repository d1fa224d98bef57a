package v1alpha1

import (
	"fmt"
	"time"
)

// Snooze, in a parent's kausality.io/snooze, suppresses drift callbacks (not
// the drift decision) until Expiry. The legacy value is a bare RFC3339 time.
type Snooze struct {
	Expiry  time.Time
	User    string
	Message string
}

type snoozeWire struct {
	Expiry  string `json:"expiry"`
	User    string `json:"user,omitempty"`
	Message string `json:"message,omitempty"`
}

// ParseSnooze parses a kausality.io/snooze value: JSON {expiry, user,
// message} or an RFC3339 time. It returns nil for "".
func ParseSnooze(s string) (*Snooze, error) {
	if s == "" {
		return nil, nil
	}
	if !startsWith(s, '{') {
		t, err := parseTime(s)
		if err != nil {
			return nil, fmt.Errorf("%s: want a JSON object {expiry, user, message} or an RFC3339 time: %w", AnnotationSnooze, err)
		}
		return &Snooze{Expiry: t}, nil
	}
	var w snoozeWire
	if err := decodeStrict(s, &w); err != nil {
		return nil, fmt.Errorf("%s: %w", AnnotationSnooze, err)
	}
	if w.Expiry == "" {
		return nil, fmt.Errorf("%s: expiry is required", AnnotationSnooze)
	}
	t, err := parseTime(w.Expiry)
	if err != nil {
		return nil, fmt.Errorf("%s: expiry: %w", AnnotationSnooze, err)
	}
	return &Snooze{Expiry: t, User: w.User, Message: w.Message}, nil
}

// FormatSnooze writes s as JSON; nil is "" (not snoozed).
func FormatSnooze(s *Snooze) string {
	if s == nil {
		return ""
	}
	return marshal(snoozeWire{Expiry: formatTime(s.Expiry), User: s.User, Message: s.Message})
}

// Active reports whether callbacks are still suppressed at now.
func (s Snooze) Active(now time.Time) bool { return now.Before(s.Expiry) }
