package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/remedy-dev/remedy/api/v1alpha1"
	"github.com/remedy-dev/remedy/test/harness"
	"github.com/remedy-dev/remedy/test/procs"
)

// upgraded is the "process" the upgrade test stops: the previous release's
// worker, drift webhook and operator, replaced by this tree's.
const upgraded = "upgrade"

// How long a case leaves the processes down before it asks for this tree's:
// past the reload case's check that nothing rolls while they are down
// (two debounce windows), since this tree's start for whichever asks first.
func init() { down[upgraded] = 2*debounce + time.Second }

// TestUpgrade builds the previous release's binary from its commit
// (hack/release/<version>.commit, checked out with git worktree), runs its
// worker, drift webhook and operator as its deploy/manager declares them,
// and starts runs on it: one waiting for approval, one in its rollback
// window, a reload inside its debounce window and an open drift. It kills
// them all at once, starts this tree's on the same Temporal and API server,
// and every run finishes, each action done exactly once.
func TestUpgrade(t *testing.T) {
	require.NoError(t, harness.Use(procs.Env()))
	version, root, bin := previousRelease(t)
	t.Logf("upgrading from %s (%s)", version, root)

	p := &parts{proxy: procs.NewProxy(t), kubectl: procs.NewKubectl(t), callbacks: newCallbacks(t)}
	p.start(t, root, bin)
	cs := []faultCase{
		{upgraded, pointApproval, func(t *testing.T, p *parts) string { return approvalWait(t, p, upgraded) }},
		{upgraded, "rollback window", func(t *testing.T, p *parts) string { return rollbackWindow(t, p, upgraded) }},
		{upgraded, pointDrift, func(t *testing.T, p *parts) string { return driftOpen(t, p, upgraded) }},
		// Last: the window is seconds long, so its run reaches it once the others wait.
		{upgraded, pointReload, func(t *testing.T, p *parts) string {
			p.upgrade.waitOthers(t)
			return reloadDebounce(t, p, upgraded)
		}},
	}
	// The previous release seals nothing: the test reads its answers with the plain converter.
	previous, err := client.Dial(client.Options{HostPort: procs.Env().TemporalAddress, Namespace: "default"})
	require.NoError(t, err)
	defer previous.Close()
	p.upgrade = &upgrade{parent: t, cases: len(cs), others: make(chan struct{}), all: make(chan struct{}), previous: previous}
	t.Run("runs started on "+version, func(t *testing.T) {
		// All at once, whatever -parallel says: each waits for the others at its point.
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Go(func() { t.Run(c.point, func(t *testing.T) { t.Log(c.run(t, p)) }) })
		}
		wg.Wait()
	})
	assert.Positive(t, p.upgrade.swapped, "the processes were swapped")
}

// upgrade swaps the processes once every case has reached its point, and
// starts this tree's once, for whichever case asks first.
type upgrade struct {
	parent  *testing.T
	cases   int
	mu      sync.Mutex
	arrived int
	// others closes when all cases but the last have reached their point, all when every one has.
	others, all         chan struct{}
	stopOnce, startOnce sync.Once
	swapped             time.Duration
	stopped             time.Time
	// previous is a client of the plain converter, for what the previous release answers.
	previous client.Client
}

const barrierTimeout = 5 * time.Minute

func (u *upgrade) waitOthers(t *testing.T) {
	select {
	case <-u.others:
	case <-time.After(barrierTimeout):
		require.FailNow(t, "the other runs never reached their points")
	}
}

// stop counts the case in, waits for the rest, and kills the previous
// release's processes, and takes them out of their Services. SIGKILL, not a
// rolling update's SIGTERM: a worker that drains would finish a reload
// window that closes meanwhile, and the runs must be left open for the
// new binary.
func (u *upgrade) stop(t *testing.T, p *parts) {
	u.mu.Lock()
	u.arrived++
	switch u.arrived {
	case u.cases - 1:
		close(u.others)
	case u.cases:
		close(u.all)
	}
	u.mu.Unlock()
	select {
	case <-u.all:
	case <-time.After(barrierTimeout):
		require.FailNow(t, "the other runs never reached their points")
	}
	u.stopOnce.Do(func() {
		for _, pod := range []*procs.Pod{p.worker, p.webhook, p.operator} {
			pod.Kill()
		}
		procs.Unroute(t, p.operator)
		procs.Unroute(t, p.webhook)
		u.stopped = time.Now()
		t.Logf("the previous release's processes killed with %d runs open", u.cases)
	})
}

