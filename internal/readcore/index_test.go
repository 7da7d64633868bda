package readcore

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// A recIndex never answers a record later than the first that holds an
// entry for the offsets asked, however many records it noted, in
// whatever order (a driver may learn records out of order, and learns
// them again after a rewind), and says when no record noted holds one;
// the marks stay bounded, and for the newest records the answer is
// exact.
func TestRecIndexNeverAnswersLate(t *testing.T) {
	const seed = 1176
	rng := rand.New(rand.NewPCG(seed, 0))
	for run := range 200 {
		var x recIndex
		type noted struct{ rec, end int64 }
		var all []noted
		n := 1 + rng.IntN(2000)
		end := int64(0)
		for rec := int64(0); rec < int64(n); rec++ {
			if rng.IntN(4) == 0 {
				continue // a record without an entry of the partition
			}
			// Entries mostly move forward; a republished copy of older
			// offsets sometimes comes later.
			e := end + rng.Int64N(20)
			if rng.IntN(10) == 0 {
				e = rng.Int64N(end + 1)
			}
			end = max(end, e)
			all = append(all, noted{rec, e})
		}
		// Learned in order, but now and then a record late, and some
		// learned again.
		order := make([]noted, len(all))
		copy(order, all)
		for i := range order {
			if j := i + rng.IntN(3); rng.IntN(8) == 0 && j < len(order) {
				order[i], order[j] = order[j], order[i]
			}
		}
		for _, o := range order {
			x.note(o.rec, o.end)
			if rng.IntN(20) == 0 {
				x.note(o.rec, o.end)
			}
			require.Less(t, len(x.marks), maxMarks, "run %d", run)
		}
		for range 50 {
			off := rng.Int64N(end + 20)
			first := int64(-1)
			for _, o := range all {
				if o.end > off {
					first = o.rec
					break
				}
			}
			at, ok := x.from(off)
			require.Equal(t, first >= 0, ok, "seed %d run %d: offset %d", seed, run, off)
			if ok {
				require.LessOrEqual(t, at, first, "seed %d run %d: offset %d: answered record %d, but %d holds an entry for it", seed, run, off, at, first)
			}
		}
	}
}

// In order, the answer is exact for the newest records: reading again
// from a recent offset costs no more than it must.
func TestRecIndexExactForRecentRecords(t *testing.T) {
	var x recIndex
	for rec := range int64(10_000) {
		x.note(rec, 10*rec+10) // record rec holds offsets [10 rec, 10 rec + 9]
	}
	for _, off := range []int64{99_999, 99_990, 99_900} {
		at, ok := x.from(off)
		require.True(t, ok)
		require.Equal(t, off/10, at, "offset %d", off)
	}
	at, ok := x.from(5)
	require.True(t, ok)
	require.LessOrEqual(t, at, int64(0))
	_, ok = x.from(100_000)
	require.False(t, ok, "no record holds offset 100,000")
}
