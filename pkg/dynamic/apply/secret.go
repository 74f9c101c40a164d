package apply

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
)

// isSecret reports whether obj is a core Secret.
func isSecret(obj map[string]any) bool {
	return obj["apiVersion"] == "v1" && obj["kind"] == "Secret"
}

// normalizeSecret turns a Secret's write-only stringData into data, as the
// API server does, so that what is desired compares with what is observed
// (the server never returns stringData). Other objects are returned as
// they are. want's top level is modified; nothing below it is.
func normalizeSecret(want map[string]any) map[string]any {
	if !isSecret(want) {
		return want
	}
	stringData, ok := want["stringData"].(map[string]any)
	if !ok {
		return want
	}
	existing, _ := want["data"].(map[string]any)
	data := make(map[string]any, len(existing)+len(stringData))
	for k, v := range existing {
		data[k] = v
	}
	for k, v := range stringData {
		if s, ok := v.(string); ok {
			data[k] = base64.StdEncoding.EncodeToString([]byte(s))
		}
	}
	want["data"] = data
	delete(want, "stringData")
	return want
}

// recorded returns want with, for a Secret, each data value replaced by
// its digest ("sha256:" and the hex SHA-256 of the value's text), so the
// annotation holds no second copy of the secret while still naming every
// key (which is all the merge needs of it). A value that is already a
// digest is kept: a data value is base64, which has no ':', so it cannot be
// mistaken for one. Other objects are returned as they are. want is not
// modified.
func recorded(want map[string]any) map[string]any {
	if !isSecret(want) {
		return want
	}
	data, ok := want["data"].(map[string]any)
	if !ok {
		return want
	}
	out := make(map[string]any, len(want))
	for k, v := range want {
		out[k] = v
	}
	hashed := make(map[string]any, len(data))
	for k, v := range data {
		s, _ := v.(string)
		if isDigest(s) {
			hashed[k] = s
			continue
		}
		sum := sha256.Sum256([]byte(s))
		hashed[k] = digestPrefix + hex.EncodeToString(sum[:])
	}
	out["data"] = hashed
	return out
}

// digestPrefix starts the digest that stands for a Secret's data value.
const digestPrefix = "sha256:"

// isDigest reports whether s is a digest as recorded writes it.
func isDigest(s string) bool {
	if len(s) != len(digestPrefix)+2*sha256.Size || s[:len(digestPrefix)] != digestPrefix {
		return false
	}
	_, err := hex.DecodeString(s[len(digestPrefix):])
	return err == nil
}
