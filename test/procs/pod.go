package procs

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/remedy-dev/remedy/internal/devenv"
)

// temporalService is the address deploy/manager's --temporal-address names:
// temporal-dev.yaml's Service. It is the one name a pod resolves through
// cluster DNS, so the test points it at the harness's Temporal.
const temporalService = "temporal-dev.remedy-system:7233"

// portFlags say which flag of each container binds each named port.
var portFlags = map[string]map[string]string{
	"operator": {"metrics": "metrics-addr", "probes": "probe-addr", "webhook": "webhook-port", "codec": "codec-addr"},
	"worker":   {"metrics": "metrics-addr", "exec-gate": "exec-gate-addr"},
	"webhook":  {"webhook": "port", "metrics": "metrics-addr"},
}

// Pod is one replica of a Deployment run as a subprocess.
type Pod struct {
	Name  string
	Out   *SyncBuffer
	Ports map[string]int // container port name -> host port

	args, env []string
	dir, bin  string
	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan struct{}
}

// PodOptions change how StartPod runs a replica.
type PodOptions struct {
	// Args are appended to the container's.
	Args []string
	// Server replaces the API server's address in the pod's kubeconfig, with
	// the CA that verifies it (a Proxy).
	Server string
	CAData []byte
	// Bin is the remedy binary to run (default Bin(): this tree's); the
	// upgrade test runs the previous release's.
	Bin string
}

// Manifests decodes every object in the files glob matches under the repository root.
func Manifests(t testing.TB, glob string) []map[string]any {
	t.Helper()
	return manifestsIn(t, Root, glob)
}

func manifestsIn(t testing.TB, root, glob string) []map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, glob))
	require.NoError(t, err)
	require.NotEmpty(t, files, glob)
	var out []map[string]any
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var o map[string]any
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else {
				require.NoError(t, err, f)
			}
			if len(o) > 0 {
				out = append(out, o)
			}
		}
	}
	return out
}

// Deployment is deploy/manager's Deployment name.
func Deployment(t testing.TB, name string) appsv1.Deployment {
	t.Helper()
	return DeploymentIn(t, Root, name)
}

// DeploymentIn is the Deployment name of deploy/manager in the tree at root.
func DeploymentIn(t testing.TB, root, name string) appsv1.Deployment {
	t.Helper()
	for _, o := range manifestsIn(t, root, filepath.Join("deploy", "manager", "*.yaml")) {
		if o["kind"] == "Deployment" && o["metadata"].(map[string]any)["name"] == name {
			var d appsv1.Deployment
			require.NoError(t, Convert(o, &d))
			return d
		}
	}
	t.Fatalf("no Deployment %s in deploy/manager", name)
	return appsv1.Deployment{}
}

