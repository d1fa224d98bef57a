package procs

import (
	"bufio"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/remedy-dev/remedy/internal/devenv"
	"github.com/remedy-dev/remedy/internal/image"
)

// tokenPath is where the kubelet mounts a Pod's ServiceAccount token.
const tokenPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// CheckPodParity compares Pod p of Deployment d with what deploy/ declares
// for it, first as the API server stored it, then as the kubelet ran it:
// the container's process, read from the host's /proc.
func CheckPodParity(t testing.TB, d appsv1.Deployment, p corev1.Pod) {
	t.Helper()
	want, got := d.Spec.Template.Spec, p.Spec
	c, pc := want.Containers[0], got.Containers[0]
	args := declaredArgs(c.Args)

	assert.Equal(t, c.Image, pc.Image, p.Name)
	assert.Equal(t, args, pc.Args, p.Name)
	assert.Equal(t, want.ServiceAccountName, got.ServiceAccountName, p.Name)
	assert.Equal(t, want.SecurityContext, got.SecurityContext, p.Name)
	assert.Equal(t, c.SecurityContext, pc.SecurityContext, p.Name)
	assert.Equal(t, c.EnvFrom, pc.EnvFrom, p.Name)
	assert.Equal(t, portsOf(c), portsOf(pc), p.Name)
	assert.Equal(t, handlerOf(c.ReadinessProbe), handlerOf(pc.ReadinessProbe), p.Name)
	assert.Equal(t, handlerOf(c.LivenessProbe), handlerOf(pc.LivenessProbe), p.Name)
	assert.Equal(t, c.Resources.Requests.Cpu().String()+" "+c.Resources.Requests.Memory().String()+" "+c.Resources.Limits.Memory().String(),
		pc.Resources.Requests.Cpu().String()+" "+pc.Resources.Requests.Memory().String()+" "+pc.Resources.Limits.Memory().String(), p.Name)
	mounts := map[string]bool{}
	for _, m := range pc.VolumeMounts {
		mounts[m.MountPath] = m.ReadOnly
	}
	for _, m := range c.VolumeMounts {
		assert.Equal(t, m.ReadOnly, mounts[m.MountPath], "%s: %s", p.Name, m.MountPath)
	}
	assert.Contains(t, mounts, tokenPath, "%s: the kubelet mounts its ServiceAccount token", p.Name)

	require.NotEmpty(t, p.Status.ContainerStatuses, p.Name)
	pid := containerPID(t, p.Status.ContainerStatuses[0].ContainerID)
	proc := func(name string) string {
		b, err := os.ReadFile(filepath.Join("/proc", pid, name))
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, append([]string{image.Binary}, args...), strings.Split(strings.TrimRight(proc("cmdline"), "\x00"), "\x00"), "%s: the process's command line", p.Name)
	status := fields(proc("status"))
	uid := strings.Split(image.User, ":")[0] // runAsNonRoot: the image's numeric user
	if u := want.SecurityContext.RunAsUser; u != nil {
		uid = strconv.FormatInt(*u, 10)
	}
	assert.Equal(t, []string{uid, uid, uid, uid}, strings.Fields(status["Uid"]), "%s: runs as the image's non-root user", p.Name)
	assert.Equal(t, "1", status["NoNewPrivs"], "%s: allowPrivilegeEscalation false", p.Name)
	assert.Equal(t, "0000000000000000", status["CapEff"], "%s: every capability dropped", p.Name)
	assert.Equal(t, "2", status["Seccomp"], "%s: the RuntimeDefault seccomp filter", p.Name)
	ro := mountOptions(proc("mountinfo"))
	assert.True(t, ro["/"], "%s: the root filesystem is read-only", p.Name)
	for _, m := range c.VolumeMounts {
		assert.Equal(t, m.ReadOnly, ro[m.MountPath], "%s: %s mounted read-only", p.Name, m.MountPath)
	}

	token, err := os.ReadFile(filepath.Join("/proc", pid, "root", tokenPath, "token"))
	require.NoError(t, err, "%s: its token", p.Name)
	review, err := Clientset(t).AuthenticationV1().TokenReviews().Create(context.Background(),
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: string(token)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "system:serviceaccount:"+devenv.Namespace+":"+want.ServiceAccountName, review.Status.User.Username, "%s: the Pod acts as its ServiceAccount", p.Name)
}

// declaredArgs are args as the install doc's overlays leave them: pointed
// at this package's Temporal, on the node's IP, and the worker's at the
// exec gate's address there (execGateURL).
func declaredArgs(args []string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		if strings.HasPrefix(a, "--temporal-address=") {
			out[i] = "--temporal-address=" + env.TemporalAddress
		}
	}
	if execGateURL != "" && len(out) > 0 && out[0] == "worker" {
		out = append(out, "--exec-gate-url="+execGateURL)
	}
	return out
}

func portsOf(c corev1.Container) map[string]int32 {
	out := map[string]int32{}
	for _, p := range c.Ports {
		out[p.Name] = p.ContainerPort
	}
	return out
}

func handlerOf(p *corev1.Probe) *corev1.ProbeHandler {
	if p == nil {
		return nil
	}
	h := p.ProbeHandler.DeepCopy()
	if h.HTTPGet != nil && h.HTTPGet.Scheme == "" {
		h.HTTPGet.Scheme = corev1.URISchemeHTTP // the API server's default
	}
	return h
}

// containerPID is the first process of the container, found in its cgroup.
func containerPID(t testing.TB, containerID string) string {
	t.Helper()
	_, id, ok := strings.Cut(containerID, "://")
	require.True(t, ok, containerID)
	var pid string
	_ = filepath.WalkDir("/sys/fs/cgroup/pids/kubepods", func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.IsDir() || e.Name() != id {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if f := strings.Fields(string(b)); len(f) > 0 {
			pid = f[0]
		}
		return fs.SkipAll
	})
	require.NotEmpty(t, pid, "no process of container %s", containerID)
	return pid
}

// fields parses /proc/<pid>/status.
func fields(status string) map[string]string {
	out := map[string]string{}
	s := bufio.NewScanner(strings.NewReader(status))
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// mountOptions says, for each mount point of /proc/<pid>/mountinfo,
// whether its last mount is read-only.
func mountOptions(mountinfo string) map[string]bool {
	ro := map[string]bool{}
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		ro[f[4]] = strings.HasPrefix(f[5], "ro,") || f[5] == "ro"
	}
	return ro
}

// CheckDeployedPods waits until the Deployments ds are rolled out as Pods
// (logging how long each took since since) and checks every Pod against
// what deploy/ declares (CheckPodParity).
func CheckDeployedPods(t *testing.T, ds []appsv1.Deployment, since time.Time) {
	t.Run("every Deployment of deploy/ becomes Ready as Pods of the image", func(t *testing.T) {
		WaitRolledOut(t, ds, since)
	})
	t.Run("what runs in the Pods is what deploy/ declares", func(t *testing.T) {
		for _, d := range ds {
			for _, p := range RunningPods(t, d) {
				CheckPodParity(t, d, p)
			}
		}
	})
}
