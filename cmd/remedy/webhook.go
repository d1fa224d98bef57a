package main

import (
	"context"
	"flag"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/internal/cli"
	"github.com/remedy-dev/remedy/internal/webhookauth"
	"github.com/remedy-dev/remedy/webhook"
)

// clientAuthFlags registers the flags that restrict a webhook server to the
// API server's client certificate.
func clientAuthFlags(fs *flag.FlagSet) *webhookauth.ClientAuth {
	var c webhookauth.ClientAuth
	fs.StringVar(&c.CAFile, "client-ca-file", "", "PEM CA bundle that must sign the API server's client certificate; "+
		"without it the webhook accepts any TLS client (set it in production, docs/drift.md)")
	fs.StringVar(&c.Name, "client-name", "", "CommonName or DNS name the client certificate must carry (empty: any certificate the CA signed)")
	return &c
}

func runWebhook(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	var tf temporalFlags
	tf.register(fs)
	port := fs.Int("port", 9443, "TLS port of the drift admission webhook")
	cert := fs.String("tls-cert-file", "/tmp/k8s-webhook-server/serving-certs/tls.crt", "serving certificate (PEM)")
	key := fs.String("tls-key-file", "/tmp/k8s-webhook-server/serving-certs/tls.key", "serving key (PEM)")
	clients := clientAuthFlags(fs)
	mode := fs.String("default-mode", "log", "drift mode when neither the object, its namespace nor a Kausality policy sets one: log or enforce")
	queue := fs.Int("queue-size", 1024, "bound of the drift signal queue and of the parent-write queue")
	metricsAddr := fs.String("metrics-addr", ":8082", "address of /metrics (0 disables)")
	configuration := fs.String("webhook-configuration", webhook.DriftWebhookConfiguration,
		"MutatingWebhookConfiguration whose rules follow the Kausality policies (empty: leave its rules alone)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	m, err := kv1.ParseMode(*mode)
	if err != nil || m == "" {
		return fmt.Errorf("--default-mode %q: want log or enforce", *mode)
	}
	ctrl.SetLogger(zap.New())
	tc, cfg, err := tf.connect()
	if err != nil {
		return err
	}
	defer tc.Close()
	stopMetrics, err := cli.ServeMetrics(*metricsAddr)
	if err != nil {
		return err
	}
	defer stopMetrics()
	done, err := webhook.RunDrift(ctx, webhook.DriftOptions{
		Kube: cfg, Temporal: tc, Port: *port, CertFile: *cert, KeyFile: *key, ClientAuth: *clients,
		DefaultMode: m, QueueSize: *queue,
		WebhookConfiguration: *configuration,
	})
	if err != nil {
		return err
	}
	return <-done
}
