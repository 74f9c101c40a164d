package shard

import (
	"fmt"
	"math/big"
	"strings"
	"testing"
)

// TestHashIsFNV1a checks Hash against FNV-1a's published test vectors: the
// API server hashes with the same function, and a mismatch would split the
// objects differently from its shardSelector.
func TestHashIsFNV1a(t *testing.T) {
	for in, want := range map[string]uint64{
		"":       0xcbf29ce484222325,
		"a":      0xaf63dc4c8601ec8c,
		"foobar": 0x85944171f73967e8,
	} {
		if got := Hash(in); got != want {
			t.Errorf("Hash(%q) = %#x, want %#x", in, got, want)
		}
	}
}

// TestOfAgreesWithRanges checks, with exact arithmetic, that a namespace's
// bucket is the range of the selector that holds its hash.
func TestOfAgreesWithRanges(t *testing.T) {
	for _, buckets := range []int{1, 2, 3, 7, 16, 100, MaxBuckets} {
		for i := range 2000 {
			ns := fmt.Sprintf("ns-%d", i)
			b := Of(ns, buckets)
			if b < 0 || int(b) >= buckets {
				t.Fatalf("Of(%q, %d) = %d: out of range", ns, buckets, b)
			}
			h := new(big.Int).SetUint64(Hash(ns))
			lo, _ := new(big.Int).SetString(start(b, buckets)[2:], 16)
			hi, _ := new(big.Int).SetString(start(b+1, buckets)[2:], 16)
			if h.Cmp(lo) < 0 || h.Cmp(hi) >= 0 {
				t.Fatalf("Of(%q, %d) = %d, but hash %#x is outside [%s, %s)", ns, buckets, b, Hash(ns), start(b, buckets), start(b+1, buckets))
			}
		}
		if got := start(Bucket(buckets), buckets); got != "0x10000000000000000" {
			t.Errorf("%d buckets end at %s, want 2^64", buckets, got)
		}
	}
}

func TestSetSelector(t *testing.T) {
	s, err := NewSet(4, 3, 0, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000') || " +
		"shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')"
	if got := s.Selector(); got != want {
		t.Errorf("Selector() = %s\nwant %s", got, want)
	}
	if got := s.String(); got != "0-1,3 of 4" {
		t.Errorf("String() = %q", got)
	}
	if All(4).Selector() != "" || (Set{}).Selector() != "" {
		t.Error("the set of all buckets and the empty set need no selector")
	}
	if _, err := NewSet(4, 4); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("NewSet(4, 4): %v, want out of range", err)
	}
	if _, err := NewSet(0); err == nil {
		t.Error("NewSet(0) accepted")
	}
}

func TestSetContains(t *testing.T) {
	one, _ := NewSet(8, Of("team-a", 8))
	if !one.Contains("team-a") {
		t.Error("a set does not contain its own namespace")
	}
	others := 0
	for i := range 100 {
		// Names that differ in more than their last characters: FNV-1a's
		// top bits hardly depend on the last two bytes (docs/scaling.md).
		if one.Contains(fmt.Sprintf("team-%x", Hash(fmt.Sprint(i)))) {
			others++
		}
	}
	if others == 0 || others > 40 {
		t.Errorf("one bucket of 8 holds %d of 100 namespaces", others)
	}
	if (Set{}).Contains("team-a") {
		t.Error("the empty set contains a namespace")
	}
}
