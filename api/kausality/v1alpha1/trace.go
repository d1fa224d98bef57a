package v1alpha1

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxTraceHops caps a trace: the origin and the newest hops are kept.
const MaxTraceHops = 10

// Hop is one change in a causal chain: who changed which object at which generation.
type Hop struct {
	APIVersion string
	Kind       string
	Name       string
	Generation int64
	User       string
	Timestamp  time.Time
	// Labels holds the object's kausality.io/trace-<key> annotations by key.
	Labels map[string]string
	// RequestUID is kept when kausality itself wrote the hop.
	RequestUID string
}

// Trace is a causal chain, origin first.
type Trace []Hop

type hopWire struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Name       string            `json:"name"`
	Generation int64             `json:"generation"`
	User       string            `json:"user"`
	RequestUID string            `json:"requestUID,omitempty"`
	Timestamp  string            `json:"timestamp"`
	Labels     map[string]string `json:"labels,omitempty"`
}

// ParseTrace parses a kausality.io/trace value: a JSON array of hops.
func ParseTrace(s string) (Trace, error) {
	if s == "" {
		return nil, nil
	}
	if !startsWith(s, '[') {
		return nil, fmt.Errorf("%s: want a JSON array of hops", AnnotationTrace)
	}
	var ws []hopWire
	if err := decodeStrict(s, &ws); err != nil {
		return nil, fmt.Errorf("%s: %w", AnnotationTrace, err)
	}
	if len(ws) == 0 {
		return nil, nil
	}
	t := make(Trace, len(ws))
	for i, w := range ws {
		h, err := w.hop()
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", AnnotationTrace, i, err)
		}
		t[i] = h
	}
	return t, nil
}

func (w hopWire) hop() (Hop, error) {
	// The name may be empty: an object created with generateName can reach
	// admission before its name is generated.
	switch {
	case w.APIVersion == "":
		return Hop{}, fmt.Errorf("apiVersion is required")
	case w.Kind == "":
		return Hop{}, fmt.Errorf("kind is required")
	}
	if w.Generation < 0 {
		return Hop{}, fmt.Errorf("generation %d is negative", w.Generation)
	}
	if w.Timestamp == "" {
		return Hop{}, fmt.Errorf("timestamp is required")
	}
	ts, err := parseTime(w.Timestamp)
	if err != nil {
		return Hop{}, fmt.Errorf("timestamp: %w", err)
	}
	h := Hop{APIVersion: w.APIVersion, Kind: w.Kind, Name: w.Name, Generation: w.Generation,
		User: w.User, Timestamp: ts, RequestUID: w.RequestUID}
	if len(w.Labels) > 0 {
		h.Labels = w.Labels
	}
	return h, nil
}

// FormatTrace writes t as the annotation value; "" when empty.
func FormatTrace(t Trace) string {
	if len(t) == 0 {
		return ""
	}
	ws := make([]hopWire, len(t))
	for i, h := range t {
		ws[i] = hopWire{APIVersion: h.APIVersion, Kind: h.Kind, Name: h.Name, Generation: h.Generation,
			User: h.User, RequestUID: h.RequestUID, Timestamp: formatTime(h.Timestamp), Labels: h.Labels}
	}
	return marshal(ws)
}

// Extend returns a new trace of t followed by hop, capped at MaxTraceHops by
// dropping the oldest hops after the origin.
func (t Trace) Extend(hop Hop) Trace {
	n := len(t) + 1
	if n > MaxTraceHops {
		n = MaxTraceHops
	}
	out := make(Trace, 0, n)
	if len(t) > 0 {
		out = append(out, t[0])
		rest := t[1:]
		if keep := n - 2; len(rest) > keep {
			rest = rest[len(rest)-keep:]
		}
		out = append(out, rest...)
	}
	return append(out, hop)
}

// maxTraceLabelValue bounds a label copied into every hop of every trace.
const maxTraceLabelValue = 1024

// TraceLabels collects the kausality.io/trace-<key> annotations of an object
// as hop labels. It returns nil when there are none.
func TraceLabels(annotations map[string]string) (map[string]string, error) {
	var labels map[string]string
	for k, v := range annotations {
		if !strings.HasPrefix(k, TraceLabelPrefix) {
			continue
		}
		key, err := ParseTraceLabel(k, v)
		if err != nil {
			return nil, err
		}
		if key == "" {
			continue
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[key] = v
	}
	return labels, nil
}

// ParseTraceLabel checks one kausality.io/trace-<key> annotation and returns
// <key>. An annotation that is exactly the prefix has no key: like
// kausality, it is no label and is ignored ("" and no error). The API
// server refuses that key anyway (an annotation name cannot end in "-"),
// with its own field error.
func ParseTraceLabel(annotation, value string) (string, error) {
	key, ok := strings.CutPrefix(annotation, TraceLabelPrefix)
	switch {
	case !ok:
		return "", fmt.Errorf("%s: not a trace label annotation (%s<key>)", annotation, TraceLabelPrefix)
	case key == "":
		return "", nil
	case len(value) > maxTraceLabelValue:
		return "", fmt.Errorf("%s: value is %d bytes, at most %d are copied into traces", annotation, len(value), maxTraceLabelValue)
	case !utf8.ValidString(value):
		return "", fmt.Errorf("%s: value is not valid UTF-8", annotation)
	case strings.IndexFunc(value, unicode.IsControl) >= 0:
		return "", fmt.Errorf("%s: value contains control characters", annotation)
	}
	return key, nil
}
