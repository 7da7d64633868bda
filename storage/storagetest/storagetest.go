package storagetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Harness builds the stores one subtest runs against.
type Harness interface {
	// MakeStores returns two brokers' views of one deployment: local and
	// peer, whose Local() name different AZs and different buckets, each
	// configured with both buckets. It is called once per subtest, with
	// that subtest's t: it fails t if the stores cannot be made and
	// registers any cleanup with t.Cleanup. The suite's own cleanup
	// (deleting what it wrote) runs before the harness's.
	MakeStores(ctx context.Context, t *testing.T) (local, peer storage.ObjectStore)
}

// HarnessFunc adapts a function to the Harness interface.
type HarnessFunc func(ctx context.Context, t *testing.T) (local, peer storage.ObjectStore)

// MakeStores calls f.
func (f HarnessFunc) MakeStores(ctx context.Context, t *testing.T) (local, peer storage.ObjectStore) {
	return f(ctx, t)
}

// DefaultManyKeys is the number of objects the batch-delete and paginated
// list cases write: more than the 1000 keys S3 allows per DeleteObjects
// request and per ListObjectsV2 page, so both must be batched.
const DefaultManyKeys = 1100

// Option adjusts how Run exercises a backend.
type Option func(*config)

type config struct {
	manyKeys int
}

// ManyKeys sets the number of objects the batch-delete and paginated list
// cases write (default DefaultManyKeys). A backend that is slow to write
// may shrink it, giving up the check that batching and pagination work;
// 0 skips those cases.
func ManyKeys(n int) Option {
	return func(c *config) { c.manyKeys = n }
}

// Run runs the conformance suite against the stores h makes, one subtest
// per behaviour of the storage.ObjectStore contract, and of
// storage.RangeReader when the stores implement it (the ReadRange
// subtests skip otherwise).
func Run(t *testing.T, h Harness, opts ...Option) {
	t.Helper()
	cfg := config{manyKeys: DefaultManyKeys}
	for _, o := range opts {
		o(&cfg)
	}
	require.GreaterOrEqual(t, cfg.manyKeys, 0, "storagetest: ManyKeys must not be negative")
	runPrefix := newRunPrefix(t)
	t.Logf("storagetest: this run writes keys under %q", runPrefix)

	cases := []struct {
		name string
		fn   func(t *testing.T, e *env)
	}{
		{"Local", testLocal},
		{"PutReturnsRef", testPutReturnsRef},
		{"GetRange", testGetRange},
		{"GetRangeInvalid", testGetRangeInvalid},
		{"GetRangeNotFound", testGetRangeNotFound},
		{"UnknownBucket", testUnknownBucket},
		{"PutExistingKey", testPutExistingKey},
		{"PutIfAbsentRace", testPutIfAbsentRace},
		{"PutDoesNotRetainBody", testPutDoesNotRetainBody},
		{"GetRangeResultNotAliased", testGetRangeResultNotAliased},
		{"GetRangeResultsIndependent", testGetRangeResultsIndependent},
		{"EmptyObject", testEmptyObject},
		{"CrossAZ", testCrossAZ},
		{"Delete", testDelete},
		{"DeleteMany", testDeleteMany},
		{"List", testList},
		{"ListMany", testListMany},
		{"ContextCanceled", testContextCanceled},
		{"SpecialKeys", testSpecialKeys},
		{"ConcurrentPutGet", testConcurrentPutGet},
		{"ReadRange", testReadRange},
		{"ReadRangeInvalid", testReadRangeInvalid},
		{"ReadRangeNotFound", testReadRangeNotFound},
		{"ReadRangeUnknownBucket", testReadRangeUnknownBucket},
		{"ReadRangeContextCanceled", testReadRangeContextCanceled},
		{"ReadRangeNotRetained", testReadRangeNotRetained},
		{"ReadRangeAbandoned", testReadRangeAbandoned},
		{"ReadRangeConcurrent", testReadRangeConcurrent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.fn(t, newEnv(t, h, cfg, runPrefix+c.name+"/"))
		})
	}
}

// newRunPrefix names this run's keys. The random part only has to make
// runs sharing a persistent bucket disjoint; no behaviour depends on it.
func newRunPrefix(t testing.TB) string {
	var b [6]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return fmt.Sprintf("storagetest/%s-%s/", time.Now().UTC().Format("20060102T150405"), hex.EncodeToString(b[:]))
}

