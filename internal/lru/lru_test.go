package lru

import (
	"slices"
	"testing"
)

// keys returns the keys of c, least recently used first.
func keys(c *Cache[string, int]) []string {
	var out []string
	for k := range c.All() {
		out = append(out, k)
	}
	return out
}

func TestEvictsByCountLeastRecentlyUsedFirst(t *testing.T) {
	var evicted []string
	c := New(Options[string, int]{MaxEntries: 3, OnEvict: func(k string, _ int) { evicted = append(evicted, k) }})
	for i, k := range []string{"a", "b", "c"} {
		c.Put(k, i, 1)
	}
	if _, ok := c.Get("a"); !ok { // a is now the most recently used
		t.Fatal("a is missing")
	}
	c.Put("d", 3, 1)
	if got, want := keys(c), []string{"c", "a", "d"}; !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	if !slices.Equal(evicted, []string{"b"}) {
		t.Errorf("evicted %v, want [b]", evicted)
	}
}

func TestEvictsByBytes(t *testing.T) {
	var evicted []string
	c := New(Options[string, int]{MaxBytes: 10, OnEvict: func(k string, _ int) { evicted = append(evicted, k) }})
	c.Put("a", 0, 4)
	c.Put("b", 0, 4)
	c.Put("c", 0, 2)
	if c.Bytes() != 10 || c.Len() != 3 {
		t.Fatalf("%d entries, %d bytes; want 3, 10", c.Len(), c.Bytes())
	}
	c.Put("d", 0, 5) // a and b must go: 2+5 fits, 4+2+5 does not
	if got, want := keys(c), []string{"c", "d"}; !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	if !slices.Equal(evicted, []string{"a", "b"}) {
		t.Errorf("evicted %v, want [a b]", evicted)
	}
	if c.Bytes() != 7 {
		t.Errorf("%d bytes, want 7", c.Bytes())
	}
}

func TestTooLargeIsNotKept(t *testing.T) {
	evictions := 0
	c := New(Options[string, int]{MaxBytes: 10, OnEvict: func(string, int) { evictions++ }})
	c.Put("a", 1, 3)
	c.Put("b", 2, 3)
	if c.Put("b", 3, 11) {
		t.Error("Put kept an entry larger than MaxBytes")
	}
	if _, ok := c.Peek("b"); ok {
		t.Error("the old entry of a key put too large is still there")
	}
	if got := keys(c); !slices.Equal(got, []string{"a"}) || c.Bytes() != 3 || evictions != 0 {
		t.Errorf("keys %v, %d bytes, %d evictions; want [a], 3, 0", got, c.Bytes(), evictions)
	}
}

func TestPutReplacesAKey(t *testing.T) {
	evictions := 0
	c := New(Options[string, int]{MaxEntries: 2, MaxBytes: 10, OnEvict: func(string, int) { evictions++ }})
	c.Put("a", 1, 4)
	c.Put("b", 2, 4)
	c.Put("a", 3, 6) // replaces a, which counts 6 now and is the most recent
	if v, _ := c.Peek("a"); v != 3 {
		t.Errorf("a = %d, want 3", v)
	}
	if got := keys(c); !slices.Equal(got, []string{"b", "a"}) || c.Bytes() != 10 || evictions != 0 {
		t.Errorf("keys %v, %d bytes, %d evictions; want [b a], 10, 0", got, c.Bytes(), evictions)
	}
}

func TestPeekRemoveAndOldestKeepTheOrder(t *testing.T) {
	c := New(Options[string, int]{})
	c.Put("a", 1, 1)
	c.Put("b", 2, 1)
	c.Put("c", 3, 1)
	if v, ok := c.Peek("a"); !ok || v != 1 {
		t.Errorf("Peek(a) = %d, %v", v, ok)
	}
	if k, v, ok := c.Oldest(); k != "a" || v != 1 || !ok {
		t.Errorf("Oldest = %s %d %v, want a 1 true: Peek moved a", k, v, ok)
	}
	if v, ok := c.Remove("b"); !ok || v != 2 {
		t.Errorf("Remove(b) = %d, %v", v, ok)
	}
	if _, ok := c.Remove("b"); ok {
		t.Error("b removed twice")
	}
	for k := range c.All() {
		c.Remove(k) // removing while iterating
	}
	if c.Len() != 0 || c.Bytes() != 0 {
		t.Errorf("%d entries, %d bytes left", c.Len(), c.Bytes())
	}
	if _, _, ok := c.Oldest(); ok {
		t.Error("an empty cache has an oldest entry")
	}
}