// StartPod runs replica i of d: the container's args and env, its mounted
// Secrets as files, its declared ports mapped to free host ports, and a
// kubeconfig with a token of its ServiceAccount standing in for the
// in-cluster one. The pod stops when the test ends.
func StartPod(t testing.TB, d appsv1.Deployment, replica int, po ...PodOptions) *Pod {
	t.Helper()
	var o PodOptions
	if len(po) > 0 {
		o = po[0]
	}
	ctx := context.Background()
	require.Len(t, d.Spec.Template.Spec.Containers, 1, d.Name)
	c := d.Spec.Template.Spec.Containers[0]
	dir, err := os.MkdirTemp("", "remedy-pod-")
	require.NoError(t, err)
	cs := Clientset(t)

	mounts := map[string]string{}
	required := map[string]bool{}
	for _, m := range c.VolumeMounts {
		var vol *corev1.Volume
		for i := range d.Spec.Template.Spec.Volumes {
			if d.Spec.Template.Spec.Volumes[i].Name == m.Name {
				vol = &d.Spec.Template.Spec.Volumes[i]
			}
		}
		require.NotNil(t, vol, "%s: volume %s", d.Name, m.Name)
		require.NotNil(t, vol.Secret, "%s: volume %s is a Secret", d.Name, m.Name)
		host := filepath.Join(dir, "volumes", m.Name)
		require.NoError(t, os.MkdirAll(host, 0o700))
		sec, err := cs.CoreV1().Secrets(d.Namespace).Get(ctx, vol.Secret.SecretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && ptr.Deref(vol.Secret.Optional, false) {
			mounts[m.MountPath] = host
			continue
		}
		require.NoError(t, err, "%s: Secret %s", d.Name, vol.Secret.SecretName)
		for k, v := range sec.Data {
			require.NoError(t, os.WriteFile(filepath.Join(host, k), v, 0o600))
		}
		mounts[m.MountPath], required[m.MountPath] = host, true
	}

	var args []string
	used := map[string]bool{}
	for _, a := range c.Args {
		a = strings.ReplaceAll(a, temporalService, env.TemporalAddress)
		for path, host := range mounts {
			if strings.Contains(a, path) {
				a, used[path] = strings.ReplaceAll(a, path, host), true
			}
		}
		args = append(args, a)
	}
	for path := range required {
		require.True(t, used[path], "%s mounts %s, but no arg names it: the process would read a default path", d.Name, path)
	}

	p := &Pod{Name: fmt.Sprintf("%s-%d", d.Name, replica), Out: &SyncBuffer{}, Ports: map[string]int{}, dir: dir, bin: bin}
	if o.Bin != "" {
		p.bin = o.Bin
	}
	defaults := flagDefaults(t, p.bin, c.Args[0])
	for _, port := range c.Ports {
		flag, ok := portFlags[c.Name][port.Name]
		require.True(t, ok, "%s: which flag binds port %s?", d.Name, port.Name)
		if set, ok := argPort(c.Args, flag); ok {
			// Off by default (the codec server): the args name the port.
			require.Equal(t, strconv.Itoa(int(port.ContainerPort)), set, "%s: --%s names the declared containerPort %s", d.Name, flag, port.Name)
		} else {
			require.Equal(t, strconv.Itoa(int(port.ContainerPort)), defaults[flag], "%s: --%s defaults to the declared containerPort %s", d.Name, flag, port.Name)
		}
		p.Ports[port.Name] = FreePort(t)
		if strings.HasSuffix(flag, "-addr") {
			args = append(args, fmt.Sprintf("--%s=:%d", flag, p.Ports[port.Name]))
		} else {
			args = append(args, fmt.Sprintf("--%s=%d", flag, p.Ports[port.Name]))
		}
		if port.Name == "exec-gate" {
			args = append(args, execGateOnNode(t, mounts, p.Ports[port.Name])...)
		}
	}
	p.args = append(args, o.Args...)

	p.env = []string{"KUBECONFIG=" + kubeconfig(t, dir, d.Spec.Template.Spec.ServiceAccountName, o), "HOME=" + dir}
	for _, e := range c.Env {
		require.Nil(t, e.ValueFrom, "%s: env %s from a reference", d.Name, e.Name)
		p.env = append(p.env, e.Name+"="+e.Value)
	}
	for _, from := range c.EnvFrom {
		require.NotNil(t, from.SecretRef, d.Name)
		sec, err := cs.CoreV1().Secrets(d.Namespace).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && ptr.Deref(from.SecretRef.Optional, false) {
			continue
		}
		require.NoError(t, err)
		for k, v := range sec.Data {
			p.env = append(p.env, from.Prefix+k+"="+string(v))
		}
	}
	p.start(t)
	t.Cleanup(func() { p.Stop(); _ = os.RemoveAll(dir) })
	return p
}

func (p *Pod) start(t testing.TB) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Env, p.cmd.Dir = p.env, p.dir
	p.cmd.Stdout = io.MultiWriter(p.Out, prefixed(p.Name))
	p.cmd.Stderr = p.cmd.Stdout
	require.NoError(t, p.cmd.Start())
	exited := make(chan struct{})
	p.exited = exited
	cmd := p.cmd
	go func() { _ = cmd.Wait(); close(exited) }()
}

// Restart starts the pod again, as the kubelet restarts a container: the
// same args, env, files and ports.
func (p *Pod) Restart(t testing.TB) {
	t.Helper()
	p.Kill()
	p.start(t)
}

// Stop ends the process with SIGINT, then SIGKILL after 20s.
func (p *Pod) Stop() {
	cmd, exited := p.current()
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Kill ends the process with SIGKILL and waits until it is gone.
func (p *Pod) Kill() {
	cmd, exited := p.current()
	_ = cmd.Process.Kill()
	<-exited
}

// Running says whether the process is alive.
func (p *Pod) Running() bool {
	_, exited := p.current()
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

func (p *Pod) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.exited
}

// URL is http://127.0.0.1:<host port of the named container port><path>.
func (p *Pod) URL(port, path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", p.Ports[port], path)
}

// TLSListening reports whether port accepts a TLS handshake.
func (p *Pod) TLSListening(port string) bool {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", p.Ports[port]), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only whether it listens
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// argPort is the port args give flag (--flag=:port or --flag=port), if they give it.
func argPort(args []string, flag string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
			_, port, err := net.SplitHostPort(v)
			if err != nil {
				port = v
			}
			return port, true
		}
	}
	return "", false
}

