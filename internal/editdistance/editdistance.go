// Package editdistance measures how far apart two words are, for the
// "did you mean …?" suggestions of hook answers' keys and resource names.
package editdistance

// Between returns the optimal string alignment distance of a and b: the
// fewest insertions, deletions, substitutions and transpositions of
// neighbouring bytes that turn a into b.
func Between(a, b string) int {
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
