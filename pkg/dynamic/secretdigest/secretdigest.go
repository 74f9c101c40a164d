// Package secretdigest is the one rule by which metactl keeps the data of a
// Secret out of what it records (the last-applied annotation of the
// children it writes, pkg/dynamic/apply; the recorded hook calls,
// internal/hookrecord): each value is replaced by its digest, "sha256:" and the
// hex SHA-256 of the value's text, which names the key and tells a changed
// value from an unchanged one without holding a second copy of it.
package secretdigest

import (
	"crypto/sha256"
	"encoding/hex"
)

// Prefix starts a digest.
const Prefix = "sha256:"

// Of returns the digest of value's text.
func Of(value string) string {
	sum := sha256.Sum256([]byte(value))
	return Prefix + hex.EncodeToString(sum[:])
}

// IsDigest reports whether s is a digest as Of writes it. A Secret's data
// value is base64, which has no ':', so it cannot be mistaken for one.
func IsDigest(s string) bool {
	if len(s) != len(Prefix)+2*sha256.Size || s[:len(Prefix)] != Prefix {
		return false
	}
	_, err := hex.DecodeString(s[len(Prefix):])
	return err == nil
}

// Values returns a copy of data (a Secret's data or stringData) with each
// value replaced by its digest; a value that is already a digest is kept,
// and a value that is not a string counts as the empty string (the API
// server accepts none). data is not modified.
func Values(data map[string]any) map[string]any {
	out := make(map[string]any, len(data))
	for k, v := range data {
		s, _ := v.(string)
		if IsDigest(s) {
			out[k] = s
			continue
		}
		out[k] = Of(s)
	}
	return out
}
