package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// The cases of storage.RangeReader, run for stores that implement it.
// ReadRange is GetRange into the caller's buffer, so every case compares
// the two on the same ranges, and checks what only a buffer the caller
// owns can go wrong: bytes written past dst's length (dst is handed out
// with spare capacity, as the engine's pooled buffers are, and guard
// bytes fill it) and writes after ReadRange returned (the caller
// scribbles over dst and checks later that its pattern survived).

// guardBytes is how much spare capacity dst is handed out with.
const guardBytes = 4096

// guard is the byte the spare capacity and untouched buffers hold.
const guard = 0xA5

// rangeReader returns s as a storage.RangeReader, skipping t if it is not
// one: the interface is optional.
func rangeReader(t *testing.T, s storage.ObjectStore) storage.RangeReader {
	t.Helper()
	rr, ok := s.(storage.RangeReader)
	if !ok {
		t.Skipf("%T does not implement storage.RangeReader", s)
	}
	return rr
}

// guarded is a buffer of length bytes, with guardBytes of spare capacity
// past them, all filled with guard.
type guarded struct{ all []byte }

func newGuarded(length int) *guarded {
	return &guarded{all: bytes.Repeat([]byte{guard}, length+guardBytes)}
}

// dst is the buffer to read into: its length is the range's, its capacity
// reaches over the guard bytes.
func (g *guarded) dst() []byte { return g.all[:len(g.all)-guardBytes] }

// checkGuard fails t if anything was written past dst.
func (g *guarded) checkGuard(t *testing.T, msgAndArgs ...any) {
	t.Helper()
	tail := g.all[len(g.all)-guardBytes:]
	if i := firstNot(tail, guard); i >= 0 {
		assert.Failf(t, "ReadRange wrote past len(dst)", "first changed byte at len(dst)+%d; %s", i, fmt.Sprint(msgAndArgs...))
	}
}

// firstNot returns the index of the first byte of b that is not v, or -1.
func firstNot(b []byte, v byte) int {
	for i, c := range b {
		if c != v {
			return i
		}
	}
	return -1
}

// ErrBrokenContract is CheckedReadRange's error for an answer that breaks
// storage.RangeReader's contract.
var ErrBrokenContract = errors.New("storagetest: ReadRange broke its contract")

// CheckedReadRange calls rr.ReadRange into a new buffer of length bytes,
// handed out with spare capacity as the engine's pooled buffers are, and
// returns the bytes read, or nil and ReadRange's error. An answer that
// breaks the contract is an error matching ErrBrokenContract instead: a
// count outside [0, length], fewer than length bytes without an error, or
// all of them with one (unless length is 0), or a byte written past
// len(dst). Store packages use it to hold ReadRange to the answers their
// tests expect of GetRange.
func CheckedReadRange(ctx context.Context, rr storage.RangeReader, r metadata.ObjectRef, offset int64, length int) ([]byte, error) {
	g := newGuarded(length)
	n, err := rr.ReadRange(ctx, r, offset, g.dst())
	switch tail := g.all[length:]; {
	case firstNot(tail, guard) >= 0:
		return nil, fmt.Errorf("%w: wrote past len(dst), at len(dst)+%d (and returned %d, %v)", ErrBrokenContract, firstNot(tail, guard), n, err)
	case n < 0 || n > length:
		return nil, fmt.Errorf("%w: returned %d for a %d-byte dst (and %v)", ErrBrokenContract, n, length, err)
	case err == nil && n != length:
		return nil, fmt.Errorf("%w: returned %d of %d bytes without an error", ErrBrokenContract, n, length)
	case err != nil && length > 0 && n == length:
		return nil, fmt.Errorf("%w: returned all %d bytes with an error: %w", ErrBrokenContract, n, err)
	case err != nil:
		return nil, err
	}
	return g.dst(), nil
}

// readRange is CheckedReadRange, failing t for a broken contract.
func readRange(t *testing.T, ctx context.Context, rr storage.RangeReader, r metadata.ObjectRef, offset int64, length int, what string) ([]byte, error) {
	t.Helper()
	got, err := CheckedReadRange(ctx, rr, r, offset, length)
	require.NotErrorIs(t, err, ErrBrokenContract, what)
	return got, err
}

// sentinels are the contract's errors, for comparing two answers.
var sentinels = []error{storage.ErrNotFound, storage.ErrAlreadyExists, storage.ErrUnavailable,
	storage.ErrInvalidRange, storage.ErrUnknownBucket, storage.ErrPermanent, context.Canceled, context.DeadlineExceeded}

