package workflows

import "unicode/utf8"

// MaxStatusMessage bounds a message written into .status, an Event or a
// phase transition. An API server's refusal can quote the whole object
// (a DryRunFailed message once held a Deployment with its managedFields,
// about 5 KB); the full text stays in the workflow's history, where the
// failed activity recorded it.
const MaxStatusMessage = 512

// capMessage shortens s to MaxStatusMessage bytes, on a rune boundary,
// saying where the rest is.
func capMessage(s string) string {
	if len(s) <= MaxStatusMessage {
		return s
	}
	const more = " ... (cut; the whole message is in the workflow history)"
	cut := MaxStatusMessage - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}
