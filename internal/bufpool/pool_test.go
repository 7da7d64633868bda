package bufpool

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPool(t *testing.T) {
	const g = Grain
	for _, tc := range []struct {
		name     string
		maxBytes int
		put      []int // capacities given back, in order
		get      int
		wantCap  int // capacity Get must return
		free     int // free buffers left after Get
	}{
		{"empty pool allocates rounded up", 4 * g, nil, 1, g, 0},
		{"exact grain", 4 * g, nil, g, g, 0},
		{"smallest that fits", 7 * g, []int{4 * g, g, 2 * g}, g + 1, 2 * g, 2},
		{"none fits allocates", 4 * g, []int{g}, g + 1, 2 * g, 1},
		{"full pool keeps the larger", 3 * g, []int{g, 3 * g}, 2 * g, 3 * g, 0},
		{"full pool drops the smaller", 3 * g, []int{3 * g, g}, 2 * g, 3 * g, 0},
		{"larger evicts several smaller", 3 * g, []int{g, g, g, 3 * g}, 2 * g, 3 * g, 0},
		{"over the bound is not kept", 2 * g, []int{3 * g}, g, g, 0},
		{"zero bound keeps nothing", 0, []int{3 * g}, g, g, 0},
		{"zero capacity is not kept", 4 * g, []int{0}, 1, g, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tc.maxBytes)
			for _, c := range tc.put {
				p.Put(make([]byte, min(7, c), c))
			}
			b := p.Get(tc.get)
			require.Zero(t, len(b))
			require.Equal(t, tc.wantCap, cap(b))
			require.Equal(t, tc.free, p.Free())
		})
	}
}

// TestPoolHandsOutOnce: a buffer put back once is handed out once, never
// to two holders at a time.
func TestPoolHandsOutOnce(t *testing.T) {
	p := New(4 * Grain)
	b := make([]byte, 0, Grain)
	p.Put(b)
	x, y := p.Get(1), p.Get(1)
	require.NotSame(t, &x[:1][0], &y[:1][0])
}
