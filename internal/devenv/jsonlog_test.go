package devenv

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestJSONLinesWrapsWhatIsNotJSON(t *testing.T) {
	var out bytes.Buffer
	j := newJSONLines(&out, "temporal")
	for _, chunk := range []string{"CLI 1.5 (Server 1.29)\n\n", `{"level":"info",`, `"msg":"started"}` + "\nStopping ", "server...\n"} {
		n, err := j.Write([]byte(chunk))
		require.NoError(t, err)
		assert.Equal(t, len(chunk), n)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, "the blank line is dropped; a line split across writes is one")
	assert.Contains(t, lines[0], `"logger":"temporal","msg":"CLI 1.5 (Server 1.29)"`)
	assert.Equal(t, `{"level":"info","msg":"started"}`, lines[1], "JSON passes through unchanged")
	assert.Contains(t, lines[2], `"msg":"Stopping server..."`)
}
