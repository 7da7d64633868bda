package directread

import (
	"container/list"
	"sync"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Cache holds verified sections for the Readers of one process, bounded
// in bytes, least recently used first out, so that Readers whose
// partitions overlap fetch each range once: a Reader that wants a
// section another is fetching waits for it instead of asking the store
// again. It is safe for concurrent use. Batches it hands out share their
// Data and must not be modified.
type Cache struct {
	mu       sync.Mutex
	maxBytes int64
	bytes    int64
	lru      *list.List // of *cached, most recent first
	items    map[sectionKey]*list.Element
	inflight map[sectionKey]chan struct{}
	hits     uint64
}

// sectionKey identifies a section's bytes: its object, range and checksum.
type sectionKey struct {
	obj      metadata.ObjectRef
	pos, len int64
	sum      uint64
}

func sectionOf(e *metadata.Entry) sectionKey {
	return sectionKey{obj: e.Object, pos: e.Position, len: e.Length, sum: e.Checksum}
}

type cached struct {
	key     sectionKey
	batches []storage.Batch
	bytes   int64
}

// NewCache returns a cache of at most maxBytes of batch data. A section
// larger than that is not kept. maxBytes <= 0 caches nothing, and still
// lets concurrent Readers share a fetch in flight.
func NewCache(maxBytes int64) *Cache {
	return &Cache{maxBytes: maxBytes, lru: list.New(), items: make(map[sectionKey]*list.Element), inflight: make(map[sectionKey]chan struct{})}
}

// Hits returns how many sections the cache served without a fetch.
func (c *Cache) Hits() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits
}

// claim looks k up: the batches if cached; else, if another Reader is
// fetching it, a channel closed when it is done; else nil and nil, and k
// is the caller's to fetch and then release.
func (c *Cache) claim(k sectionKey) ([]storage.Batch, <-chan struct{}, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.lru.MoveToFront(el)
		c.hits++
		return el.Value.(*cached).batches, nil, true
	}
	if ch, ok := c.inflight[k]; ok {
		return nil, ch, false
	}
	c.inflight[k] = make(chan struct{})
	return nil, nil, false
}

// release ends the caller's fetch of k, keeping its batches if it
// succeeded (batches not nil), and wakes those waiting for it.
func (c *Cache) release(k sectionKey, batches []storage.Batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.inflight[k]; ok {
		close(ch)
		delete(c.inflight, k)
	}
	if batches == nil {
		return
	}
	var n int64
	for _, b := range batches {
		n += int64(len(b.Data))
	}
	if _, ok := c.items[k]; ok || n > c.maxBytes {
		return
	}
	c.items[k] = c.lru.PushFront(&cached{key: k, batches: batches, bytes: n})
	c.bytes += n
	for c.bytes > c.maxBytes {
		old := c.lru.Remove(c.lru.Back()).(*cached)
		delete(c.items, old.key)
		c.bytes -= old.bytes
	}
}
