package editdistance

import "testing"

func TestBetween(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"pods", "pods", 0}, {"", "pods", 4}, {"pods", "", 4},
		{"deploymnets", "deployments", 1}, {"pdos", "pods", 1}, {"pod", "pods", 1},
		{"secrts", "secrets", 1}, {"kitten", "sitting", 3}, {"ca", "abc", 3},
		{"childern", "children", 1},
	} {
		if got := Between(tc.a, tc.b); got != tc.want {
			t.Errorf("Between(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
