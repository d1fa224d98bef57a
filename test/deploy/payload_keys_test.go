package deploy

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/remedy-dev/remedy/test/procs"
)

// A part started without Remedy's payload keys refuses to start, and says
// which flag and which Secret it needs.
func TestPartWithoutPayloadKeysRefusesToStart(t *testing.T) {
	for _, part := range []string{"operator", "worker", "webhook"} {
		t.Run(part, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, procs.Bin(), part, "--temporal-address="+procs.Env().TemporalAddress, "--metrics-addr=0")
			for _, e := range os.Environ() {
				if !strings.HasPrefix(e, "REMEDY_PAYLOAD_KEYS=") {
					cmd.Env = append(cmd.Env, e)
				}
			}
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "%s started without keys:\n%s", part, out)
			require.NoError(t, ctx.Err(), "%s did not exit:\n%s", part, out)
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit)
			assert.Equal(t, 1, exit.ExitCode())
			assert.Contains(t, string(out), "--payload-keys is required")
			assert.Contains(t, string(out), "Secret remedy-payload-keys")
		})
	}
}
