package replay

import (
	"crypto/sha256"
	"encoding/hex"
)

// digestPrefix starts the digest that stands for a Secret's value in a
// recorded set.
const digestPrefix = "sha256:"

// DigestSecrets returns v (decoded JSON) with the value of every key of
// every Secret's data and stringData, wherever the Secret sits, replaced
// by its digest: "sha256:" and the hex SHA-256 of the value's text, as a
// recorded set holds them. A value that is already a digest is kept. v is
// not modified.
func DigestSecrets(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		secret := t["kind"] == "Secret" && t["apiVersion"] == "v1"
		for k, val := range t {
			if data, ok := val.(map[string]any); ok && secret && (k == "data" || k == "stringData") {
				out[k] = digestValues(data)
				continue
			}
			out[k] = DigestSecrets(val)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = DigestSecrets(val)
		}
		return out
	}
	return v
}

func digestValues(data map[string]any) map[string]any {
	out := make(map[string]any, len(data))
	for k, v := range data {
		s, ok := v.(string)
		if !ok || isDigest(s) {
			out[k] = v
			continue
		}
		sum := sha256.Sum256([]byte(s))
		out[k] = digestPrefix + hex.EncodeToString(sum[:])
	}
	return out
}

// isDigest reports whether s is a digest as DigestSecrets writes it.
func isDigest(s string) bool {
	if len(s) != len(digestPrefix)+2*sha256.Size || s[:len(digestPrefix)] != digestPrefix {
		return false
	}
	_, err := hex.DecodeString(s[len(digestPrefix):])
	return err == nil
}
