package procs

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	require.Len(t, d.Spec.Template.Spec.Containers, 1, d.Name)
	c := d.Spec.Template.Spec.Containers[0]
	dir, err := os.MkdirTemp("", "remedy-pod-")
	require.NoError(t, err)
	cs := Clientset(t)

	mounts, required := mountSecrets(t, cs, d, c, dir)
	p := &Pod{Name: fmt.Sprintf("%s-%d", d.Name, replica), Out: &SyncBuffer{}, Ports: map[string]int{}, dir: dir, bin: bin}
	if o.Bin != "" {
		p.bin = o.Bin
	}
	args := append(podArgs(t, d.Name, c.Args, mounts, required), p.mapPorts(t, d.Name, c, mounts)...)
	p.args = append(args, o.Args...)
	p.env = append([]string{"KUBECONFIG=" + kubeconfig(t, dir, d.Spec.Template.Spec.ServiceAccountName, o), "HOME=" + dir},
		podEnv(t, cs, d, c)...)
	p.start(t)
	t.Cleanup(func() { p.Stop(); _ = os.RemoveAll(dir) })
	return p
}

// mountSecrets writes the container's mounted Secrets under dir and returns
// each mount path's host directory, and the paths whose Secret exists (an
// optional one may not).
func mountSecrets(t testing.TB, cs *kubernetes.Clientset, d appsv1.Deployment, c corev1.Container, dir string) (mounts map[string]string, required map[string]bool) {
	t.Helper()
	mounts, required = map[string]string{}, map[string]bool{}
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
		sec, err := cs.CoreV1().Secrets(d.Namespace).Get(context.Background(), vol.Secret.SecretName, metav1.GetOptions{})
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
	return mounts, required
}

// podArgs are the container's args with Temporal's Service and the mount
// paths replaced by what stands in for them here.
func podArgs(t testing.TB, name string, containerArgs []string, mounts map[string]string, required map[string]bool) []string {
	t.Helper()
	var args []string
	used := map[string]bool{}
	for _, a := range containerArgs {
		a = strings.ReplaceAll(a, temporalService, env.TemporalAddress)
		for path, host := range mounts {
			if strings.Contains(a, path) {
				a, used[path] = strings.ReplaceAll(a, path, host), true
			}
		}
		args = append(args, a)
	}
	for path := range required {
		require.True(t, used[path], "%s mounts %s, but no arg names it: the process would read a default path", name, path)
	}
	return args
}

// mapPorts gives each declared port a free host port, checking the flag that
// binds it names or defaults to the declared containerPort, and returns the
// args that bind them.
func (p *Pod) mapPorts(t testing.TB, name string, c corev1.Container, mounts map[string]string) []string {
	t.Helper()
	var args []string
	defaults := flagDefaults(t, p.bin, c.Args[0])
	for _, port := range c.Ports {
		flag, ok := portFlags[c.Name][port.Name]
		require.True(t, ok, "%s: which flag binds port %s?", name, port.Name)
		if set, ok := argPort(c.Args, flag); ok {
			// Off by default (the codec server): the args name the port.
			require.Equal(t, strconv.Itoa(int(port.ContainerPort)), set, "%s: --%s names the declared containerPort %s", name, flag, port.Name)
		} else {
			require.Equal(t, strconv.Itoa(int(port.ContainerPort)), defaults[flag], "%s: --%s defaults to the declared containerPort %s", name, flag, port.Name)
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
	return args
}

// podEnv is the container's env and its Secrets' envFrom (an optional one may be missing).
func podEnv(t testing.TB, cs *kubernetes.Clientset, d appsv1.Deployment, c corev1.Container) []string {
	t.Helper()
	var out []string
	for _, e := range c.Env {
		require.Nil(t, e.ValueFrom, "%s: env %s from a reference", d.Name, e.Name)
		out = append(out, e.Name+"="+e.Value)
	}
	for _, from := range c.EnvFrom {
		require.NotNil(t, from.SecretRef, d.Name)
		sec, err := cs.CoreV1().Secrets(d.Namespace).Get(context.Background(), from.SecretRef.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && ptr.Deref(from.SecretRef.Optional, false) {
			continue
		}
		require.NoError(t, err)
		for k, v := range sec.Data {
			out = append(out, from.Prefix+k+"="+string(v))
		}
	}
	return out
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
