/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"strconv"
	"strings"
)

// UnknownField is a top-level key of a hook's answer that the protocol
// does not define.
type UnknownField struct {
	// Key is the key as the hook wrote it.
	Key string
	// Suggestion is the protocol's key that Key most likely misspells, or
	// "" when none is close.
	Suggestion string
}

// String quotes the key and, when there is one, the suggestion:
// `"childern" (did you mean "children"?)`.
func (f UnknownField) String() string {
	s := strconv.Quote(f.Key)
	if f.Suggestion != "" {
		s += " (did you mean " + strconv.Quote(f.Suggestion) + "?)"
	}
	return s
}

// Suggest returns the word of known that key most likely misspells, or ""
// when none is close: the same word in another case, one that starts with
// the other (of at least five letters: "resyncAfter" for
// "resyncAfterSeconds"), or one at most two edits away (one for words of
// four letters or fewer), an edit being an inserted, removed or changed
// letter or two neighbouring letters swapped ("childern"). Of several, the
// fewest edits win, then the first in known.
func Suggest(key string, known []string) string {
	best, bestDist := "", -1
	lower := strings.ToLower(key)
	for _, word := range known {
		w := strings.ToLower(word)
		if w == lower {
			return word
		}
		dist := editDistance(lower, w)
		limit := 2
		if min(len(lower), len(w)) <= 4 {
			limit = 1
		}
		shorter, longer := lower, w
		if len(shorter) > len(longer) {
			shorter, longer = longer, shorter
		}
		if dist > limit && (len(shorter) < 5 || !strings.HasPrefix(longer, shorter)) {
			continue
		}
		if bestDist < 0 || dist < bestDist {
			best, bestDist = word, dist
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b: the
// fewest insertions, deletions, substitutions and transpositions of
// neighbouring bytes that turn a into b.
func editDistance(a, b string) int {
	// Three rows of the dynamic-programming table: two back, one back, this.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
