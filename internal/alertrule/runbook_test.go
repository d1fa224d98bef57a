package alertrule

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// An alert's annotations are untrusted: only an http(s) runbook link is
// kept, and the summary is one bounded line of text.
func TestRunbookOfKeepsOnlyHTTPLinksAndBoundedText(t *testing.T) {
	long := "https://runbooks.example/" + strings.Repeat("a", MaxRunbookURL)
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want Runbook
	}{
		{"kubernetes-mixin", map[string]string{RunbookAnnotation: "https://runbooks.prometheus-operator.dev/runbooks/kubernetes/kubepodcrashlooping",
			SummaryAnnotation: "Pod is crash looping.", DescriptionAnnotation: "Pod shop/web is in waiting state"},
			Runbook{URL: "https://runbooks.prometheus-operator.dev/runbooks/kubernetes/kubepodcrashlooping", Summary: "Pod is crash looping."}},
		{"plain http", map[string]string{RunbookAnnotation: " http://wiki.internal/rb "}, Runbook{URL: "http://wiki.internal/rb"}},
		{"description without a summary", map[string]string{DescriptionAnnotation: "line one\nline\ttwo"}, Runbook{Summary: "line one line two"}},
		{"javascript", map[string]string{RunbookAnnotation: "javascript:alert(1)"}, Runbook{Note: "runbook_url dropped: not an http(s) URL"}},
		{"data", map[string]string{RunbookAnnotation: "data:text/html,<script>x</script>"}, Runbook{Note: "runbook_url dropped: not an http(s) URL"}},
		{"relative", map[string]string{RunbookAnnotation: "/runbooks/x"}, Runbook{Note: "runbook_url dropped: not an http(s) URL"}},
		{"no host", map[string]string{RunbookAnnotation: "https:///x"}, Runbook{Note: "runbook_url dropped: not an http(s) URL"}},
		{"too long", map[string]string{RunbookAnnotation: long}, Runbook{Note: "runbook_url dropped: longer than 2048 bytes"}},
		{"control characters in the summary", map[string]string{SummaryAnnotation: "a\x1b[31mred\x00b"}, Runbook{Summary: "a [31mred b"}},
		{"none", nil, Runbook{}},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, RunbookOf(tc.ann)) })
	}
	s := RunbookOf(map[string]string{SummaryAnnotation: strings.Repeat("é", MaxSummary)}).Summary
	assert.LessOrEqual(t, len(s), MaxSummary)
	assert.True(t, utf8.ValidString(s), "cut on a rune boundary")
}
