package v1alpha1

import (
	"fmt"
	"time"
)

// freezeLegacy is kausality's original freeze value, still accepted;
// freezeOff is kausality's explicit "not frozen".
const (
	freezeLegacy = "true"
	freezeOff    = "false"
)

// Freeze, in a parent's kausality.io/freeze, denies every change to its
// children until it is removed (except while the parent is being deleted).
// The legacy value "true" parses to a zero Freeze.
type Freeze struct {
	User    string
	Message string
	At      time.Time
}

type freezeWire struct {
	User    string `json:"user,omitempty"`
	Message string `json:"message,omitempty"`
	At      string `json:"at,omitempty"`
}

// ParseFreeze parses a kausality.io/freeze value: JSON {user, message, at}
// or "true". It returns nil (not frozen) for "" and "false".
func ParseFreeze(s string) (*Freeze, error) {
	switch {
	case s == "", s == freezeOff:
		return nil, nil
	case s == freezeLegacy:
		return &Freeze{}, nil
	case !startsWith(s, '{'):
		return nil, fmt.Errorf("%s: want a JSON object {user, message, at} or %q, got %q", AnnotationFreeze, freezeLegacy, s)
	}
	var w freezeWire
	if err := decodeStrict(s, &w); err != nil {
		return nil, fmt.Errorf("%s: %w", AnnotationFreeze, err)
	}
	f := &Freeze{User: w.User, Message: w.Message}
	if w.At != "" {
		at, err := parseTime(w.At)
		if err != nil {
			return nil, fmt.Errorf("%s: at: %w", AnnotationFreeze, err)
		}
		f.At = at
	}
	return f, nil
}

// FormatFreeze writes f as JSON; nil is "" (not frozen).
func FormatFreeze(f *Freeze) string {
	if f == nil {
		return ""
	}
	w := freezeWire{User: f.User, Message: f.Message}
	if !f.At.IsZero() {
		w.At = formatTime(f.At)
	}
	return marshal(w)
}

// String describes the freeze for denial messages. It leaves out User, as
// kausality does: the denial reaches whoever was refused and, through
// controllers, their events and conditions, which is a wider audience than
// may read the parent's annotations; and User is whatever the writer typed,
// which a denial from the API server must not present as established.
func (f Freeze) String() string {
	s := "frozen"
	if !f.At.IsZero() {
		s += " at " + formatTime(f.At)
	}
	if f.Message != "" {
		s += ": " + f.Message
	}
	return s
}
