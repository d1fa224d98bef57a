package harness

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TokenUsers are the people the API server knows by a static bearer token
// (--token-auth-file), so a test can hand a real token to a tool that asks
// the API server who it is (Remedy's codec server), as these names.
var TokenUsers = []string{"alice", "bob", "carol", "mallory", "eve"}

var userTokens = map[string]string{}

// writeTokenFile writes the API server's static token file into dir.
func writeTokenFile(dir string) (string, error) {
	var b strings.Builder
	for i, u := range TokenUsers {
		raw := make([]byte, 16)
		if _, err := rand.Read(raw); err != nil {
			return "", fmt.Errorf("token for %s: %w", u, err)
		}
		tok := hex.EncodeToString(raw)
		userTokens[u] = tok
		fmt.Fprintf(&b, "%s,%s,uid-%d\n", tok, u, i)
	}
	path := filepath.Join(dir, "tokens.csv")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// UserToken is the bearer token the API server authenticates as user (one of TokenUsers).
func UserToken(t testing.TB, user string) string {
	t.Helper()
	tok, ok := userTokens[user]
	if !ok {
		t.Fatalf("no token for %q: the API server knows tokens for %v", user, TokenUsers)
	}
	return tok
}
