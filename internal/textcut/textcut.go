// Package textcut cuts text to a number of bytes: error texts and messages
// that metactl quotes in conditions, Events and records.
package textcut

import "unicode/utf8"

// Marker ends a text that was cut.
const Marker = "..."

// Cut returns s when it has at most limit bytes; else s cut at a rune
// boundary and ended with Marker, at most limit bytes in all, the marker
// included (only the marker, cut, when limit leaves room for nothing
// else).
func Cut(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	if limit <= len(Marker) {
		return Marker[:max(limit, 0)]
	}
	n := limit - len(Marker)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + Marker
}
