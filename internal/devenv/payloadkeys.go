package devenv

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/remedy-dev/remedy/internal/seal"
)

// statePayloadKeys is the key directory inside Options.StateDir (or the temp dir).
const statePayloadKeys = "payload-keys"

// devKeyID names the key a fresh directory gets.
const devKeyID = "dev-1"

// payloadKeys loads the key directory under dir, first making one with a
// fresh random key: a kept state directory keeps its keys, so the runs of
// an earlier start stay readable after a restart.
func payloadKeys(dir string) (string, *seal.Keyring, error) {
	keys := filepath.Join(dir, statePayloadKeys)
	_, err := os.Stat(keys)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := NewPayloadKeys(keys, devKeyID); err != nil {
			return "", nil, err
		}
	case err != nil:
		return "", nil, fmt.Errorf("read payload keys: %w", err)
	}
	ring, err := seal.LoadKeyring(keys)
	if err != nil {
		return "", nil, err
	}
	return keys, ring, nil
}

// NewPayloadKeys makes dir holding one fresh random key named id, active:
// the layout of Secret remedy-payload-keys (docs/operate.md).
func NewPayloadKeys(dir, id string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create payload key directory: %w", err)
	}
	return AddPayloadKey(dir, id)
}

// AddPayloadKey adds a fresh random key named id to dir and makes it the
// active one, keeping the others: a rotation.
func AddPayloadKey(dir, id string) error {
	key := make([]byte, seal.KeySize)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("generate payload key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, id), key, 0o600); err != nil {
		return fmt.Errorf("write payload key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, seal.ActiveFile), []byte(id+"\n"), 0o600); err != nil {
		return fmt.Errorf("write active payload key: %w", err)
	}
	return nil
}