// env is one subtest's world: its stores, its key prefix, and the objects
// it wrote, deleted when the subtest ends.
type env struct {
	ctx         context.Context
	local, peer storage.ObjectStore
	prefix      string
	cfg         config

	mu      sync.Mutex
	written []metadata.ObjectRef
}

func newEnv(t *testing.T, h Harness, cfg config, prefix string) *env {
	e := &env{ctx: t.Context(), cfg: cfg, prefix: prefix}
	e.local, e.peer = h.MakeStores(e.ctx, t)
	require.NotNil(t, e.local, "harness returned a nil local store")
	require.NotNil(t, e.peer, "harness returned a nil peer store")
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		e.mu.Lock()
		refs := e.written
		e.mu.Unlock()
		for len(refs) > 0 {
			n := min(len(refs), 500)
			assert.NoError(t, e.local.Delete(ctx, refs[:n]), "cleanup: deleting the subtest's objects")
			refs = refs[n:]
		}
	})
	return e
}

// key returns a key unique to this run and subtest.
func (e *env) key(name string) string { return e.prefix + name }

// ref names key in s's own bucket, as Put would return it.
func ref(s storage.ObjectStore, key string) metadata.ObjectRef {
	r := s.Local()
	r.Key = key
	return r
}

// track records that an object may exist at r, for cleanup.
func (e *env) track(r metadata.ObjectRef) {
	e.mu.Lock()
	e.written = append(e.written, r)
	e.mu.Unlock()
}

// put stores body under the subtest's key name in s's bucket and fails
// the test if it cannot.
func (e *env) put(t *testing.T, s storage.ObjectStore, name string, body []byte) metadata.ObjectRef {
	t.Helper()
	k := e.key(name)
	e.track(ref(s, k))
	r, err := s.Put(e.ctx, k, body)
	require.NoError(t, err, "Put %q", k)
	return r
}

// readAll reads the whole of an object of known size.
func readAll(t *testing.T, ctx context.Context, s storage.ObjectStore, r metadata.ObjectRef, size int) []byte {
	t.Helper()
	got, err := s.GetRange(ctx, r, 0, int64(size))
	require.NoError(t, err, "GetRange %s [0, %d)", r, size)
	return got
}

// putMany writes n small objects named name-00000... into s's bucket with
// a few workers, returning their refs and sizes.
func (e *env) putMany(t *testing.T, s storage.ObjectStore, name string, n int) map[string]int64 {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = e.key(fmt.Sprintf("%s-%05d", name, i))
		e.track(ref(s, keys[i]))
	}
	sizes := make(map[string]int64, n)
	for i, k := range keys {
		sizes[k] = int64(i%7 + 1)
	}
	work := make(chan string)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for k := range work {
				if _, err := s.Put(e.ctx, k, bytes.Repeat([]byte{'x'}, int(sizes[k]))); err != nil {
					errs <- fmt.Errorf("Put %q: %w", k, err)
				}
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	return sizes
}

