package memstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// maxBatch is the number of keys S3 accepts in one DeleteObjects request
// and returns in one ListObjectsV2 page.
const maxBatch = 1000

// Store is one broker's view of a Cluster; it implements
// storage.ObjectStore. Get one from Cluster.Store.
type Store struct {
	c     *Cluster
	local *bucket
}

var (
	_ storage.ObjectStore = (*Store)(nil)
	_ storage.RangeReader = (*Store)(nil)
)

// Local returns the AZ and bucket Put writes to.
func (s *Store) Local() metadata.ObjectRef {
	return metadata.ObjectRef{AZ: s.local.az, Bucket: s.local.name}
}

// Put stores a copy of body under key in the store's own bucket unless the
// key is taken.
func (s *Store) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	ref := metadata.ObjectRef{AZ: s.local.az, Bucket: s.local.name, Key: key}
	if err := ctx.Err(); err != nil {
		return metadata.ObjectRef{}, fmt.Errorf("memstore: PUT %s: %w", ref, err)
	}
	// Copy before waiting: the caller may reuse body once Put returns,
	// even if Put returns early.
	data := s.c.spare.Get(len(body))[:len(body)]
	copy(data, body)
	stored := false
	req := faults.Request{Op: faults.OpPut, StoreAZ: s.local.az, AZ: s.local.az, Bucket: s.local.name, Key: key, Length: int64(len(body)), Body: body}
	err := s.do(ctx, s.local, req, int64(len(body)), func(faults.Effect) (int64, error) {
		b := s.local
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.objects[key]; ok {
			return 0, fmt.Errorf("memstore: PUT %s: %w", ref, storage.ErrAlreadyExists)
		}
		b.objects[key] = object{data: data, modified: s.c.clock.Now()}
		stored = true
		return 0, nil
	})
	if !stored {
		s.c.spare.Put(data)
	}
	if err != nil {
		return metadata.ObjectRef{}, err
	}
	return ref, nil
}

// GetRange returns a copy of length bytes of the object ref names, starting
// at offset.
func (s *Store) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	return s.get(ctx, ref, offset, length, nil)
}

// ReadRange copies len(dst) bytes of the object ref names, starting at
// offset, into dst, as storage.RangeReader says. It writes to dst only
// while the request takes effect, never after it returns.
func (s *Store) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	if len(dst) == 0 {
		return 0, fmt.Errorf("memstore: GET %s range [%d, +0): %w", ref, offset, storage.ErrInvalidRange)
	}
	if _, err := s.get(ctx, ref, offset, int64(len(dst)), dst); err != nil {
		return 0, err
	}
	return len(dst), nil
}

