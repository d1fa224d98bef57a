package main

import (
	"context"
	"flag"
	"strings"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/remedy-dev/remedy/internal/compose"
	"github.com/remedy-dev/remedy/internal/seal"
)

// codecFlags registers the operator's codec server flags (docs/operate.md,
// "The codec server").
func codecFlags(fs *flag.FlagSet) *compose.CodecOptions {
	var o compose.CodecOptions
	fs.StringVar(&o.Addr, "codec-addr", "0", "address of the codec server the Temporal Web UI and 'temporal --codec-endpoint' use to read Remedy's sealed payloads and to send a person's approval decisions (0 disables)")
	fs.Func("codec-allowed-origins", "comma-separated origins of the Temporal Web UI (e.g. https://temporal.example.com) whose browsers may call the codec server with credentials", func(s string) error {
		for _, o2 := range strings.Split(s, ",") {
			if o2 = strings.TrimSpace(o2); o2 != "" {
				o.AllowedOrigins = append(o.AllowedOrigins, strings.TrimSuffix(o2, "/"))
			}
		}
		return nil
	})
	fs.StringVar(&o.CertFile, "codec-tls-cert", "", "serving certificate of the codec server (empty: plain HTTP, for loopback only)")
	fs.StringVar(&o.KeyFile, "codec-tls-key", "", "serving key of the codec server")
	return &o
}

// serveCodec starts the codec server when --codec-addr asks for it.
func serveCodec(ctx context.Context, cfg *rest.Config, keys *seal.Keyring, o *compose.CodecOptions) error {
	if o.Addr == "0" || o.Addr == "" {
		return nil
	}
	url, err := compose.ServeCodec(ctx, cfg, keys, *o)
	if err != nil {
		return err
	}
	ctrl.Log.Info("serving the codec server", "url", url, "allowedOrigins", o.AllowedOrigins)
	return nil
}
