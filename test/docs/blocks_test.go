package docs

import (
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sample = "# Doc\n\n" +
	"```sh\nmake dev\n```\n\n" + // runs: no marker
	"<!-- doctest: skip (needs a real cluster) -->\n```sh\nkubectl apply -k deploy/manager\n```\n\n" +
	"<!-- doctest: watch until RollbackReady -->\n```sh\nkubectl get kexec -n demo -w\n```\n\n" +
	"```text\nNAME   PHASE\nscale-web   RollbackReady   1s\n```\n\n" +
	"<!-- doctest: fails -->\n```bash\nkubectl apply -f bad.yaml\n```\nprose between\n```\nnot its output\n```\n" +
	"<!-- doctest: watch 5s -->\n```shell\nkubectl get rs -w\n```\n" +
	"```yaml\nkind: Thing\n```\n"

func TestParse(t *testing.T) {
	blocks, err := Parse("doc.md", sample)
	require.NoError(t, err)
	require.Len(t, blocks, 5)
	assert.Equal(t, Block{Doc: "doc.md", Line: 3, Script: "make dev\n", Mode: Run}, blocks[0])
	assert.Equal(t, Skip, blocks[1].Mode)
	assert.Equal(t, "needs a real cluster", blocks[1].Reason)
	assert.Equal(t, Watch, blocks[2].Mode)
	assert.Equal(t, "RollbackReady", blocks[2].Until)
	assert.Equal(t, []string{"NAME   PHASE", "scale-web   RollbackReady   1s"}, blocks[2].Want)
	assert.Equal(t, Fails, blocks[3].Mode)
	assert.Empty(t, blocks[3].Want, "a block after prose is not output")
	assert.Equal(t, 5*time.Second, blocks[4].For)
}

func TestParseRefusesBadMarkers(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown marker":     "<!-- doctest: maybe -->\n```sh\ntrue\n```\n",
		"skip without why":   "<!-- doctest: skip -->\n```sh\ntrue\n```\n",
		"marker before text": "<!-- doctest: fails -->\nprose\n```sh\ntrue\n```\n",
		"marker on output":   "<!-- doctest: fails -->\n```text\nyes\n```\n",
		"bad duration":       "<!-- doctest: watch soon -->\n```sh\ntrue\n```\n",
		"unclosed block":     "```sh\ntrue\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("doc.md", doc)
			assert.Error(t, err)
		})
	}
}

func TestMissingLines(t *testing.T) {
	got := "NAME        ACTION   PHASE           AGE\n" +
		"scale-web   scale    Validating      0s\n" +
		"scale-web   scale    RollbackReady   2s\n" +
		"scale-web   scale    Completed       2m1s\n"
	for _, tc := range []struct {
		name    string
		want    []string
		missing []string
	}{
		{"ages match any age", []string{"NAME ACTION PHASE AGE", "scale-web scale RollbackReady 1s", "scale-web scale Completed 31s"}, nil},
		{"placeholders match any field", []string{"scale-web <action> Validating 0s"}, nil},
		{"a row never printed", []string{"scale-web scale Executing 0s"}, []string{"scale-web scale Executing 0s"}},
		{"order counts", []string{"scale-web scale Completed 1s", "scale-web scale Validating 0s"}, []string{"scale-web scale Validating 0s"}},
		{"placeholders inside a field", []string{"<name>-web scale Completed 1s"}, nil},
		{"... matches the rest", []string{"scale-web scale ..."}, nil},
		{"fields, not substrings", []string{"scale-web scale"}, []string{"scale-web scale"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.missing, MissingLines(tc.want, got))
		})
	}
}

func TestCheck(t *testing.T) {
	exitErr := exec.Command("false").Run()
	require.Error(t, exitErr)
	timeout := errors.New("still running after 4m0s")
	for _, tc := range []struct {
		name string
		b    Block
		out  string
		err  error
		ok   bool
	}{
		{"a command that fails", Block{Mode: Run}, "", exitErr, false},
		{"a refusal the doc shows", Block{Mode: Fails, Want: []string{"is invalid"}}, "is invalid", exitErr, true},
		{"a refusal that did not happen", Block{Mode: Fails}, "", nil, false},
		{"a refusal that hangs", Block{Mode: Fails}, "", timeout, false},
		{"output the doc promises", Block{Mode: Run, Want: []string{"yes"}}, "Warning: x\nyes\n", nil, true},
		{"output the doc promises, missing", Block{Mode: Run, Want: []string{"yes"}}, "no\n", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.ok, check(tc.b, tc.out, tc.err) == "", check(tc.b, tc.out, tc.err))
		})
	}
}

func TestHasLineWith(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want bool
	}{
		{"a Executing 1s\nscale-web scale web RollbackReady", false},
		{"scale-web scale web RollbackReady   RollbackAvailable   1s\n", true},
		{"Executing\n", false},
	} {
		assert.Equal(t, tc.want, hasLineWith(tc.out, "RollbackReady"), tc.out)
	}
}
