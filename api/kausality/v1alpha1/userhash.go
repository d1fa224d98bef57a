package v1alpha1

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
)

// MaxUserHashes caps kausality.io/controllers and kausality.io/updaters.
const MaxUserHashes = 5

// UserHash is the 5-character identity kausality records for a user: the
// first 4 bytes of SHA-256(name), or of the UID when the name is empty, as a
// big-endian uint32 in base36, left-padded with '0' to 5 characters, first 5 kept.
func UserHash(name, uid string) string {
	id := name
	if id == "" {
		id = uid
	}
	sum := sha256.Sum256([]byte(id))
	s := strconv.FormatUint(uint64(binary.BigEndian.Uint32(sum[:4])), 36)
	if len(s) < 5 {
		s = strings.Repeat("0", 5-len(s)) + s
	}
	return s[:5]
}

// ParseUserHashes splits a comma-separated hash list, dropping empty entries.
// System annotations are never rejected: whatever is there is read leniently.
func ParseUserHashes(s string) []string {
	if s == "" {
		return nil
	}
	var hs []string
	for _, h := range strings.Split(s, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hs = append(hs, h)
		}
	}
	return hs
}

// AddUserHash returns hs with h appended, dropping the oldest entries beyond
// MaxUserHashes, and whether anything changed. hs is not modified.
func AddUserHash(hs []string, h string) ([]string, bool) {
	if slices.Contains(hs, h) {
		return hs, false
	}
	out := append(slices.Clip(hs), h)
	if len(out) > MaxUserHashes {
		out = out[len(out)-MaxUserHashes:]
	}
	return out, true
}

// FormatUserHashes joins hashes with commas.
func FormatUserHashes(hs []string) string { return strings.Join(hs, ",") }