// get is GetRange, reading into dst if it is not nil (then of length
// bytes) and into a new slice otherwise.
func (s *Store) get(ctx context.Context, ref metadata.ObjectRef, offset, length int64, dst []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: GET %s: %w", ref, err)
	}
	b, err := s.bucket(ref.Bucket)
	if err != nil {
		return nil, fmt.Errorf("memstore: GET %s: %w", ref, err)
	}
	// Ranges no object could satisfy are refused without a request, as an
	// HTTP client cannot even express them.
	if offset < 0 || length <= 0 || offset > (1<<63-1)-length {
		return nil, fmt.Errorf("memstore: GET %s range [%d, +%d): %w", ref, offset, length, storage.ErrInvalidRange)
	}
	op := faults.OpGetRange
	if dst != nil {
		op = faults.OpReadRange
	}
	req := faults.Request{Op: op, StoreAZ: s.local.az, AZ: b.az, Bucket: b.name, Key: ref.Key, Offset: offset, Length: length}
	var out []byte
	err = s.do(ctx, b, req, length, func(eff faults.Effect) (int64, error) {
		var err error
		out, err = b.read(ref, offset, length, dst)
		if err != nil {
			return 0, err
		}
		eff.CorruptBytes(out)
		return length, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Delete removes the objects refs name, one request per bucket and per
// 1000 keys. Every ref is checked before anything is deleted. A failed
// request does not stop the others; the errors of all are returned.
func (s *Store) Delete(ctx context.Context, refs []metadata.ObjectRef) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: DELETE of %d objects: %w", len(refs), err)
	}
	byBucket := make(map[*bucket][]metadata.ObjectRef)
	for _, ref := range refs {
		b, err := s.bucket(ref.Bucket)
		if err != nil {
			return fmt.Errorf("memstore: DELETE %s: %w", ref, err)
		}
		byBucket[b] = append(byBucket[b], ref)
	}
	var errs []error
	for _, b := range slices.SortedFunc(maps.Keys(byBucket), func(x, y *bucket) int { return strings.Compare(x.name, y.name) }) {
		for batch := range slices.Chunk(byBucket[b], maxBatch) {
			req := faults.Request{Op: faults.OpDelete, StoreAZ: s.local.az, AZ: b.az, Bucket: b.name, Refs: batch}
			err := s.do(ctx, b, req, 0, func(faults.Effect) (int64, error) {
				b.mu.Lock()
				defer b.mu.Unlock()
				for _, ref := range batch {
					if obj, ok := b.objects[ref.Key]; ok {
						delete(b.objects, ref.Key)
						// Reads copy out under b.mu, so no one holds it.
						s.c.spare.Put(obj.data)
					}
				}
				return 0, nil
			})
			if err != nil {
				errs = append(errs, err)
				if ctx.Err() != nil {
					return errors.Join(errs...)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// List returns the objects of bucket whose keys start with prefix, in a
// seeded random order. It makes one request per 1000 objects; the objects
// are those present when the first request ran.
func (s *Store) List(ctx context.Context, bucketName, prefix string) ([]storage.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: LIST %s/%s*: %w", bucketName, prefix, err)
	}
	b, err := s.bucket(bucketName)
	if err != nil {
		return nil, fmt.Errorf("memstore: LIST %s/%s*: %w", bucketName, prefix, err)
	}
	var infos []storage.ObjectInfo
	req := faults.Request{Op: faults.OpList, StoreAZ: s.local.az, AZ: b.az, Bucket: b.name, Key: prefix}
	for page := 0; page == 0 || page*maxBatch < len(infos); page++ {
		err := s.do(ctx, b, req, 0, func(faults.Effect) (int64, error) {
			if page == 0 {
				infos = b.list(prefix)
			}
			return 0, nil
		})
		if err != nil {
			return nil, err
		}
	}
	s.c.shuffle(infos)
	return infos, nil
}

// read copies length bytes of key's object from offset into dst, or into
// a new slice if dst is nil, and returns them.
func (b *bucket) read(ref metadata.ObjectRef, offset, length int64, dst []byte) ([]byte, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	obj, ok := b.objects[ref.Key]
	if !ok {
		return nil, fmt.Errorf("memstore: GET %s: %w", ref, storage.ErrNotFound)
	}
	if offset+length > int64(len(obj.data)) {
		return nil, fmt.Errorf("memstore: GET %s range [%d, +%d) of a %d-byte object: %w",
			ref, offset, length, len(obj.data), storage.ErrInvalidRange)
	}
	if dst == nil {
		dst = make([]byte, length)
	}
	copy(dst, obj.data[offset:])
	return dst, nil
}

// list returns the objects of b under prefix, in key order so that the
// seeded shuffle that follows is reproducible.
func (b *bucket) list(prefix string) []storage.ObjectInfo {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var infos []storage.ObjectInfo
	for k, obj := range b.objects {
		if strings.HasPrefix(k, prefix) {
			infos = append(infos, storage.ObjectInfo{
				Ref:          metadata.ObjectRef{AZ: b.az, Bucket: b.name, Key: k},
				Size:         int64(len(obj.data)),
				LastModified: obj.modified,
			})
		}
	}
	slices.SortFunc(infos, func(x, y storage.ObjectInfo) int { return strings.Compare(x.Ref.Key, y.Ref.Key) })
	return infos
}

func (s *Store) bucket(name string) (*bucket, error) {
	b := s.c.buckets[name]
	if b == nil {
		return nil, fmt.Errorf("bucket %q is not one of the cluster's: %w", name, storage.ErrUnknownBucket)
	}
	return b, nil
}

// do makes one request to bucket b: it counts it, waits out its latency
// (cut short by ctx or by the bucket going down) and the delay the
// injected faults add, fails it as they say, and runs apply, which
// performs the request and returns the bytes it sends back.
func (s *Store) do(ctx context.Context, b *bucket, req faults.Request, size int64, apply func(faults.Effect) (int64, error)) error {
	cross := b.az != s.local.az
	st := &b.stats
	switch req.Op {
	case faults.OpPut:
		st.puts.Add(1)
		st.bytesUp.Add(req.Length)
	case faults.OpGetRange, faults.OpReadRange:
		st.gets.Add(1)
	case faults.OpDelete:
		st.deletes.Add(1)
		st.deleteKeys.Add(int64(len(req.Refs)))
	case faults.OpList:
		st.lists.Add(1)
	}
	if cross {
		st.crossRequests.Add(1)
		if req.Op == faults.OpPut {
			st.crossBytes.Add(req.Length)
		}
	}
	fail := func(err error) error {
		st.failed.Add(1)
		return err
	}

	a, err := s.c.admit(ctx, b, req, size)
	if err != nil {
		return fail(fmt.Errorf("memstore: %s: %w", describe(req), err))
	}
	if a.latency > 0 {
		select {
		case <-s.c.clock.After(a.latency):
		case <-ctx.Done():
			return fail(fmt.Errorf("memstore: %s: %w", describe(req), ctx.Err()))
		case <-a.outage:
			return fail(fmt.Errorf("memstore: %s: bucket %s of AZ %s went down: %w", describe(req), b.name, b.az, storage.ErrUnavailable))
		}
	}
	if err := a.effect.Before(req); err != nil {
		return fail(fmt.Errorf("memstore: %w", err))
	}
	down, err := apply(a.effect)
	if err != nil {
		return fail(err)
	}
	st.bytesDown.Add(down)
	if cross {
		st.crossBytes.Add(down)
	}
	if err := a.effect.After(req); err != nil {
		return fail(fmt.Errorf("memstore: %w", err))
	}
	return nil
}

// describe names a request in errors: S3's verb, bucket, key or prefix,
// range.
func describe(r faults.Request) string {
	switch r.Op {
	case faults.OpGetRange, faults.OpReadRange:
		return fmt.Sprintf("GET %s/%s range [%d, +%d)", r.Bucket, r.Key, r.Offset, r.Length)
	case faults.OpDelete:
		return fmt.Sprintf("DELETE %d keys in %s (first %q)", len(r.Refs), r.Bucket, r.Refs[0].Key)
	case faults.OpList:
		return fmt.Sprintf("LIST %s/%s*", r.Bucket, r.Key)
	}
	return fmt.Sprintf("PUT %s/%s", r.Bucket, r.Key)
}