// sameKinds fails t unless a and b match the same sentinels.
func sameKinds(t *testing.T, a, b error, msgAndArgs ...any) {
	t.Helper()
	for _, s := range sentinels {
		assert.Equal(t, errors.Is(a, s), errors.Is(b, s), "matching %v: GetRange said %v, ReadRange %v; %s", s, a, b, fmt.Sprint(msgAndArgs...))
	}
}

func testReadRange(t *testing.T, e *env) {
	const size = 300_007
	data := body(21, size)
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
		{"end", size - 5000, 5000},
		{"all but the first byte", 1, size - 1},
		{"all but the last byte", 0, size - 1},
	}
	for _, s := range []struct {
		name  string
		store storage.ObjectStore
	}{{"local", e.local}, {"peer", e.peer}} {
		rr := rangeReader(t, s.store)
		for _, c := range cases {
			what := fmt.Sprintf("%s store, %s: ReadRange(%d, %d)", s.name, c.name, c.offset, c.length)
			got, err := readRange(t, e.ctx, rr, r, c.offset, int(c.length), what)
			require.NoError(t, err, what)
			assert.True(t, bytes.Equal(data[c.offset:c.offset+c.length], got), "%s returned other bytes than were put", what)
			viaGet, err := s.store.GetRange(e.ctx, r, c.offset, c.length)
			require.NoError(t, err, what)
			assert.True(t, bytes.Equal(viaGet, got), "%s differs from GetRange of the same range", what)
		}
	}
}

func testReadRangeInvalid(t *testing.T, e *env) {
	rr := rangeReader(t, e.local)
	const size = 100
	r := e.put(t, e.local, "small", body(22, size))
	empty := e.put(t, e.local, "empty", nil)
	missing := ref(e.local, e.key("missing"))
	cases := []struct {
		name   string
		ref    metadata.ObjectRef
		offset int64
		length int
	}{
		{"zero length", r, 0, 0},
		{"zero length of a missing object", missing, 0, 0},
		{"zero length of an empty object", empty, 0, 0},
		{"negative offset", r, -1, 1},
		{"negative offset of a missing object", missing, -1, 1},
		{"offset at max int64", r, math.MaxInt64, 1},
		{"end overflows int64", missing, math.MaxInt64 - 1, 2},
		{"one byte past the end", r, 0, size + 1},
		{"starts at the end", r, size, 1},
		{"starts past the end", r, size + 1, 1},
		{"straddles the end", r, size - 1, 2},
		{"first byte of an empty object", empty, 0, 1},
	}
	for _, c := range cases {
		what := fmt.Sprintf("%s: ReadRange(%d, %d)", c.name, c.offset, c.length)
		_, err := readRange(t, e.ctx, rr, c.ref, c.offset, c.length, what)
		assert.ErrorIs(t, err, storage.ErrInvalidRange, what)
		if c.length > 0 {
			_, getErr := e.local.GetRange(e.ctx, c.ref, c.offset, int64(c.length))
			sameKinds(t, getErr, err, what)
		}
	}
}

func testReadRangeNotFound(t *testing.T, e *env) {
	for _, owner := range []storage.ObjectStore{e.local, e.peer} {
		r := ref(owner, e.key("never-written"))
		for _, reader := range []storage.ObjectStore{e.local, e.peer} {
			what := fmt.Sprintf("ReadRange of missing %s from the store in %s", r, reader.Local().AZ)
			_, err := readRange(t, e.ctx, rangeReader(t, reader), r, 0, 1, what)
			require.ErrorIs(t, err, storage.ErrNotFound, what)
			assert.Contains(t, err.Error(), r.Key, "the error must name the key")
			_, getErr := reader.GetRange(e.ctx, r, 0, 1)
			sameKinds(t, getErr, err, what)
		}
	}
}

func testReadRangeUnknownBucket(t *testing.T, e *env) {
	unknown := metadata.ObjectRef{AZ: "storagetest-no-such-az", Bucket: "storagetest-unconfigured-bucket", Key: e.key("x")}
	_, err := readRange(t, e.ctx, rangeReader(t, e.local), unknown, 0, 1, "ReadRange of an unknown bucket")
	assert.ErrorIs(t, err, storage.ErrUnknownBucket)
}