// start starts this tree's processes under the parent test, so they
// outlive the case that asked first.
func (u *upgrade) start(t *testing.T, p *parts) {
	u.startOnce.Do(func() {
		// The previous release sealed nothing: what it recorded before it
		// stopped is accepted unsealed, nothing after (docs/security.md, upgrading).
		p.args = []string{"--payload-unsealed-before=" + u.stopped.UTC().Format(time.RFC3339Nano)}
		p.start(u.parent, procs.Root, procs.Bin())
		u.swapped = time.Since(u.stopped)
		t.Logf("this tree's processes serve %.1fs after the previous release's stopped", u.swapped.Seconds())
	})
}

// rollbackWindow: a scale reaches its rollback window; the processes are
// replaced within it; a rollback asked afterwards undoes the scale once.
func rollbackWindow(t *testing.T, p *parts, what string) string {
	ns := harness.Namespace(t)
	gen := target(t, ns)
	spec := scaleSpec(ns, 3)
	spec.RollbackWindow = v1alpha1.DurationOf(10 * time.Minute)
	k := settle(t, execution(t, ns, "scale-web", spec), v1alpha1.PhaseRollbackReady, 90*time.Second)
	require.Equal(t, gen+1, generation(t, ns, "web"), "scaled once")

	p.kill(t, what)
	stays(t, ns, "web", gen+1, down[what], "nothing is written while "+what+" is down")
	p.restart(t, what)

	p.kubectl.Run(t, "annotate", "kexec", "scale-web", "-n", ns, "remedy.dev/rollback=upgrade test")
	k = harness.Eventually(t, k, 2*time.Minute, func(k *v1alpha1.KubernetesExecution) bool { return k.Status.Phase.Terminal() })
	require.Equal(t, v1alpha1.PhaseCompleted, k.Status.Phase, "reason %s: %s", k.Status.Reason, k.Status.Message)
	assert.Equal(t, "RolledBack", string(k.Status.Reason))
	d := deployment(t, ns, "web")
	assert.Equal(t, gen+2, d.Generation, "one scale, one rollback")
	assert.Equal(t, int32(0), *d.Spec.Replicas)
	stays(t, ns, "web", gen+2, 2*time.Second, "no third write")
	return "scaled on the previous release; rolled back on this tree's; generation +2"
}

// previousRelease checks out the newest release recorded in hack/release
// with git worktree (a fresh clone needs the history: a shallow one lacks
// the commit) and builds its binary as test/procs builds this tree's.
func previousRelease(t *testing.T) (version, root, bin string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(procs.Root, "hack", "release", "v*.commit"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "hack/release records no release")
	sort.Slice(files, func(i, j int) bool { return olderVersion(files[i], files[j]) })
	latest := files[len(files)-1]
	version = strings.TrimSuffix(filepath.Base(latest), ".commit")
	raw, err := os.ReadFile(latest)
	require.NoError(t, err)
	commit := strings.TrimSpace(string(raw))

	tmp := t.TempDir()
	root = filepath.Join(tmp, version)
	out, err := exec.Command("git", "-C", procs.Root, "worktree", "add", "--detach", root, commit).CombinedOutput()
	require.NoError(t, err, "git worktree add %s %s: %s\n(the upgrade test needs the repository's history: in a shallow clone run git fetch --unshallow)", version, commit, out)
	t.Cleanup(func() {
		if out, err := exec.Command("git", "-C", procs.Root, "worktree", "remove", "--force", root).CombinedOutput(); err != nil {
			t.Logf("git worktree remove %s: %v: %s", root, err, out)
		}
	})
	bin = filepath.Join(tmp, "remedy-"+version)
	start := time.Now()
	build := exec.Command("go", "build", "-o", bin, "./cmd/remedy")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	out, err = build.CombinedOutput()
	require.NoError(t, err, "build %s: %s", version, out)
	t.Logf("built %s from %s in %.0fs", version, commit, time.Since(start).Seconds())
	return version, root, bin
}

// olderVersion orders vMAJOR.MINOR.PATCH file names numerically.
func olderVersion(a, b string) bool {
	parse := func(f string) [3]int {
		var v [3]int
		_, _ = fmt.Sscanf(strings.TrimSuffix(filepath.Base(f), ".commit"), "v%d.%d.%d", &v[0], &v[1], &v[2])
		return v
	}
	va, vb := parse(a), parse(b)
	for i := range va {
		if va[i] != vb[i] {
			return va[i] < vb[i]
		}
	}
	return false
}
