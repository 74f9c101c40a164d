package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		s     string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven long", 10, "eleven ..."},
		{"ééééé", 8, "éé..."}, // 2 bytes each: cut at a rune boundary
		{"abcdef", 3, "..."},
		{"abcdef", 2, ".."},
		{"abcdef", 0, ""},
	} {
		if got := Cut(tc.s, tc.limit); got != tc.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.s, tc.limit, got, tc.want)
		}
	}
	long := strings.Repeat("é", 1000)
	for limit := 990; limit < 1000; limit++ {
		if got := Cut(long, limit); len(got) > limit || !utf8.ValidString(got) || !strings.HasSuffix(got, Marker) {
			t.Errorf("Cut(long, %d) = %d bytes, valid %v", limit, len(got), utf8.ValidString(got))
		}
	}
}
