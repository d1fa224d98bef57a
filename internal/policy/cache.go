package policy

import (
	"container/list"
	"sync"
)

// compiledBytesPerSourceByte estimates what a compiled query retains per
// byte of Rego source: measured, a 64 KiB module retained 9 MiB once
// compiled (~145x) and a 1.5 MiB one 266 MiB (~170x). The cache is bounded by
// this estimate, because its count bound alone let 256 large modules hold
// gigabytes.
const compiledBytesPerSourceByte = 160

// queryCache is an LRU of compiled queries bounded both by count and by the
// estimated bytes the entries retain. An entry estimated above the byte
// bound is not kept at all: it is compiled for its caller and dropped.
type queryCache struct {
	mu       sync.Mutex
	maxCount int
	maxBytes int64
	bytes    int64
	order    *list.List // front: most recently used
	entries  map[string]*list.Element
}

type cacheEntry struct {
	key   string
	value any
	cost  int64
}

func newQueryCache(maxCount int, maxBytes int64) *queryCache {
	return &queryCache{maxCount: maxCount, maxBytes: maxBytes, order: list.New(), entries: map[string]*list.Element{}}
}

// Get returns the entry for key and marks it most recently used.
func (c *queryCache) Get(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).value, true
}

// Add keeps value under key at cost estimated bytes, evicting the least
// recently used entries until both bounds hold.
func (c *queryCache) Add(key string, value any, cost int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.remove(el)
	}
	if cost > c.maxBytes {
		return
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, value: value, cost: cost})
	c.bytes += cost
	for c.order.Len() > c.maxCount || c.bytes > c.maxBytes {
		c.remove(c.order.Back())
	}
}

func (c *queryCache) remove(el *list.Element) {
	e := c.order.Remove(el).(*cacheEntry)
	delete(c.entries, e.key)
	c.bytes -= e.cost
}

// Len is how many entries are kept.
func (c *queryCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Bytes is the estimated bytes the kept entries retain.
func (c *queryCache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// estimatedCost is what a query compiled from modules is estimated to retain.
func estimatedCost(query string, modules map[string]string) int64 {
	n := len(query)
	for name, src := range modules {
		n += len(name) + len(src)
	}
	return int64(n) * compiledBytesPerSourceByte
}
