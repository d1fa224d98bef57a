//go:build linux

package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/remedy-dev/remedy/internal/pki"
)

// node is a running node: its processes and what teardown must undo.
type node struct {
	o       NodeOptions
	paths   nodePaths
	log     io.Writer
	lock    *os.File
	janitor *janitor
	procs   []*nodeProc
	// stateSaved: from here on the machine may have changed and teardown runs.
	stateSaved bool
}

type nodeProc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// prepareNode takes the machine's node lock, records the machine's state,
// starts the janitor, sets up the network and starts containerd with the
// images imported; it configures the API server (not yet started) to serve
// the node and its Pods.
func prepareNode(ctx context.Context, e *Env, o NodeOptions, log io.Writer) (*node, error) {
	n := &node{o: o, paths: nodePaths{dir: filepath.Join(e.tmpDir, "node")}, log: log}
	var err error
	if n.lock, err = lockNode(ctx, log); err != nil {
		return n, err
	}
	if err := os.MkdirAll(n.paths.dir, 0o700); err != nil {
		return n, fmt.Errorf("create node directory: %w", err)
	}
	st, err := observeNode(n.paths.dir, n.paths.socket())
	if err != nil {
		return n, err
	}
	if err := st.save(n.paths.state()); err != nil {
		return n, err
	}
	if n.janitor, err = startJanitor(n.paths.state(), n.lock); err != nil {
		return n, err
	}
	n.stateSaved = true

	apiPort, err := e.configureAPIServerForNode(n.paths)
	if err != nil {
		return n, err
	}
	if err := setUpNetwork(apiPort); err != nil {
		return n, err
	}
	if err := n.paths.writeConfigs(o.SandboxImage, n.paths.at("kubelet-client-ca.crt")); err != nil {
		return n, err
	}
	if err := n.start("containerd", filepath.Join(o.Containerd, "containerd"), "--config", n.paths.at("containerd", "config.toml")); err != nil {
		return n, err
	}
	if err := n.importImages(ctx); err != nil {
		return n, err
	}
	return n, nil
}

// configureAPIServerForNode makes the API server serve on the node IP with a
// certificate Pods accept through the kubernetes Service, authorize the
// kubelet (Node, NodeRestriction), reach the kubelet with a client
// certificate, give Pods ServiceAccount tokens and route webhooks and
// aggregated APIs to Pods through their EndpointSlices. It returns the port.
func (e *Env) configureAPIServerForNode(p nodePaths) (int, error) {
	api := e.Kube.ControlPlane.GetAPIServer()
	// The node IP is only bound once the network is up; the port is picked on loopback.
	port, err := freePortOn("127.0.0.1")
	if err != nil {
		return 0, err
	}
	api.SecurePort = port
	api.SecureServing.Address = NodeIP
	if api.CertDir == "" {
		api.CertDir = filepath.Join(e.tmpDir, "kube-apiserver")
		if err := os.MkdirAll(api.CertDir, 0o700); err != nil {
			return 0, fmt.Errorf("create %s: %w", api.CertDir, err)
		}
	}
	if err := writeServingCerts(api.CertDir, &api.SecureServing.CA); err != nil {
		return 0, err
	}
	kubeletCA, err := pki.NewCA("remedy-node-kubelet-client-ca")
	if err != nil {
		return 0, err
	}
	kubeletClient, err := kubeletCA.Client(kubeletAPIServerClient)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return 0, fmt.Errorf("create node directory: %w", err)
	}
	if err := writeFiles(map[string][]byte{
		p.at("kubelet-client-ca.crt"): kubeletCA.CertPEM,
		p.at("kubelet-client.crt"):    kubeletClient.CertPEM, p.at("kubelet-client.key"): kubeletClient.KeyPEM,
	}); err != nil {
		return 0, err
	}
	args := api.Configure()
	args.Set("authorization-mode", "Node,RBAC")
	args.Set("enable-admission-plugins", "NodeRestriction")
	// envtest turns ServiceAccount admission off; Pods need their tokens.
	args.Disable("disable-admission-plugins")
	args.Set("kubelet-client-certificate", p.at("kubelet-client.crt"))
	args.Set("kubelet-client-key", p.at("kubelet-client.key"))
	args.Set("kubelet-preferred-address-types", "InternalIP")
	args.Set("enable-aggregator-routing", "true")
	args.Set("service-cluster-ip-range", ServiceCIDR)
	return port, nil
}

// writeServingCerts writes, unless a kept state directory holds them, the
// API server's serving certificate (for the node IP, loopback and the
// kubernetes Service), its CA as ca.crt, and the ServiceAccount signing key
// where envtest would write its own.
func writeServingCerts(dir string, servingCA *[]byte) error {
	if _, err := os.Stat(filepath.Join(dir, "apiserver.crt")); err == nil {
		return nil
	}
	ca, err := pki.NewCA("remedy-node-apiserver-ca")
	if err != nil {
		return err
	}
	serving, err := ca.ServerFor("kube-apiserver",
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(NodeIP), net.ParseIP(kubernetesServiceIP)},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return err
	}
	sa, err := pki.NewCA("remedy-node-service-account-signer")
	if err != nil {
		return err
	}
	*servingCA = ca.CertPEM
	return writeFiles(map[string][]byte{
		filepath.Join(dir, "apiserver.crt"): serving.CertPEM, filepath.Join(dir, "apiserver.key"): serving.KeyPEM,
		filepath.Join(dir, "ca.crt"):        ca.CertPEM,
		filepath.Join(dir, "sa-signer.crt"): sa.CertPEM, filepath.Join(dir, "sa-signer.key"): sa.KeyPEM,
	})
}

