package walstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/walstore"
)

// TestRunTwiceIsRefused: each engine's Run, called twice at once, runs
// once and refuses the other call at once with ErrStopped; the one that
// runs returns nil when its context ends; a call after that is refused
// too.
func TestRunTwiceIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, b *clustertest.Broker) interface{ Run(context.Context) error }
	}{
		{"Node", func(t *testing.T, b *clustertest.Broker) interface{ Run(context.Context) error } {
			n, err := walstore.NewNode(walstore.NodeConfig{Store: b.Store, Log: b.C.Meta, Local: b.Local})
			require.NoError(t, err)
			return n
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clustertest.New(t, clustertest.Mem(), 1)
			e := tc.make(t, c.AddBroker(1, "az1"))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			results := make(chan error, 2)
			for range 2 {
				go func() { results <- e.Run(ctx) }()
			}
			// The one refused returns while the other runs. (Were the
			// two to drive one engine each, neither would return.)
			select {
			case err := <-results:
				require.ErrorIs(t, err, walstore.ErrStopped)
			case <-time.After(time.Minute):
				t.Fatal("neither call returned while the other ran")
			}
			cancel()
			require.NoError(t, <-results, "the one that ran")
			require.ErrorIs(t, e.Run(t.Context()), walstore.ErrStopped, "a call after Run returned")
		})
	}
}
