// Package plugin is `kubectl remedy`: approve, reject, roll back and explain
// Remedy's runs from kubectl. It takes kubectl's own flags (kubeconfig,
// context, namespace, impersonation) and changes nothing through a path of
// its own: a decision is the status patch of a RemediationApprovalRequest
// that the approval webhook authorizes (verb approve), a rollback the
// remedy.dev/rollback annotation that the requester webhook authorizes,
// exactly as the README's kubectl commands do.
package plugin

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/internal/release"
)

// Name is the executable name kubectl looks for on PATH.
const Name = "kubectl-remedy"

// session is one invocation: kubectl's flags, then the client they describe.
type session struct {
	flags      *genericclioptions.ConfigFlags
	webUI      string
	temporalNS string
	out        io.Writer
	kube       ctrlclient.Client
	namespace  string
}

// Run runs `kubectl remedy` with args (without the program name).
func Run(ctx context.Context, args []string, out, errOut io.Writer) error {
	cmd := NewCommand(out, errOut)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}

// NewCommand is the root command with every subcommand.
func NewCommand(out, errOut io.Writer) *cobra.Command {
	s := &session{flags: genericclioptions.NewConfigFlags(true), out: out}
	root := &cobra.Command{
		Use: Name,
		// kubectl's plugin convention: help reads "kubectl remedy ...".
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl remedy"},
		Short:       "List, approve, reject, roll back and explain Remedy's runs",
		Long: `kubectl remedy acts on Remedy's KubernetesExecutions (kexec), RemediationRequests (rr)
and RemediationApprovalRequests (rar) with kubectl's own credentials: a decision is the
status patch the approval webhook authorizes (verb approve), a rollback the
remedy.dev/rollback annotation, as with plain kubectl.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       release.String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(&cobra.Command{Use: "version", Short: "Print the version, the VCS revision and the Go version", Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), release.String()) }})
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetOut(out)
	root.SetErr(errOut)
	s.flags.AddFlags(root.PersistentFlags())
	webUI := os.Getenv("REMEDY_WEB_UI")
	if webUI == "" {
		webUI = "http://127.0.0.1:8233"
	}
	temporalNS := os.Getenv("TEMPORAL_NAMESPACE")
	if temporalNS == "" {
		temporalNS = "default"
	}
	root.PersistentFlags().StringVar(&s.webUI, "web-ui", webUI, "base URL of the Temporal Web UI, for links (env REMEDY_WEB_UI)")
	root.PersistentFlags().StringVar(&s.temporalNS, "temporal-namespace", temporalNS, "Temporal namespace of the workflows, for links (env TEMPORAL_NAMESPACE)")
	root.AddCommand(
		newDecideCommand(s, v1alpha1.DecisionApproved),
		newDecideCommand(s, v1alpha1.DecisionRejected),
		newRollbackCommand(s),
		newStatusCommand(s),
		newWhyCommand(s),
		newListCommand(s),
		newPendingCommand(s),
	)
	return root
}

// connect builds the client from kubectl's flags.
func (s *session) connect() error {
	cfg, err := s.flags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	if s.namespace, _, err = s.flags.ToRawKubeConfigLoader().Namespace(); err != nil {
		return fmt.Errorf("read namespace: %w", err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, authenticationv1.AddToScheme, authorizationv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return fmt.Errorf("build scheme: %w", err)
		}
	}
	if s.kube, err = ctrlclient.New(cfg, ctrlclient.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	return nil
}

// get reads ref's object from the namespace of the flags. NotFound names
// the namespace searched.
func (s *session) get(ctx context.Context, ref Ref, obj ctrlclient.Object) error {
	err := s.kube.Get(ctx, ctrlclient.ObjectKey{Namespace: s.namespace, Name: ref.Name}, obj)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("get %s: %w in namespace %q (another namespace: -n NAMESPACE)", ref, err, s.namespace)
	}
	if err != nil {
		return fmt.Errorf("get %s in namespace %q: %w", ref, s.namespace, err)
	}
	return nil
}

// runE wraps a subcommand: parse its object, connect, act.
func (s *session) runE(name string, kinds []Kind, act func(ctx context.Context, ref Ref) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ref, err := ParseRef(name, args, kinds...)
		if err != nil {
			return err
		}
		if err := s.connect(); err != nil {
			return err
		}
		return act(cmd.Context(), ref)
	}
}

// readCommand is a command that only reads an execution or a remediation.
func (s *session) readCommand(use, short, example string, act func(ctx context.Context, ref Ref) error) *cobra.Command {
	name, _, _ := strings.Cut(use, " ")
	return &cobra.Command{Use: use, Short: short, Example: example,
		RunE: s.runE(name, []Kind{KindExecution, KindRemediation}, act)}
}

// await re-reads obj until done holds, for at most wait.
func (s *session) await(ctx context.Context, obj ctrlclient.Object, wait time.Duration, done func() bool) error {
	deadline := time.Now().Add(wait)
	for !done() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if err := s.kube.Get(ctx, ctrlclient.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
	}
	return nil
}
