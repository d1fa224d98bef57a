package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDemoMode(t *testing.T) {
	withMode := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(withMode, demoModeKey), []byte("unready\n"), 0o600))
	for _, tc := range []struct {
		name, dir, env, want, err string
	}{
		{name: "nothing set serves", dir: t.TempDir(), want: demoServe},
		{name: "no config dir serves", dir: filepath.Join(t.TempDir(), "absent"), want: demoServe},
		{name: "config file", dir: withMode, want: demoUnready},
		{name: "env wins over the file", dir: withMode, env: "crash", want: demoCrash},
		{name: "unknown env value is a config error", dir: withMode, env: "broken", err: `invalid config: mode "broken" (from DEMO_MODE)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := demoMode(tc.dir, tc.env)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// A crashing demo app returns at once with the reason, so main exits 1 and
// the kubelet restarts it into CrashLoopBackOff.
func TestDemoAppCrashExitsAtStart(t *testing.T) {
	t.Setenv(demoModeEnv, demoCrash)
	err := runDemoApp(context.Background(), []string{"-addr", "127.0.0.1:0", "-config-dir", t.TempDir()})
	require.ErrorContains(t, err, `mode "crash": exiting at start as configured`)
}
