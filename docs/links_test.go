// Package docs holds the documentation; its test checks that every relative
// link in it, and in the repository's top-level Markdown, resolves.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// link is a Markdown inline link's target; the text may span lines.
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// heading is an ATX heading line.
var heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)

// fence opens or closes a code block, whose lines are not Markdown.
var fence = regexp.MustCompile("(?m)^\\s*(```|~~~)")

// slug is the anchor GitHub derives from a heading: lower case, spaces to
// dashes, punctuation other than dashes and underscores dropped.
func slug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// prose is the file's text outside code blocks.
func prose(text string) string {
	var out []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			in = !in
			continue
		}
		if !in {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// anchors are the file's heading slugs, with GitHub's -1, -2 suffixes for repeats.
func anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(prose(text), -1) {
		s := slug(strings.NewReplacer("`", "", "*", "").Replace(m[1]))
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Deciding through Temporal: the codec server": "deciding-through-temporal-the-codec-server",
		"Policy and conditions (OPA / Rego)":          "policy-and-conditions-opa--rego",
		"How a person's decision reaches a workflow":  "how-a-persons-decision-reaches-a-workflow",
		"kubectl remedy": "kubectl-remedy",
	} {
		assert.Equal(t, want, slug(in), in)
	}
}

// TestRelativeLinks: every relative link in README.md, DEVELOPERS.md,
// CHANGELOG.md and docs/*.md names a file that exists, and its #anchor, if
// any, a heading of that file.
func TestRelativeLinks(t *testing.T) {
	files, err := filepath.Glob("*.md")
	require.NoError(t, err)
	for _, top := range []string{"README.md", "DEVELOPERS.md", "CHANGELOG.md"} {
		files = append(files, filepath.Join("..", top))
	}
	require.Greater(t, len(files), 10)
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(prose(string(raw)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), path)
			}
			checked++
			if _, err := os.Stat(dest); !assert.NoError(t, err, "%s links to %s, which does not exist", f, target) || anchor == "" {
				continue
			}
			body, err := os.ReadFile(dest)
			require.NoError(t, err)
			assert.True(t, anchors(string(body))[anchor], "%s links to %s: %s has no heading with anchor #%s", f, target, dest, anchor)
		}
	}
	require.Greater(t, checked, 50, "the links were found")
}
