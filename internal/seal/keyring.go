// Package seal seals every payload Remedy's parts exchange through Temporal
// with authenticated encryption (AES-256-GCM) under a key only Remedy's parts
// hold, so that reaching Temporal is not enough to speak as Remedy: a payload
// the worker did not see sealed under one of its keys is refused before any
// workflow or activity code reads it (docs/security.md, "The Temporal trust
// boundary").
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// ActiveFile names, inside a key directory, the file that holds the ID of the
// key new payloads are sealed with. Every other file is a key, named by its ID.
const ActiveFile = "active"

// KeySize is the size of a key: AES-256.
const KeySize = 32

var keyID = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// Keyring holds the keys a part may open payloads with and the one it seals with.
// Keys are never removed while runs sealed under them may be open: rotation adds
// a key, makes it active, and drops the old one only after those runs closed.
type Keyring struct {
	active string
	aeads  map[string]cipher.AEAD
}

// LoadKeyring reads a key directory, as a Secret mounted as a volume lays it out:
// one file per key named by its ID, holding 32 bytes (raw, or base64 text), and
// the file "active" naming the key to seal with.
func LoadKeyring(dir string) (*Keyring, error) {
	if dir == "" {
		return nil, errors.New("no payload key directory: every part that talks to Temporal needs Remedy's payload keys (--payload-keys, a mounted Secret; see docs/security.md)")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read payload key directory %s: %w", dir, err)
	}
	keys := map[string][]byte{}
	var active string
	for _, e := range entries {
		name := e.Name()
		// A mounted Secret's own bookkeeping (..data, ..2026_...) is hidden.
		if strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read payload key %s: %w", name, err)
		}
		if name == ActiveFile {
			active = strings.TrimSpace(string(b))
			continue
		}
		if !keyID.MatchString(name) {
			return nil, fmt.Errorf("payload key file %s: a key's ID (its file name) is 1-32 lower-case letters, digits and dashes", name)
		}
		key, err := parseKey(b)
		if err != nil {
			return nil, fmt.Errorf("payload key %s: %w", name, err)
		}
		keys[name] = key
	}
	return NewKeyring(active, keys)
}

func parseKey(b []byte) ([]byte, error) {
	if len(b) == KeySize {
		return b, nil
	}
	s := strings.TrimSpace(string(b))
	if k, err := base64.StdEncoding.DecodeString(s); err == nil && len(k) == KeySize {
		return k, nil
	}
	return nil, fmt.Errorf("a key is %d random bytes, raw or base64 (e.g. `head -c %d /dev/urandom`); this one is %d bytes", KeySize, KeySize, len(b))
}

// NewKeyring builds a keyring from keys by ID; active must be one of them.
func NewKeyring(active string, keys map[string][]byte) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("no payload keys: the key directory holds no key file")
	}
	if active == "" {
		return nil, fmt.Errorf("no active payload key: the file %q names the key to seal with (one of %s)", ActiveFile, strings.Join(sortedIDs(keys), ", "))
	}
	if _, ok := keys[active]; !ok {
		return nil, fmt.Errorf("the active payload key %q is not among the keys (%s)", active, strings.Join(sortedIDs(keys), ", "))
	}
	k := &Keyring{active: active, aeads: map[string]cipher.AEAD{}}
	for id, key := range keys {
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("payload key %s: %w", id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("payload key %s: %w", id, err)
		}
		k.aeads[id] = aead
	}
	return k, nil
}

// Active is the ID of the key new payloads are sealed with.
func (k *Keyring) Active() string { return k.active }

// IDs lists the keys the ring opens payloads with.
func (k *Keyring) IDs() []string {
	ids := make([]string, 0, len(k.aeads))
	for id := range k.aeads {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func sortedIDs(keys map[string][]byte) []string {
	ids := make([]string, 0, len(keys))
	for id := range keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
