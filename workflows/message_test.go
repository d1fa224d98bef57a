package workflows

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestCapMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		cut  bool
	}{
		{"short", "replicas: 2 -> 5", false},
		{"exactly the bound", strings.Repeat("a", MaxStatusMessage), false},
		{"a Deployment quoted whole", "deployments.apps \"web\" is invalid: " + strings.Repeat(`{"f:metadata":{}}`, 300), true},
		{"multi-byte runes at the cut", strings.Repeat("ü", MaxStatusMessage), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := capMessage(tc.in)
			assert.LessOrEqual(t, len(out), MaxStatusMessage)
			assert.True(t, utf8.ValidString(out))
			if !tc.cut {
				assert.Equal(t, tc.in, out)
				return
			}
			head, found := strings.CutSuffix(out, " ... (cut; the whole message is in the workflow history)")
			assert.True(t, found, out)
			assert.NotEmpty(t, head)
			assert.True(t, strings.HasPrefix(tc.in, head), "the message is cut, not changed")
		})
	}
}
