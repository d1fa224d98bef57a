// Package docs runs the shell blocks of README.md and docs/*.md, in order per
// document, against the real parts as `make dev` starts them (see
// docs_test.go). This file reads the blocks and their markers.
//
// The convention, also described in README.md ("Docs that run"):
//
//   - Every ```sh, ```bash or ```shell block runs, in one fresh bash per block
//     with `set -euo pipefail`, from a directory that looks like the
//     repository root (deploy/, test/, ... and its own .dev/), in the shell
//     `source .dev/env` gives: kubectl, temporal and kubectl-remedy in
//     .dev/bin first on PATH, KUBECONFIG, TEMPORAL_ADDRESS and REMEDY_WEB_UI
//     pointing at the parts. A command that fails fails the test.
//   - An HTML comment on the line before the block's fence changes that:
//     <!-- doctest: skip (reason) --> does not run it (a reason is required:
//     make dev, make test, a real cluster, a template with <placeholders>);
//     <!-- doctest: fails --> expects it to exit non-zero (a refusal the doc
//     shows); <!-- doctest: watch until TEXT --> runs a block that never ends
//     (kubectl get -w) until its output contains TEXT, as a person would
//     press Ctrl-C there; <!-- doctest: watch 10s --> stops it after 10s;
//     <!-- doctest: deploy --> leaves it to test/deploy (Deploy).
//   - A ```text or ```console block (or an unlabelled one) right after a run
//     block, with only blank lines between, is its expected output: each of
//     its lines must appear, in order, among the output's lines (stdout and
//     stderr). Lines are compared field by field; ages (5s, 2m10s) match any
//     age, <placeholder> in a field matches any text (drift-demo-<hash>), and
//     a last field ... matches the rest of the line.
package docs

import (
	"bufio"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Mode says how a block is run.
type Mode int

const (
	// Run runs the block; it must exit 0.
	Run Mode = iota
	// Skip does not run it.
	Skip
	// Fails runs it; it must exit non-zero.
	Fails
	// Watch runs it until Until appears in its output, or for For.
	Watch
	// Deploy is run by test/deploy, as written, against a cluster holding
	// deploy/'s objects (cert-manager's CRDs among them); TestDocs skips it.
	Deploy
)

// Block is one fenced code block that the test runs.
type Block struct {
	Doc    string
	Line   int // of the opening fence, 1-based
	Script string
	Mode   Mode
	Reason string        // of a skip
	Until  string        // of a watch
	For    time.Duration // of a watch
	// Want is the expected output block that follows, if any.
	Want []string
}

func (b Block) String() string { return fmt.Sprintf("%s:%d", b.Doc, b.Line) }

var (
	markerRE = regexp.MustCompile(`^<!--\s*doctest:\s*(.*?)\s*-->$`)
	skipRE   = regexp.MustCompile(`^skip\s+\((.+)\)$`)
	untilRE  = regexp.MustCompile(`^watch\s+until\s+(.+)$`)
	forRE    = regexp.MustCompile(`^watch\s+(\S+)$`)
)

var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true}
var outputLangs = map[string]bool{"": true, "text": true, "console": true}

type fence struct {
	lang   string
	line   int
	body   []string
	marker string // the doctest marker before it, if any
	// adjacent: only blank lines separate it from the previous block.
	adjacent bool
}

// Parse returns the shell blocks of one markdown document, with their
// markers and expected output.
func Parse(doc, text string) ([]Block, error) {
	fences, err := splitFences(doc, text)
	if err != nil {
		return nil, err
	}
	var blocks []Block
	for i, f := range fences {
		if !shellLangs[f.lang] {
			if f.marker != "" {
				return nil, fmt.Errorf("%s:%d: doctest marker on a %q block, which never runs", doc, f.line, f.lang)
			}
			continue
		}
		b := Block{Doc: doc, Line: f.line, Script: strings.Join(f.body, "\n") + "\n"}
		if err := b.setMode(f.marker); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", doc, f.line, err)
		}
		if i+1 < len(fences) && fences[i+1].adjacent && outputLangs[fences[i+1].lang] {
			for _, l := range fences[i+1].body {
				if strings.TrimSpace(l) != "" {
					b.Want = append(b.Want, l)
				}
			}
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

func (b *Block) setMode(marker string) error {
	switch m := marker; {
	case m == "":
		b.Mode = Run
	case m == "fails":
		b.Mode = Fails
	case m == "deploy":
		b.Mode = Deploy
	case skipRE.MatchString(m):
		b.Mode, b.Reason = Skip, skipRE.FindStringSubmatch(m)[1]
	case untilRE.MatchString(m):
		b.Mode, b.Until = Watch, strings.Trim(untilRE.FindStringSubmatch(m)[1], `"`)
	case forRE.MatchString(m):
		d, err := time.ParseDuration(forRE.FindStringSubmatch(m)[1])
		if err != nil {
			return fmt.Errorf("doctest marker %q: %w", m, err)
		}
		b.Mode, b.For = Watch, d
	default:
		return fmt.Errorf("unknown doctest marker %q: want skip (reason), fails, deploy, watch until TEXT or watch DURATION", m)
	}
	return nil
}

func splitFences(doc, text string) ([]fence, error) {
	var (
		out      []fence
		cur      *fence
		marker   string
		blank    = true // only blank lines since the last block closed
		sawBlock bool
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur != nil {
			if trimmed == "```" {
				out = append(out, *cur)
				cur, blank, sawBlock = nil, true, true
				continue
			}
			cur.body = append(cur.body, line)
			continue
		}
		if lang, ok := strings.CutPrefix(trimmed, "```"); ok {
			cur = &fence{lang: strings.TrimSpace(lang), line: n, marker: marker, adjacent: sawBlock && blank}
			marker = ""
			continue
		}
		if m := markerRE.FindStringSubmatch(trimmed); m != nil {
			marker = m[1]
			continue
		}
		if trimmed != "" {
			if marker != "" {
				return nil, fmt.Errorf("%s:%d: doctest marker is not followed by a code block", doc, n-1)
			}
			blank = false
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: code block never closed", doc, cur.line)
	}
	return out, sc.Err()
}

var placeholderRE = regexp.MustCompile(`<[^<>]+>`)

// placeholderField matches what a field with <placeholders> stands for.
func placeholderField(want string) *regexp.Regexp {
	parts := placeholderRE.Split(want, -1)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".+") + "$")
}

var ageRE = regexp.MustCompile(`^(\d+(ms|s|m|h|d))+$|^<unknown>$`)

// MissingLines returns the expected lines that do not appear, in order,
// among got's lines.
func MissingLines(want []string, got string) []string {
	lines := strings.Split(got, "\n")
	var missing []string
	i := 0
	for _, w := range want {
		j := i
		for j < len(lines) && !lineMatches(w, lines[j]) {
			j++
		}
		if j == len(lines) {
			missing = append(missing, w)
			continue
		}
		i = j + 1
	}
	return missing
}

func lineMatches(want, got string) bool {
	w, g := strings.Fields(want), strings.Fields(got)
	if n := len(w); n > 0 && w[n-1] == "..." && len(g) >= n-1 {
		w, g = w[:n-1], g[:n-1]
	}
	if len(w) != len(g) {
		return false
	}
	for i := range w {
		switch {
		case w[i] == g[i]:
		case ageRE.MatchString(w[i]) && ageRE.MatchString(g[i]):
		case strings.Contains(w[i], "<") && placeholderField(w[i]).MatchString(g[i]):
		default:
			return false
		}
	}
	return true
}
