package lru

import (
	"container/list"
	"iter"
)

// Options bound a Cache. A bound of 0 or less is none.
type Options[K comparable, V any] struct {
	// MaxEntries bounds the number of entries.
	MaxEntries int
	// MaxBytes bounds the sum of the entries' sizes.
	MaxBytes int64
	// OnEvict, when set, is called with each entry Put evicts to make
	// room, least recently used first, before Put returns.
	OnEvict func(key K, value V)
}

// Cache is a map bounded in entries and bytes, evicting the least recently
// used first. Its zero value is not usable: use New. It is not safe for
// concurrent use.
type Cache[K comparable, V any] struct {
	opts    Options[K, V]
	entries map[K]*list.Element // of *entry[K, V]
	order   list.List           // least recently used first
	bytes   int64
}

type entry[K comparable, V any] struct {
	key   K
	value V
	size  int64
}

// New returns an empty Cache bounded by opts.
func New[K comparable, V any](opts Options[K, V]) *Cache[K, V] {
	return &Cache[K, V]{opts: opts, entries: map[K]*list.Element{}}
}

// Get returns the value of key and marks it used now.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	el, ok := c.entries[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToBack(el)
	return el.Value.(*entry[K, V]).value, true
}

// Peek returns the value of key, leaving its place in the order alone.
func (c *Cache[K, V]) Peek(key K) (V, bool) {
	el, ok := c.entries[key]
	if !ok {
		var zero V
		return zero, false
	}
	return el.Value.(*entry[K, V]).value, true
}

// Put keeps value under key, counted as size bytes and used now, in place
// of the entry key had. It first evicts the least recently used entries,
// calling OnEvict, until the new one fits within the bounds. An entry of
// more than MaxBytes on its own is not kept (the old one is removed all
// the same): Put then reports false.
func (c *Cache[K, V]) Put(key K, value V, size int64) bool {
	c.Remove(key)
	if c.opts.MaxBytes > 0 && size > c.opts.MaxBytes {
		return false
	}
	for c.order.Len() > 0 && ((c.opts.MaxEntries > 0 && c.order.Len() >= c.opts.MaxEntries) ||
		(c.opts.MaxBytes > 0 && c.bytes+size > c.opts.MaxBytes)) {
		e := c.remove(c.order.Front())
		if c.opts.OnEvict != nil {
			c.opts.OnEvict(e.key, e.value)
		}
	}
	c.entries[key] = c.order.PushBack(&entry[K, V]{key: key, value: value, size: size})
	c.bytes += size
	return true
}

// Remove drops the entry of key, without calling OnEvict, and returns its
// value.
func (c *Cache[K, V]) Remove(key K) (V, bool) {
	el, ok := c.entries[key]
	if !ok {
		var zero V
		return zero, false
	}
	return c.remove(el).value, true
}

func (c *Cache[K, V]) remove(el *list.Element) *entry[K, V] {
	e := c.order.Remove(el).(*entry[K, V])
	delete(c.entries, e.key)
	c.bytes -= e.size
	return e
}

// Oldest returns the least recently used entry.
func (c *Cache[K, V]) Oldest() (key K, value V, ok bool) {
	el := c.order.Front()
	if el == nil {
		return key, value, false
	}
	e := el.Value.(*entry[K, V])
	return e.key, e.value, true
}

// All yields the entries, least recently used first. The loop may Remove
// the entry it is given; it must not Put or Get.
func (c *Cache[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for el := c.order.Front(); el != nil; {
			next := el.Next()
			e := el.Value.(*entry[K, V])
			if !yield(e.key, e.value) {
				return
			}
			el = next
		}
	}
}

// Len returns the number of entries.
func (c *Cache[K, V]) Len() int { return c.order.Len() }

// Bytes returns the sum of the entries' sizes.
func (c *Cache[K, V]) Bytes() int64 { return c.bytes }
