/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"strconv"
	"strings"

	"github.com/metactl/metactl/internal/editdistance"
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
		dist := editdistance.Between(lower, w)
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
