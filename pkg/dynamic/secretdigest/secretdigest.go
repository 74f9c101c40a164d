// Package secretdigest is the one rule by which metactl keeps the data of a
// Secret out of what it records (the last-applied annotation of the
// children it writes, pkg/dynamic/apply; the recorded hook calls,
// internal/hookrecord): each value is replaced by its digest, which names the
// key and tells a changed value from an unchanged one without holding a
// second copy of it. The last-applied annotation's digest (Of) is
// "sha256:" and the hex SHA-256 of the value's text, the same in every
// process, as comparing it with the next desired state needs. A
// recording's (Salted) is "hmac-sha256:" and the hex HMAC-SHA256 of the
// text keyed by a random key drawn once per process and never written
// anywhere: it tells a changed value within one process, and cannot be
// compared with another process's digests, nor checked against a guessed
// value (a short password), by whoever reads the recording.
package secretdigest

import (
	"crypto/hmac"
	"crypto/rand"
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

// SaltedPrefix starts a salted digest (Salted).
const SaltedPrefix = "hmac-sha256:"

// processKey keys Salted: 32 random bytes, drawn once per process.
var processKey = func() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand: it crashes the program instead)
	return key
}()

// Salted returns the salted digest of value's text: SaltedPrefix and the
// hex HMAC-SHA256 of it keyed by this process's random key. Equal values
// have equal salted digests within one process only.
func Salted(value string) string {
	mac := hmac.New(sha256.New, processKey)
	mac.Write([]byte(value))
	return SaltedPrefix + hex.EncodeToString(mac.Sum(nil))
}

// IsSalted reports whether s is a salted digest as Salted writes it (of
// this process or another).
func IsSalted(s string) bool {
	if len(s) != len(SaltedPrefix)+2*sha256.Size || s[:len(SaltedPrefix)] != SaltedPrefix {
		return false
	}
	_, err := hex.DecodeString(s[len(SaltedPrefix):])
	return err == nil
}

// SaltedValues is Values with salted digests (Salted): a value that is a
// digest already, salted or not, is kept.
func SaltedValues(data map[string]any) map[string]any {
	out := make(map[string]any, len(data))
	for k, v := range data {
		s, _ := v.(string)
		if IsDigest(s) || IsSalted(s) {
			out[k] = s
			continue
		}
		out[k] = Salted(s)
	}
	return out
}