var helpDefault = regexp.MustCompile(`(?m)^\s+-([a-z-]+) \w+\n.*\(default "?:?(\d+)"?\)$`)

// flagDefaults reads `remedy <command> -h`: flag -> numeric default.
func flagDefaults(t testing.TB, bin, command string) map[string]string {
	t.Helper()
	out, _ := exec.Command(bin, command, "-h").CombinedOutput()
	defaults := map[string]string{}
	for _, m := range helpDefault.FindAllStringSubmatch(string(out), -1) {
		defaults[m[1]] = m[2]
	}
	require.NotEmpty(t, defaults, "%s -h:\n%s", command, out)
	return defaults
}

// kubeconfig writes a kubeconfig with a TokenRequest token of the account.
func kubeconfig(t testing.TB, dir, account string, o PodOptions) string {
	t.Helper()
	cfg, err := devenv.ServiceAccountConfig(context.Background(), env.Config, devenv.Namespace, account)
	require.NoError(t, err)
	server, ca := cfg.Host, cfg.CAData
	if o.Server != "" {
		server, ca = o.Server, o.CAData
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	path := filepath.Join(dir, "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path
}

// RouteService points a deploy/manager Service at the pods that serve it,
// as the EndpointSlice controller would, with each pod's mapped port.
func RouteService(t testing.TB, service string, pods ...*Pod) {
	t.Helper()
	var svc corev1.Service
	for _, o := range Manifests(t, filepath.Join("deploy", "manager", "*.yaml")) {
		if o["kind"] == "Service" && o["metadata"].(map[string]any)["name"] == service {
			require.NoError(t, Convert(o, &svc))
		}
	}
	require.Equal(t, service, svc.Name, "deploy/manager has Service %s", service)
	ctx := context.Background()
	cs := Clientset(t)
	_, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, &svc, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	ip := hostIP(t)
	for _, p := range pods {
		var ports []discoveryv1.EndpointPort
		for _, sp := range svc.Spec.Ports {
			require.Contains(t, p.Ports, sp.TargetPort.StrVal, "%s's pods declare the target port %s", service, sp.TargetPort.StrVal)
			ports = append(ports, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Port: ptr.To(int32(p.Ports[sp.TargetPort.StrVal])), Protocol: ptr.To(corev1.ProtocolTCP)})
		}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: p.Name, Namespace: svc.Namespace, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports:       ports,
		}
		// A pod of the same name that ran before (an earlier test's, or the
		// previous release's in the upgrade test) is routed no more.
		err := cs.DiscoveryV1().EndpointSlices(svc.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		if !apierrors.IsNotFound(err) {
			require.NoError(t, err)
		}
		_, err = cs.DiscoveryV1().EndpointSlices(svc.Namespace).Create(ctx, slice, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// Unroute removes p's EndpointSlices, as the EndpointSlice controller does
// for a pod that is no longer ready.
func Unroute(t testing.TB, p *Pod) {
	t.Helper()
	err := Clientset(t).DiscoveryV1().EndpointSlices(devenv.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{})
	require.NoError(t, err)
}

// hostIP is this machine's first non-loopback IPv4 address: the API server
// refuses loopback endpoints.
func hostIP(t testing.TB) string {
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatal("no non-loopback IPv4 address to route webhook Services to")
	return ""
}

// Clientset is a cluster-admin clientset.
func Clientset(t testing.TB) *kubernetes.Clientset {
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	return cs
}

// FreePort is a TCP port nothing listens on.
func FreePort(t testing.TB) int {
	l, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Get returns the status and body of url.
func Get(url string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Convert decodes an unstructured object strictly.
func Convert(o map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o, into, true)
}

// SyncBuffer collects a subprocess's output while tests read it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type prefixWriter struct{ prefix string }

func (w prefixWriter) Write(p []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line != "" {
			fmt.Fprint(logFile, w.prefix, line)
		}
	}
	return len(p), nil
}

func prefixed(name string) io.Writer { return prefixWriter{prefix: name + ": "} }
