// Package lru is the one bounded cache of metactl: a map whose entries are
// kept in the order they were last put or looked up (Get), and evicted
// least recently used first when the cache holds more than its number of
// entries or its bytes, each entry counting the size its user gives it.
//
// It serves the hook client's ETag cache (pkg/hooks/hookclient) and the
// recorded hook calls (internal/hookrecord). Those put their own rules on
// top (expiry, a bound per controller) and hold their own lock around
// several of its calls, so a Cache is not safe for concurrent use: its
// user serializes every call. (internal/history's record of syncs evicts
// in another order, by outcome; its Store says why it keeps its own.)
//
// Guarantees: after Put returns, the cache holds at most its MaxEntries
// entries and MaxBytes bytes (when set, each > 0); an entry larger than
// MaxBytes on its own is not kept. Eviction takes the least recently used
// entries first, and OnEvict is called for each entry evicted to make room,
// never for an entry replaced (Put of its key) or removed (Remove). Peek,
// Len, Bytes and Oldest change no order.
//
// k8s.io/utils/lru (a wrapper of groupcache's) bounds the number of
// entries only, not their bytes, and locks every call; hence this package.
package lru