// body returns n deterministic, non-repeating bytes; seed tells bodies
// apart. The content is fixed, so no seed needs reporting.
func body(seed uint64, n int) []byte {
	r := mrand.New(mrand.NewPCG(seed, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func testLocal(t *testing.T, e *env) {
	l, p := e.local.Local(), e.peer.Local()
	for _, r := range []metadata.ObjectRef{l, p} {
		assert.NotEmpty(t, r.AZ, "Local().AZ")
		assert.NotEmpty(t, r.Bucket, "Local().Bucket")
		assert.Empty(t, r.Key, "Local().Key")
	}
	assert.NotEqual(t, l.AZ, p.AZ, "the harness must give stores in different AZs")
	assert.NotEqual(t, l.Bucket, p.Bucket, "the harness must give stores with different buckets")
}

func testPutReturnsRef(t *testing.T, e *env) {
	for _, s := range []storage.ObjectStore{e.local, e.peer} {
		k := e.key("obj-" + s.Local().AZ)
		got := e.put(t, s, "obj-"+s.Local().AZ, []byte("hello"))
		want := metadata.ObjectRef{AZ: s.Local().AZ, Bucket: s.Local().Bucket, Key: k}
		assert.Equal(t, want, got, "Put must return a ref naming the store's own AZ, bucket and the key")
	}
}

func testGetRange(t *testing.T, e *env) {
	const size = 300_007 // odd, larger than common buffer sizes
	data := body(1, size)
	r := e.put(t, e.local, "ranges", data)
	cases := []struct {
		name           string
		offset, length int64
	}{
		{"whole object", 0, size},
		{"first byte", 0, 1},
		{"last byte", size - 1, 1},
		{"start", 0, 4096},
		{"middle", 1000, 65_536},
		{"one byte in the middle", size / 2, 1},
		{"end", size - 5000, 5000},
		{"all but the first byte", 1, size - 1},
		{"all but the last byte", 0, size - 1},
	}
	for _, s := range []struct {
		name  string
		store storage.ObjectStore
	}{{"local", e.local}, {"peer", e.peer}} {
		for _, c := range cases {
			got, err := s.store.GetRange(e.ctx, r, c.offset, c.length)
			require.NoError(t, err, "%s store, %s: GetRange(%d, %d)", s.name, c.name, c.offset, c.length)
			require.Len(t, got, int(c.length), "%s store, %s", s.name, c.name)
			assert.True(t, bytes.Equal(data[c.offset:c.offset+c.length], got),
				"%s store, %s: GetRange(%d, %d) returned other bytes than were put", s.name, c.name, c.offset, c.length)
		}
	}
}

func testGetRangeInvalid(t *testing.T, e *env) {
	const size = 100
	r := e.put(t, e.local, "small", body(2, size))
	missing := ref(e.local, e.key("missing"))
	cases := []struct {
		name           string
		offset, length int64
		// argument marks ranges invalid for any object, reported as
		// ErrInvalidRange even when the object does not exist.
		argument bool
	}{
		{"negative offset", -1, 1, true},
		{"zero length", 0, 0, true},
		{"negative length", 0, -1, true},
		{"end overflows int64", 1, math.MaxInt64, true},
		{"offset at max int64", math.MaxInt64, 1, true},
		{"one byte past the end", 0, size + 1, false},
		{"starts at the end", size, 1, false},
		{"starts past the end", size + 1, 1, false},
		{"straddles the end", size - 1, 2, false},
	}
	for _, c := range cases {
		got, err := e.local.GetRange(e.ctx, r, c.offset, c.length)
		assert.ErrorIs(t, err, storage.ErrInvalidRange, "%s: GetRange(%d, %d) of a %d-byte object", c.name, c.offset, c.length, size)
		assert.Empty(t, got, c.name)
		if c.argument {
			_, err := e.local.GetRange(e.ctx, missing, c.offset, c.length)
			assert.ErrorIs(t, err, storage.ErrInvalidRange, "%s: GetRange(%d, %d) of a missing object", c.name, c.offset, c.length)
		}
	}
}

func testGetRangeNotFound(t *testing.T, e *env) {
	for _, owner := range []storage.ObjectStore{e.local, e.peer} {
		r := ref(owner, e.key("never-written"))
		for _, reader := range []storage.ObjectStore{e.local, e.peer} {
			got, err := reader.GetRange(e.ctx, r, 0, 1)
			require.ErrorIs(t, err, storage.ErrNotFound, "GetRange of missing %s from the store in %s", r, reader.Local().AZ)
			assert.Contains(t, err.Error(), r.Key, "the error must name the key")
			assert.Empty(t, got)
		}
	}
}

func testUnknownBucket(t *testing.T, e *env) {
	existing := e.put(t, e.local, "existing", []byte("still here"))
	unknown := metadata.ObjectRef{AZ: "storagetest-no-such-az", Bucket: "storagetest-unconfigured-bucket", Key: e.key("x")}

	_, err := e.local.GetRange(e.ctx, unknown, 0, 1)
	assert.ErrorIs(t, err, storage.ErrUnknownBucket, "GetRange")
	_, err = e.local.List(e.ctx, unknown.Bucket, e.prefix)
	assert.ErrorIs(t, err, storage.ErrUnknownBucket, "List")
	err = e.local.Delete(e.ctx, []metadata.ObjectRef{unknown})
	assert.ErrorIs(t, err, storage.ErrUnknownBucket, "Delete")

	err = e.local.Delete(e.ctx, []metadata.ObjectRef{existing, unknown})
	assert.ErrorIs(t, err, storage.ErrUnknownBucket, "Delete of a known and an unknown ref")
	got, err := e.local.GetRange(e.ctx, existing, 0, int64(len("still here")))
	require.NoError(t, err, "Delete must check every ref before deleting anything")
	assert.Equal(t, "still here", string(got))
}

func testPutExistingKey(t *testing.T, e *env) {
	first := []byte("the first body")
	r := e.put(t, e.local, "taken", first)

	for _, second := range [][]byte{[]byte("a second, longer body"), []byte("short"), {}} {
		_, err := e.local.Put(e.ctx, r.Key, second)
		require.ErrorIs(t, err, storage.ErrAlreadyExists, "Put of an existing key with a %d-byte body", len(second))
		assert.Contains(t, err.Error(), r.Key, "the error must name the key")
	}
	assert.Equal(t, first, readAll(t, e.ctx, e.local, r, len(first)), "a refused Put must leave the object unchanged")
	_, err := e.local.GetRange(e.ctx, r, 0, int64(len(first))+1)
	assert.ErrorIs(t, err, storage.ErrInvalidRange, "the object must keep its original size")

	// Keys are per bucket: the peer's bucket does not have this key yet.
	other := []byte("the peer's own object")
	pr := e.put(t, e.peer, "taken", other)
	assert.Equal(t, r.Key, pr.Key)
	assert.Equal(t, other, readAll(t, e.ctx, e.local, pr, len(other)))
	assert.Equal(t, first, readAll(t, e.ctx, e.peer, r, len(first)))
}

func testPutIfAbsentRace(t *testing.T, e *env) {
	const writers, rounds = 16, 4
	for round := range rounds {
		k := e.key(fmt.Sprintf("race-%d", round))
		e.track(ref(e.local, k))
		bodies := make([][]byte, writers)
		for i := range bodies {
			// Different lengths, so a mix of two bodies cannot pass
			// for either.
			bodies[i] = body(uint64(100*round+i), 1000+37*i)
		}
		errs := make([]error, writers)
		refs := make([]metadata.ObjectRef, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				<-start
				refs[i], errs[i] = e.local.Put(e.ctx, k, bodies[i])
			})
		}
		close(start)
		wg.Wait()

		winner := -1
		for i, err := range errs {
			if err == nil {
				require.Equal(t, -1, winner, "round %d: writers %d and %d both succeeded", round, winner, i)
				winner = i
				continue
			}
			require.ErrorIs(t, err, storage.ErrAlreadyExists, "round %d: writer %d", round, i)
		}
		require.NotEqual(t, -1, winner, "round %d: no writer succeeded", round)
		want := bodies[winner]
		assert.Equal(t, ref(e.local, k), refs[winner])
		assert.True(t, bytes.Equal(want, readAll(t, e.ctx, e.peer, refs[winner], len(want))),
			"round %d: the stored object must be the winner's body", round)
		_, err := e.local.GetRange(e.ctx, refs[winner], 0, int64(len(want))+1)
		assert.ErrorIs(t, err, storage.ErrInvalidRange, "round %d: the stored object must have the winner's size", round)
	}
}

func testPutDoesNotRetainBody(t *testing.T, e *env) {
	b := body(3, 4096)
	want := bytes.Clone(b)
	r := e.put(t, e.local, "not-retained", b)
	for i := range b {
		b[i] = ^b[i]
	}
	assert.True(t, bytes.Equal(want, readAll(t, e.ctx, e.local, r, len(want))),
		"changing the body after Put returned changed the stored object")
}

func testGetRangeResultNotAliased(t *testing.T, e *env) {
	want := body(4, 4096)
	// Put a copy, so that this test does not depend on Put's own
	// copying, which PutDoesNotRetainBody checks.
	r := e.put(t, e.local, "not-aliased", bytes.Clone(want))
	got := readAll(t, e.ctx, e.local, r, len(want))
	for i := range got {
		got[i] = ^got[i]
	}
	part, err := e.local.GetRange(e.ctx, r, 10, 10)
	require.NoError(t, err)
	clear(part)
	assert.True(t, bytes.Equal(want, readAll(t, e.ctx, e.local, r, len(want))),
		"changing a GetRange result changed the stored object")
}

// testGetRangeResultsIndependent: the engines hold one answer while they
// ask for the next, so a later GetRange must not write into the memory of
// an earlier answer (a wrapper reusing one buffer for all answers would).
func testGetRangeResultsIndependent(t *testing.T, e *env) {
	first, second := body(5, 4096), body(6, 4096)
	r1 := e.put(t, e.local, "independent-1", bytes.Clone(first))
	r2 := e.put(t, e.local, "independent-2", bytes.Clone(second))
	got1 := readAll(t, e.ctx, e.local, r1, len(first))
	got2 := readAll(t, e.ctx, e.local, r2, len(second))
	assert.True(t, bytes.Equal(first, got1), "a later GetRange changed the answer of an earlier one")
	assert.True(t, bytes.Equal(second, got2), "GetRange answered another object's bytes")
}

func testEmptyObject(t *testing.T, e *env) {
	empty := e.put(t, e.local, "empty", []byte{})
	nilBody := e.put(t, e.local, "nil", nil)
	for _, r := range []metadata.ObjectRef{empty, nilBody} {
		for _, s := range []storage.ObjectStore{e.local, e.peer} {
			_, err := s.GetRange(e.ctx, r, 0, 1)
			assert.ErrorIs(t, err, storage.ErrInvalidRange, "no positive range lies inside empty object %s", r)
		}
		_, err := e.local.Put(e.ctx, r.Key, []byte("x"))
		assert.ErrorIs(t, err, storage.ErrAlreadyExists, "an empty object still takes its key")
	}
	infos, err := e.local.List(e.ctx, empty.Bucket, e.prefix)
	require.NoError(t, err)
	sizes := map[string]int64{}
	for _, info := range infos {
		sizes[info.Ref.Key] = info.Size
	}
	assert.Equal(t, map[string]int64{empty.Key: 0, nilBody.Key: 0}, sizes)
}

func testCrossAZ(t *testing.T, e *env) {
	fromLocal := body(5, 2048)
	fromPeer := body(6, 1024)
	lr := e.put(t, e.local, "written-by-local", fromLocal)
	pr := e.put(t, e.peer, "written-by-peer", fromPeer)
	assert.Equal(t, e.local.Local().Bucket, lr.Bucket)
	assert.Equal(t, e.peer.Local().Bucket, pr.Bucket)

	assert.True(t, bytes.Equal(fromLocal, readAll(t, e.ctx, e.peer, lr, len(fromLocal))), "peer reading local's object")
	assert.True(t, bytes.Equal(fromPeer, readAll(t, e.ctx, e.local, pr, len(fromPeer))), "local reading peer's object")

	infos, err := e.local.List(e.ctx, pr.Bucket, e.prefix)
	require.NoError(t, err, "local listing the peer's bucket")
	require.Len(t, infos, 1)
	assert.Equal(t, pr, infos[0].Ref)
	assert.Equal(t, int64(len(fromPeer)), infos[0].Size)
}

func testDelete(t *testing.T, e *env) {
	a := e.put(t, e.local, "a", []byte("aaaa"))
	b := e.put(t, e.local, "b", []byte("bbbb"))
	c := e.put(t, e.peer, "c", []byte("cccc"))
	missing := ref(e.local, e.key("never-written"))

	require.NoError(t, e.local.Delete(e.ctx, nil), "Delete of no refs")
	require.NoError(t, e.local.Delete(e.ctx, []metadata.ObjectRef{}), "Delete of an empty slice")

	// Local deletes from its own bucket and from the peer's, with a
	// missing key in the same call.
	refs := []metadata.ObjectRef{a, c, missing}
	require.NoError(t, e.local.Delete(e.ctx, refs))
	for _, r := range []metadata.ObjectRef{a, c} {
		for _, s := range []storage.ObjectStore{e.local, e.peer} {
			_, err := s.GetRange(e.ctx, r, 0, 1)
			assert.ErrorIs(t, err, storage.ErrNotFound, "GetRange of deleted %s", r)
		}
	}
	assert.Equal(t, []byte("bbbb"), readAll(t, e.ctx, e.local, b, 4), "an object not named in Delete must survive it")

	require.NoError(t, e.local.Delete(e.ctx, refs), "deleting again must succeed")
	require.NoError(t, e.peer.Delete(e.ctx, []metadata.ObjectRef{b, b}), "a ref named twice, deleted from the other AZ")
	_, err := e.local.GetRange(e.ctx, b, 0, 1)
	assert.ErrorIs(t, err, storage.ErrNotFound)

	// A deleted key is free again.
	again := []byte("a new a")
	_, err = e.local.Put(e.ctx, a.Key, again)
	require.NoError(t, err, "Put of a deleted key")
	assert.Equal(t, again, readAll(t, e.ctx, e.peer, a, len(again)))

	infos, err := e.local.List(e.ctx, e.local.Local().Bucket, e.prefix)
	require.NoError(t, err)
	require.Len(t, infos, 1)
	assert.Equal(t, a, infos[0].Ref)
}

func testDeleteMany(t *testing.T, e *env) {
	n := e.cfg.manyKeys
	if n == 0 {
		t.Skip("the harness skipped the cases that need many objects (ManyKeys(0))")
	}
	sizes := e.putMany(t, e.local, "many", n)
	peerObj := e.put(t, e.peer, "peer-one", []byte("p"))
	refs := make([]metadata.ObjectRef, 0, n+1)
	for k := range sizes {
		refs = append(refs, ref(e.local, k))
	}
	refs = append(refs, peerObj)

	require.NoError(t, e.local.Delete(e.ctx, refs), "Delete of %d refs in one call", len(refs))
	for _, bucket := range []string{e.local.Local().Bucket, e.peer.Local().Bucket} {
		infos, err := e.local.List(e.ctx, bucket, e.prefix)
		require.NoError(t, err)
		assert.Empty(t, infos, "objects left in %s after deleting all of them", bucket)
	}
	for _, r := range []metadata.ObjectRef{refs[0], refs[len(refs)/2], refs[len(refs)-2], peerObj} {
		_, err := e.local.GetRange(e.ctx, r, 0, 1)
		assert.ErrorIs(t, err, storage.ErrNotFound, "GetRange of deleted %s", r)
	}
}

func testList(t *testing.T, e *env) {
	lb, pb := e.local.Local(), e.peer.Local()
	e.put(t, e.local, "list/a", []byte("1"))
	e.put(t, e.local, "list/b", bytes.Repeat([]byte("2"), 10))
	e.put(t, e.local, "list/sub/c", []byte{})
	e.put(t, e.local, "other/d", []byte("444"))
	e.put(t, e.peer, "list/e", []byte("55555"))

	type obj struct {
		Ref  metadata.ObjectRef
		Size int64
	}
	list := func(s storage.ObjectStore, bucket, prefix string) []obj {
		t.Helper()
		infos, err := s.List(e.ctx, bucket, prefix)
		require.NoError(t, err, "List(%q, %q)", bucket, prefix)
		out := make([]obj, 0, len(infos))
		for _, info := range infos {
			out = append(out, obj{info.Ref, info.Size})
			assert.False(t, info.LastModified.IsZero(), "LastModified of %s", info.Ref)
		}
		return out
	}
	at := func(b metadata.ObjectRef, name string) metadata.ObjectRef {
		b.Key = e.key(name)
		return b
	}

	wantLocal := []obj{{at(lb, "list/a"), 1}, {at(lb, "list/b"), 10}, {at(lb, "list/sub/c"), 0}}
	assert.ElementsMatch(t, wantLocal, list(e.local, lb.Bucket, e.key("list/")), "own bucket")
	assert.ElementsMatch(t, wantLocal, list(e.peer, lb.Bucket, e.key("list/")), "listing another AZ's bucket")
	assert.ElementsMatch(t, []obj{{at(pb, "list/e"), 5}}, list(e.local, pb.Bucket, e.key("list/")), "the peer's bucket")
	assert.ElementsMatch(t, []obj{{at(lb, "list/a"), 1}}, list(e.local, lb.Bucket, e.key("list/a")), "a prefix that is a whole key")
	assert.ElementsMatch(t, []obj{{at(lb, "list/sub/c"), 0}}, list(e.local, lb.Bucket, e.key("list/s")), "a prefix ending inside a path segment")
	assert.Len(t, list(e.local, lb.Bucket, e.prefix), 4, "the subtest's whole prefix")

	infos, err := e.local.List(e.ctx, lb.Bucket, e.key("nothing-here/"))
	require.NoError(t, err, "List of a prefix with no objects is not an error")
	assert.Empty(t, infos)
}

func testListMany(t *testing.T, e *env) {
	n := e.cfg.manyKeys
	if n == 0 {
		t.Skip("the harness skipped the cases that need many objects (ManyKeys(0))")
	}
	want := e.putMany(t, e.local, "page", n)
	e.put(t, e.local, "not-a-page", []byte("x"))

	infos, err := e.peer.List(e.ctx, e.local.Local().Bucket, e.key("page-"))
	require.NoError(t, err)
	got := make(map[string]int64, len(infos))
	for _, info := range infos {
		_, dup := got[info.Ref.Key]
		require.False(t, dup, "List returned %q twice", info.Ref.Key)
		got[info.Ref.Key] = info.Size
	}
	assert.Equal(t, want, got, "List must return every object of the prefix, across pages, with its size")
}

func testContextCanceled(t *testing.T, e *env) {
	existing := e.put(t, e.local, "existing", []byte("data"))
	fresh := e.key("fresh")
	e.track(ref(e.local, fresh))

	ctx, cancel := context.WithCancel(e.ctx)
	cancel()

	_, err := e.local.Put(ctx, fresh, []byte("data"))
	assert.ErrorIs(t, err, context.Canceled, "Put")
	_, err = e.local.GetRange(ctx, existing, 0, 1)
	assert.ErrorIs(t, err, context.Canceled, "GetRange")
	_, err = e.peer.GetRange(ctx, existing, 0, 1)
	assert.ErrorIs(t, err, context.Canceled, "GetRange of another AZ's object")
	err = e.local.Delete(ctx, []metadata.ObjectRef{existing})
	assert.ErrorIs(t, err, context.Canceled, "Delete")
	_, err = e.local.List(ctx, existing.Bucket, e.prefix)
	assert.ErrorIs(t, err, context.Canceled, "List")

	_, err = e.local.GetRange(e.ctx, ref(e.local, fresh), 0, 1)
	assert.ErrorIs(t, err, storage.ErrNotFound, "a Put with a cancelled context must store nothing")
	assert.Equal(t, []byte("data"), readAll(t, e.ctx, e.local, existing, 4), "a Delete with a cancelled context must delete nothing")
}

func testSpecialKeys(t *testing.T, e *env) {
	names := []string{
		"with space",
		"plus+sign",
		"percent%20literal",
		"unicode-ключ-日本語",
		"query?a=b&c=d",
		"hash#fragment",
		"tilde~star*paren(s)",
		"dots..in..key",
		"deep/nested/path/object",
	}
	want := map[string]int64{}
	for i, name := range names {
		data := body(uint64(10+i), 10+i)
		r := e.put(t, e.local, name, data)
		assert.Equal(t, e.key(name), r.Key)
		assert.True(t, bytes.Equal(data, readAll(t, e.ctx, e.peer, r, len(data))), "reading key %q", r.Key)
		want[r.Key] = int64(len(data))
	}
	infos, err := e.local.List(e.ctx, e.local.Local().Bucket, e.prefix)
	require.NoError(t, err)
	got := map[string]int64{}
	for _, info := range infos {
		got[info.Ref.Key] = info.Size
	}
	assert.Equal(t, want, got, "List must return keys exactly as they were put")

	refs := make([]metadata.ObjectRef, 0, len(names))
	for k := range want {
		refs = append(refs, ref(e.local, k))
	}
	require.NoError(t, e.local.Delete(e.ctx, refs))
	infos, err = e.local.List(e.ctx, e.local.Local().Bucket, e.prefix)
	require.NoError(t, err)
	assert.Empty(t, infos, "Delete must find keys exactly as they were put")
}

func testConcurrentPutGet(t *testing.T, e *env) {
	const workers, perWorker = 8, 8
	var wg sync.WaitGroup
	for w := range workers {
		store := e.local
		if w%2 == 1 {
			store = e.peer
		}
		wg.Go(func() {
			for i := range perWorker {
				name := fmt.Sprintf("w%d-%d", w, i)
				k := e.key(name)
				e.track(ref(store, k))
				data := body(uint64(1000*w+i), 512+i)
				r, err := store.Put(e.ctx, k, data)
				if !assert.NoError(t, err, "Put %q", k) {
					return
				}
				// Read through the other AZ's store.
				reader := e.peer
				if store == e.peer {
					reader = e.local
				}
				got, err := reader.GetRange(e.ctx, r, 0, int64(len(data)))
				if assert.NoError(t, err, "GetRange %s", r) {
					assert.True(t, bytes.Equal(data, got), "content of %s", r)
				}
			}
		})
	}
	wg.Wait()
	var total int
	for _, s := range []storage.ObjectStore{e.local, e.peer} {
		infos, err := s.List(e.ctx, s.Local().Bucket, e.prefix)
		require.NoError(t, err)
		for _, info := range infos {
			assert.True(t, strings.HasPrefix(info.Ref.Key, e.prefix))
		}
		total += len(infos)
	}
	assert.Equal(t, workers*perWorker, total)
}
