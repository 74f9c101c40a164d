/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/metactl/metactl/internal/lru"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// Limits of the response cache of hooks with etag enabled, per Client.
// DefaultEtagCacheMaxBytes fits the shipped Deployment's 256 MiB memory
// limit beside DefaultResponseBudgetBytes (see docs/security.md).
const (
	DefaultEtagCacheMaxEntries       = 10000
	DefaultEtagCacheMaxBytes   int64 = 32 << 20
	// maxETagLength is the longest ETag header kept; a longer one is not
	// cached.
	maxETagLength = 1024
)

// etagSettings are the etag settings of a webhook, defaulted as
// v1alpha1.SetDefaults_Hook does. A timeout of 0 keeps entries until the
// cache's limits push them out, and a cleanup of 0 asks for no sweep, as
// metacontroller reads values below 1 s.
type etagSettings struct {
	timeout, cleanup time.Duration
}

// etagConfig returns the etag settings of w and whether caching is on.
func etagConfig(w *v1alpha1.Webhook) (etagSettings, bool) {
	e := w.Etag
	if e == nil || e.Enabled == nil || !*e.Enabled {
		return etagSettings{}, false
	}
	s := etagSettings{
		timeout: time.Duration(v1alpha1.DefaultEtagCacheTimeout) * time.Second,
		cleanup: time.Duration(v1alpha1.DefaultEtagCacheCleanup) * time.Second,
	}
	if v := e.CacheTimeoutSeconds; v != nil {
		s.timeout = time.Duration(max(*v, 0)) * time.Second
	}
	if v := e.CacheCleanupSeconds; v != nil {
		s.cleanup = time.Duration(max(*v, 0)) * time.Second
	}
	return s, true
}

// etagKey identifies a cached response: the hook's URL and the hash of the
// request body. Equal requests have equal bodies (map keys are sorted).
type etagKey struct {
	url string
	sum [sha256.Size]byte
}

func newEtagKey(url string, body []byte) etagKey {
	return etagKey{url: url, sum: sha256.Sum256(body)}
}

// etagEntry is a cached response. Its fields do not change once cached.
type etagEntry struct {
	etag    string
	body    []byte
	expires time.Time // zero: never
}

// expired reports whether e has expired at now.
func (e *etagEntry) expired(now time.Time) bool {
	return !e.expires.IsZero() && !now.Before(e.expires)
}

// etagCache keeps the last response, with its ETag, of each request to a
// hook with etag enabled. Entries expire after their hook's
// cacheTimeoutSeconds (never when it is below 1), counted from the 200
// response that brought them; expired entries are dropped when looked up,
// and all of them at most once per cacheCleanupSeconds of the hooks using
// the cache (hooks whose cacheCleanupSeconds is below 1 ask for no sweep).
// The number of entries and their total size are capped (an lru.Cache),
// the least recently used going first. It is safe for concurrent use.
type etagCache struct {
	mu        sync.Mutex
	entries   *lru.Cache[etagKey, *etagEntry]
	nextSweep time.Time
}

func newEtagCache(maxEntries int, maxBytes int64) *etagCache {
	if maxEntries <= 0 {
		maxEntries = DefaultEtagCacheMaxEntries
	}
	if maxBytes <= 0 {
		maxBytes = DefaultEtagCacheMaxBytes
	}
	return &etagCache{entries: lru.New(lru.Options[etagKey, *etagEntry]{MaxEntries: maxEntries, MaxBytes: maxBytes})}
}

// get returns the live entry of key.
func (c *etagCache) get(key etagKey, s etagSettings, now time.Time) (*etagEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maybeSweepLocked(s, now)
	e, ok := c.entries.Get(key)
	if !ok {
		return nil, false
	}
	if e.expired(now) {
		c.entries.Remove(key)
		return nil, false
	}
	return e, true
}

// put caches body with etag for key, replacing any entry, unless it is too
// large to fit. body must not be modified afterwards.
func (c *etagCache) put(key etagKey, etag string, body []byte, s etagSettings, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maybeSweepLocked(s, now)
	if etag == "" || len(etag) > maxETagLength {
		c.entries.Remove(key)
		return
	}
	e := &etagEntry{etag: etag, body: body}
	if s.timeout > 0 {
		e.expires = now.Add(s.timeout)
	}
	c.entries.Put(key, e, entrySize(key, etag, body))
}

// remove drops the entry of key.
func (c *etagCache) remove(key etagKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries.Remove(key)
}

// maybeSweepLocked drops every expired entry when a sweep is due. The next
// sweep is due after the shortest cleanup interval of the hooks seen since
// the last one; a hook without a cleanup interval asks for none.
func (c *etagCache) maybeSweepLocked(s etagSettings, now time.Time) {
	if c.nextSweep.IsZero() || now.Before(c.nextSweep) {
		if s.cleanup <= 0 {
			return
		}
		if next := now.Add(s.cleanup); c.nextSweep.IsZero() || next.Before(c.nextSweep) {
			c.nextSweep = next
		}
		return
	}
	c.nextSweep = time.Time{}
	if s.cleanup > 0 {
		c.nextSweep = now.Add(s.cleanup)
	}
	for key, e := range c.entries.All() {
		if e.expired(now) {
			c.entries.Remove(key)
		}
	}
}

// len returns the number of entries and their size, for tests.
func (c *etagCache) len() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries.Len(), c.entries.Bytes()
}

// entrySize is what an entry counts against the byte limit: its body, ETag
// and URL, plus a fixed overhead.
func entrySize(key etagKey, etag string, body []byte) int64 {
	return int64(len(body)+len(etag)+len(key.url)) + 128
}
