package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// SpecHash is the sha256 (hex) of everything in obj except metadata and
// status: the part of an object whose change is a "spec change". Deployments
// bump metadata.generation on annotation-only edits, so the webhook and the
// drift workflow compare this hash, not the generation, to tell whether a
// parent really changed. encoding/json sorts map keys, so the hash is canonical.
func SpecHash(obj map[string]any) string {
	rest := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "metadata" && k != "status" {
			rest[k] = v
		}
	}
	b, err := json.Marshal(rest)
	if err != nil {
		// Objects decoded from JSON always re-encode; an unencodable value
		// still gets a stable, distinct hash.
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
