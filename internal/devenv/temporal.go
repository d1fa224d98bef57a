package devenv

import (
	"context"
	"log/slog"
	"path/filepath"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/remedy-dev/remedy/internal/seal"
	"github.com/remedy-dev/remedy/workflows"
)

// startTemporal starts the pinned Temporal dev server with its database in
// dir, Remedy's search attributes, and a client that seals with keys.
func startTemporal(ctx context.Context, o Options, dir string, keys *seal.Keyring) (*testsuite.DevServer, error) {
	// The client speaks as Remedy's parts: it seals, and opens only what is sealed.
	dc := seal.DataConverter(keys)
	out := o.Log
	// JSON like every other part's log, so the shared log is one format.
	args := []string{"--log-format", "json", "--dynamic-config-value", "system.forceSearchAttributesCacheRefreshOnRead=true"}
	for _, name := range workflows.SearchAttributeNames {
		args = append(args, "--search-attribute", name+"=Keyword")
	}
	if o.TemporalUICodecEndpoint != "" {
		args = append(args, "--ui-codec-endpoint", o.TemporalUICodecEndpoint)
	}
	return testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath: o.TemporalCLI,
		ClientOptions: &client.Options{
			HostPort:       o.TemporalHostPort,
			Namespace:      "default",
			MetricsHandler: o.TemporalMetrics,
			DataConverter:  dc, FailureConverter: seal.FailureConverter(dc),
			Logger: sdklog.NewStructuredLogger(slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		},
		EnableUI:   o.TemporalUIPort != "",
		UIPort:     o.TemporalUIPort,
		DBFilename: filepath.Join(dir, stateTemporal),
		LogLevel:   "error",
		ExtraArgs:  args,
		Stdout:     newJSONLines(out, "temporal"),
		Stderr:     newJSONLines(out, "temporal"),
	})
}
