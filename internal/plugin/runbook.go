package plugin

import (
	"fmt"
	"io"
	"strings"
	"unicode"
)

// plainText is untrusted text (an alert's runbook link or summary) as one
// line to print: control characters, such as a terminal's escape
// sequences, are dropped and whitespace folded, so it is only ever shown
// as text.
func plainText(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && !unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// writeRunbook writes an alert's summary and runbook link, when it has them.
func writeRunbook(w io.Writer, runbookURL, summary string) {
	if s := plainText(summary); s != "" {
		fmt.Fprintf(w, "Summary:\t%s\n", s)
	}
	if u := plainText(runbookURL); u != "" {
		fmt.Fprintf(w, "Runbook:\t%s\n", u)
	}
}