func testReadRangeContextCanceled(t *testing.T, e *env) {
	existing := e.put(t, e.local, "existing", []byte("data"))
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	for _, s := range []storage.ObjectStore{e.local, e.peer} {
		what := "ReadRange with a cancelled context from the store in " + s.Local().AZ
		got, err := readRange(t, ctx, rangeReader(t, s), existing, 0, 4, what)
		assert.ErrorIs(t, err, context.Canceled, what)
		assert.Empty(t, got, what)
	}
}

// testReadRangeNotRetained checks that the store neither keeps dst as the
// object's memory nor writes into it once ReadRange returned: after every
// read the test overwrites dst with a pattern, and checks after later
// requests of the store that the object is unchanged and every earlier
// dst still holds its pattern.
func testReadRangeNotRetained(t *testing.T, e *env) {
	rr := rangeReader(t, e.local)
	const size = 200_003
	want := body(23, size)
	r := e.put(t, e.local, "not-retained", bytes.Clone(want))
	var done [][]byte
	for i, c := range []struct{ offset, length int64 }{{0, size}, {10, 10}, {size / 2, size / 4}, {0, size}} {
		got, err := readRange(t, e.ctx, rr, r, c.offset, int(c.length), fmt.Sprintf("read %d", i))
		require.NoError(t, err)
		require.True(t, bytes.Equal(want[c.offset:c.offset+c.length], got), "read %d returned other bytes than were put", i)
		pattern := byte(i + 1)
		for j := range got {
			got[j] = pattern
		}
		done = append(done, got)
	}
	assert.True(t, bytes.Equal(want, readAll(t, e.ctx, e.local, r, size)), "changing a ReadRange buffer changed the stored object")
	for i, b := range done {
		assert.Equal(t, -1, firstNot(b, byte(i+1)),
			"the buffer of read %d changed after ReadRange returned", i)
	}
}

// testReadRangeAbandoned cancels reads while they are under way, at
// several points, and checks each answer: the range read whole, or an
// error matching context.Canceled; and, once the store has served a read
// as long as the abandoned one, that the abandoned read wrote nothing more
// into its dst. When the cancellation lands depends on the scheduler; the
// checks hold whichever way it falls.
func testReadRangeAbandoned(t *testing.T, e *env) {
	rr := rangeReader(t, e.local)
	const size = 4 << 20
	want := body(24, size)
	r := e.put(t, e.local, "abandoned", want)
	delays := []time.Duration{0, 10 * time.Microsecond, 100 * time.Microsecond, time.Millisecond, 5 * time.Millisecond}
	for _, d := range delays {
		g := newGuarded(size)
		ctx, cancel := context.WithCancel(e.ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(d)
			cancel()
		})
		n, err := rr.ReadRange(ctx, r, 0, g.dst())
		wg.Wait()
		what := fmt.Sprintf("ReadRange cancelled after %v", d)
		if err == nil {
			require.Equal(t, size, n, what)
			require.True(t, bytes.Equal(want, g.dst()), "%s returned other bytes than were put", what)
		} else {
			require.ErrorIs(t, err, context.Canceled, what)
			require.Less(t, n, size, what)
		}
		clear(g.dst())
		// A read as long as the abandoned one: a write it still had to
		// make would likely have landed by its end.
		got, err := readRange(t, e.ctx, rr, r, 0, size, what+", then read again")
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got), what)
		g.checkGuard(t, what)
		assert.Equal(t, -1, firstNot(g.dst(), 0),
			"%s: dst changed after ReadRange returned", what)
	}
}

// testReadRangeConcurrent reads ranges of one object into distinct
// buffers from several goroutines, through both stores; run under -race,
// it also shows that a store keeps no state between reads.
func testReadRangeConcurrent(t *testing.T, e *env) {
	const size = 1 << 20
	want := body(25, size)
	r := e.put(t, e.local, "concurrent", want)
	var wg sync.WaitGroup
	for w := range 8 {
		s := e.local
		if w%2 == 1 {
			s = e.peer
		}
		rr := rangeReader(t, s)
		wg.Go(func() {
			for i := range 4 {
				offset := int64((w*4 + i) * 4099 % (size / 2))
				length := size/2 - w*1000
				dst := make([]byte, length)
				n, err := rr.ReadRange(e.ctx, r, offset, dst)
				if assert.NoError(t, err, "worker %d read %d", w, i) {
					assert.Equal(t, length, n)
					assert.True(t, bytes.Equal(want[offset:offset+int64(length)], dst), "worker %d read %d: content", w, i)
				}
			}
		})
	}
	wg.Wait()
}