// importImages loads every image tarball into containerd's Kubernetes namespace.
func (n *node) importImages(ctx context.Context) error {
	if err := waitFor(ctx, 20*time.Second, func() bool { _, err := os.Stat(n.paths.socket()); return err == nil }); err != nil {
		return fmt.Errorf("containerd did not open %s (see its log): %w", n.paths.socket(), err)
	}
	for _, img := range n.o.Images {
		if _, err := run(filepath.Join(n.o.Containerd, "ctr"), "--address", n.paths.socket(), "-n", "k8s.io", "images", "import", img); err != nil {
			return fmt.Errorf("import image %s: %w", img, err)
		}
	}
	return nil
}

// startKubelet runs kube-scheduler and the kubelet as their own users and
// waits until the node is Ready.
func (n *node) startKubelet(ctx context.Context, e *Env, assets string) error {
	for _, u := range []struct {
		file string
		user envtest.User
	}{
		{"scheduler.kubeconfig", envtest.User{Name: "system:kube-scheduler"}},
		{"kubelet.kubeconfig", envtest.User{Name: "system:node:" + NodeName, Groups: []string{"system:nodes"}}},
	} {
		user, err := e.Kube.AddUser(u.user, nil)
		if err != nil {
			return fmt.Errorf("add user %s: %w", u.user.Name, err)
		}
		kc, err := user.KubeConfig()
		if err != nil {
			return fmt.Errorf("render kubeconfig of %s: %w", u.user.Name, err)
		}
		if err := writeFiles(map[string][]byte{n.paths.at(u.file): kc}); err != nil {
			return err
		}
	}
	if err := e.authorizeKubeletClients(ctx, n.paths); err != nil {
		return err
	}
	if err := n.start("kube-scheduler", filepath.Join(assets, "kube-scheduler"),
		"--kubeconfig="+n.paths.at("scheduler.kubeconfig"), "--leader-elect=false", "--secure-port=0", "--logging-format=json"); err != nil {
		return err
	}
	if err := n.start("kubelet", filepath.Join(assets, "kubelet"),
		"--config="+n.paths.at("kubelet", "config.yaml"), "--kubeconfig="+n.paths.at("kubelet.kubeconfig"),
		// The root holds the kubelet's sockets, like containerd's kept short.
		"--root-dir="+filepath.Join(nodeRunDir, "kubelet"), "--cert-dir="+n.paths.at("kubelet", "pki"),
		"--hostname-override="+NodeName, "--node-ip="+NodeIP, "--logging-format=json"); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("build client: %w", err)
	}
	ready := func() bool {
		node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	if err := waitFor(ctx, 90*time.Second, ready); err != nil {
		return fmt.Errorf("node %s not Ready (see its log): %w", NodeName, err)
	}
	return nil
}

// start runs a node process with its output, each line prefixed with its
// name, in the log; it dies with this process (SIGKILL), after which the
// janitor cleans up.
func (n *node) start(name, bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	out := &prefixWriter{w: n.log, prefix: []byte(name + ": ")}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &nodeProc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	n.procs = append(n.procs, p)
	return nil
}

// stop ends the kubelet and the scheduler, then containerd, then undoes
// everything the node changed on the machine.
func (n *node) stop() error {
	var errs []error
	for i := len(n.procs) - 1; i >= 0; i-- {
		stopProcess(n.procs[i].cmd.Process, n.procs[i].exited, syscall.SIGTERM)
	}
	if n.stateSaved {
		st, err := loadNodeState(n.paths.state())
		if err != nil {
			errs = append(errs, err)
		} else {
			errs = append(errs, teardown(st))
		}
	}
	if n.janitor != nil {
		n.janitor.dismiss()
	}
	if n.lock != nil {
		_ = n.lock.Close()
	}
	return errors.Join(errs...)
}

// lockNode waits for the machine's node lock: one node runs at a time.
func lockNode(ctx context.Context, log io.Writer) (*os.File, error) {
	f, err := os.OpenFile(nodeLockFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", nodeLockFile, err)
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		return f, nil
	}
	fmt.Fprintf(log, "devenv: another node runs on this machine; waiting for %s\n", nodeLockFile)
	err = waitFor(ctx, 30*time.Minute, func() bool { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil })
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("wait for the node lock %s: %w", nodeLockFile, err)
	}
	return f, nil
}

// waitFor polls ok every 100ms until it holds, ctx ends or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// kubeletServingCA is the kubelet's self-signed serving certificate, which
// scrapers verify it with; empty without a node.
func (e *Env) kubeletServingCA() string {
	if e.node == nil {
		return ""
	}
	return e.node.paths.at("kubelet", "pki", "kubelet.crt")
}

// prefixWriter starts every line with prefix; one process writes to it.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix []byte
	mid    bool
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []byte
	for _, c := range b {
		if !p.mid {
			out = append(out, p.prefix...)
		}
		out = append(out, c)
		p.mid = c != '\n'
	}
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}
