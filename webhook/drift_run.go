package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.temporal.io/sdk/client"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kv1 "github.com/remedy-dev/remedy/api/kausality/v1alpha1"
	"github.com/remedy-dev/remedy/internal/webhookauth"
)

// The drift webhook reads parents of the default policy's kinds from
// informers and writes kausality annotations onto them; a policy that adds
// parent kinds comes with a ClusterRole labelled
// remedy.dev/aggregate-to-drift-webhook=true granting the same verbs on
// them (deploy/rbac/drift-resources.yaml aggregates it).
// +kubebuilder:rbac:groups=apps,resources=deployments;replicasets;statefulsets;daemonsets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// DriftOptions configure one drift webhook process.
type DriftOptions struct {
	// Kube authenticates as the webhook's own ServiceAccount (deploy/rbac/webhook).
	Kube     *rest.Config
	Temporal client.Client
	Host     string
	Port     int
	CertFile string
	KeyFile  string
	// ClientAuth admits only the API server's client certificate.
	ClientAuth webhookauth.ClientAuth
	// DefaultMode is log or enforce.
	DefaultMode kv1.Mode
	// QueueSize bounds the signal queue and the parent-write queue.
	QueueSize int
	// WebhookConfiguration is the MutatingWebhookConfiguration whose rules
	// follow the Kausality policies; "" leaves its rules alone.
	WebhookConfiguration string
}

// selfUser asks the API server who the webhook's credentials authenticate
// as, so its own parent writes are recognised whatever account runs it.
func selfUser(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("build clientset: %w", err)
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("review own identity: %w", err)
	}
	return r.Status.UserInfo.Username, nil
}

// RunDrift starts the drift webhook and returns once it serves TLS; done
// reports how it stopped after ctx ends.
func RunDrift(ctx context.Context, o DriftOptions) (done <-chan error, err error) {
	if _, err := kv1.ParseMode(string(o.DefaultMode)); err != nil || o.DefaultMode == "" {
		return nil, fmt.Errorf("default mode %q: want log or enforce", o.DefaultMode)
	}
	if o.QueueSize <= 0 {
		return nil, fmt.Errorf("queue size %d: must be positive", o.QueueSize)
	}
	tlsOpts, err := o.ClientAuth.TLSOpts(ctrllog.Log.WithName("drift-webhook"), "drift")
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(o.Kube)
	if err != nil {
		return nil, fmt.Errorf("build dynamic client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(o.Kube)
	if err != nil {
		return nil, fmt.Errorf("build discovery client: %w", err)
	}
	// The dynamic mapper looks a kind up again when it does not know it, so
	// a parent kind whose CRD came after the webhook is mapped; a cached
	// discovery mapper never refreshes and refused that kind's children.
	httpClient, err := rest.HTTPClientFor(o.Kube)
	if err != nil {
		return nil, fmt.Errorf("build http client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(o.Kube, httpClient)
	if err != nil {
		return nil, fmt.Errorf("build rest mapper: %w", err)
	}
	self, err := selfUser(ctx, o.Kube)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(o.Kube)
	if err != nil {
		return nil, fmt.Errorf("build clientset: %w", err)
	}
	policies := NewPolicies(dyn, cs, dc, o.WebhookConfiguration, ctrllog.Log.WithName("drift-policies"))
	policies.DefaultMode = o.DefaultMode
	if err := policies.Run(ctx); err != nil {
		return nil, err
	}
	d := &Drift{Self: self,
		Parents:     NewParentCache(dyn, mapper, ctx.Done()),
		Updates:     NewParentUpdater(dyn, mapper, o.QueueSize),
		Signals:     NewSignalQueue(o.Temporal, o.QueueSize),
		Denied:      NewDeniedEvents(ctx, cs, DefaultDeniedEventWindow),
		DefaultMode: o.DefaultMode, Policies: policies, Now: time.Now,
	}
	if err := d.Parents.Warm(ctx, DefaultParentKinds...); err != nil {
		return nil, fmt.Errorf("watch parents: %w", err)
	}
	srv := NewDriftServer(o.Host, o.Port, o.CertFile, o.KeyFile, tlsOpts, d)
	go d.Signals.Run(ctx)
	go d.Updates.Run(ctx)
	ch := make(chan error, 1)
	go func() { ch <- srv.Start(ctx) }()

	check := srv.StartedChecker()
	deadline := time.Now().Add(10 * time.Second)
	for check(&http.Request{}) != nil {
		select {
		case err := <-ch:
			if err == nil {
				err = errors.New("server stopped")
			}
			return nil, fmt.Errorf("start drift webhook server: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("start drift webhook server on %s:%d: not serving after 10s", o.Host, o.Port)
		}
	}
	return ch, nil
}
