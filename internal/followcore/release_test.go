package followcore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hold counts its releases.
type hold struct{ n int }

func (h *hold) Release() { h.n++ }

// held is a fetch result carrying e's section in memory h lends.
func held(e Result, h *hold) Result {
	e.Buffer = h
	return e
}

// appending follows partition 0 up to the append of a0 (offsets 0-9),
// fetched into memory h lends, as append 3.
func appending(h *hold) []event {
	a0 := ent(0, 0, 9, 1, "a", "k1", 0)
	return []event{
		{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
		{1, loaded(1, 0), "progress t-0 end 0 epoch -1 leader 2\nwake 60001\n"},
		{2, records(msg(entries(a0), mark(0, 1, 0))), "fetch 2 a t-0:0-9@1\nlag t-0 10\nwake 1002\n"},
		{5, fetched(2, held(ok(a0), h)), "append 3 t-0 0-9@1\nwake 60001\n"},
	}
}

// TestReleasesBuffers: the core releases a fetched section's buffer once,
// after the append of its batches succeeded and the entry is done with;
// never while the append is outstanding, nor after a failed append (the
// entry may be appended again), nor for an entry it forgets otherwise.
func TestReleasesBuffers(t *testing.T) {
	a0 := ent(0, 0, 9, 1, "a", "k1", 0)
	a1 := ent(1, 0, 4, 1, "a", "k1", 10)
	for _, tc := range []struct {
		name   string
		events func(h0, h1 *hold) []event
		want   [2]int // releases of h0 and h1 at the end
	}{{
		name: "released once the append succeeded",
		events: func(h0, h1 *hold) []event {
			return append(appending(h0),
				event{6, func(t testing.TB, c *Core, now time.Time) {
					require.Zero(t, h0.n, "released while the append is outstanding")
					appended(3, 10)(t, c, now)
				}, "progress t-0 end 10 epoch 1 leader 2\napplied t-0 9 bytes\nlag t-0 0\nwake 60001\n"},
				event{7, tick(), "wake 60001\n"},
			)
		},
		want: [2]int{1, 0},
	}, {
		name: "not released by a failed append",
		events: func(h0, h1 *hold) []event {
			return append(appending(h0),
				event{6, appendFailed(3), "failing t-0 since 6: appending at 0: disk full\nwake 2006\n"},
			)
		},
		want: [2]int{0, 0},
	}, {
		name: "not released for an entry forgotten without an append",
		events: func(h0, h1 *hold) []event {
			return []event{
				{0, follow(0, 1, 2), "load 1 t-0\nrewind\n"},
				{0, follow(1, 1, 2), "load 2 t-1\nrewind\n"},
				{1, loaded(1, 0), "progress t-0 end 0 epoch -1 leader 2\nwake 60001\n"},
				{1, loaded(2, 0), "progress t-1 end 0 epoch -1 leader 2\nwake 60001\n"},
				{2, records(msg(entries(a0, a1), mark(0, 1, 0), mark(1, 1, 0))), "fetch 3 a t-0:0-9@1 t-1:0-4@1\nlag t-0 10\nlag t-1 5\nwake 1002\n"},
				{3, unfollow(0), "wake 1002\n"},
				{5, fetched(3, held(ok(a0), h0), held(ok(a1), h1)), "append 4 t-1 0-4@1\nwake 60001\n"},
				{6, appended(4, 5), "progress t-1 end 5 epoch 1 leader 2\napplied t-1 9 bytes\nlag t-1 0\nwake 60001\n"},
			}
		},
		want: [2]int{0, 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h0, h1 := &hold{}, &hold{}
			run(t, testConfig(), tc.events(h0, h1))
			require.Equal(t, tc.want, [2]int{h0.n, h1.n})
		})
	}
}
