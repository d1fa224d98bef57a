package alertrule

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Annotations kubernetes-mixin (and most alerting rules) put on an alert.
const (
	RunbookAnnotation     = "runbook_url"
	SummaryAnnotation     = "summary"
	DescriptionAnnotation = "description"
)

// Bounds of what Remedy keeps of an alert's annotations (the CRD fields' MaxLength).
const (
	MaxRunbookURL = 2048
	MaxSummary    = 1024
)

// Runbook is what a person deciding about an alert is shown of it: its
// runbook link and one-line summary.
type Runbook struct {
	URL     string `json:"url,omitempty"`
	Summary string `json:"summary,omitempty"`
	// Note says why an annotation was dropped (not an http(s) URL, too long).
	Note string `json:"note,omitempty"`
}

// RunbookOf reads the runbook from an alert's annotations. They are
// untrusted text: the URL is kept only if it is an absolute http or https
// URL with a host and at most MaxRunbookURL bytes (anything else, such as a
// javascript: or data: link, is dropped with a note); the summary (or, without
// one, the description) is cut to one line of at most MaxSummary bytes with
// control characters removed. Nothing is ever rendered but as text.
func RunbookOf(annotations map[string]string) Runbook {
	var rb Runbook
	if raw := strings.TrimSpace(annotations[RunbookAnnotation]); raw != "" {
		switch u, err := url.Parse(raw); {
		case len(raw) > MaxRunbookURL:
			rb.Note = "runbook_url dropped: longer than 2048 bytes"
		case err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsFunc(raw, unicode.IsControl):
			rb.Note = "runbook_url dropped: not an http(s) URL"
		default:
			rb.URL = raw
		}
	}
	summary := annotations[SummaryAnnotation]
	if strings.TrimSpace(summary) == "" {
		summary = annotations[DescriptionAnnotation]
	}
	rb.Summary = oneLineText(summary, MaxSummary)
	return rb
}

// oneLineText folds whitespace and control characters into single spaces and
// cuts s to at most n bytes, on a rune boundary.
func oneLineText(s string, n int) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
