package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// maxHintKeys bounds the keys a hint lists, so a hint about a large object
// stays one line.
const maxHintKeys = 12

// undefinedHint names the first input path the module reads that the input
// does not have, with the keys that are there: "pass is undefined" alone
// does not tell a misspelled field from a false comparison. "" when every
// path it reads exists, or the module does not parse.
func undefinedHint(module string, in ConditionInput) string {
	mod, err := ast.ParseModuleWithOpts("condition.rego", module, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return ""
	}
	var doc map[string]any
	raw, err := json.Marshal(in)
	if err != nil || json.Unmarshal(raw, &doc) != nil {
		return ""
	}
	hint := ""
	ast.WalkRefs(mod, func(ref ast.Ref) bool {
		if hint == "" && ref.HasPrefix(ast.InputRootRef) {
			hint = missingPath(ref, doc)
		}
		return hint != ""
	})
	return hint
}

// missingPath follows ref's constant string keys through doc and describes
// the first one that is not there.
func missingPath(ref ast.Ref, doc map[string]any) string {
	at := "input"
	var cur any = doc
	for _, term := range ref[1:] {
		key, ok := term.Value.(ast.String)
		if !ok {
			return "" // an index or a variable: not a field name to check
		}
		obj, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		next, ok := obj[string(key)]
		if !ok {
			return fmt.Sprintf("%s.%s is not in the input (%s)", at, string(key), keysOf(at, obj))
		}
		at, cur = at+"."+string(key), next
	}
	return ""
}

func keysOf(at string, obj map[string]any) string {
	if len(obj) == 0 {
		return at + " is empty"
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	more := ""
	if len(keys) > maxHintKeys {
		keys, more = keys[:maxHintKeys], ", ..."
	}
	return fmt.Sprintf("%s has %s%s", at, strings.Join(keys, ", "), more)
}
