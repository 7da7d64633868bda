package followcore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/hedge"
	"github.com/activetier/activetier/metadata"
)

func entries(es ...metadata.Entry) []metadata.Entry { return es }

// TestFollowRejects checks the role changes the core refuses.
func TestFollowRejects(t *testing.T) {
	c, err := New(testConfig())
	require.NoError(t, err)
	require.NoError(t, c.Follow(t0, tp(0), 2, 2))
	for name, fn := range map[string]func() error{
		"an invalid partition": func() error { return c.Follow(t0, metadata.TopicPartition{Partition: -1}, 1, 2) },
		"a negative epoch":     func() error { return c.Follow(t0, tp(1), -1, 2) },
		"itself as leader":     func() error { return c.Follow(t0, tp(1), 1, 1) },
		"a negative leader":    func() error { return c.Follow(t0, tp(1), 1, -1) },
		"an epoch going back":  func() error { return c.Follow(t0, tp(0), 1, 2) },
	} {
		require.Error(t, fn(), name)
	}
	require.NoError(t, c.Follow(t0, tp(0), 2, 2), "the same epoch again")
}

// TestNewRejects checks the configurations New refuses.
func TestNewRejects(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"negative broker":      func(c *Config) { c.BrokerID = -1 },
		"no readahead":         func(c *Config) { c.Readahead = 0 },
		"no held entries":      func(c *Config) { c.MaxHeld = 0 },
		"no fetch concurrency": func(c *Config) { c.FetchConcurrency = 0 },
		"no hedge":             func(c *Config) { c.HedgeAfter = 0 },
		"max below initial":    func(c *Config) { c.BackoffMax = time.Millisecond },
		"invalid hedge policy": func(c *Config) { c.Hedge = hedge.Policy{Quantile: 2} },
	} {
		cfg := testConfig()
		mod(&cfg)
		_, err := New(cfg)
		require.Error(t, err, name)
	}
}

// TestReadyOutlivesItsAdvance checks the hand-off a driver relies on: a
// Ready's slices stay as they were through its Advance while the driver
// feeds the core the answers, and the next Ready holds only what those
// answers brought.
func TestReadyOutlivesItsAdvance(t *testing.T) {
	c, err := New(testConfig())
	require.NoError(t, err)
	require.NoError(t, c.Follow(t0, tp(0), 1, 2))
	require.NoError(t, c.Follow(t0, tp(1), 1, 2))
	require.True(t, c.HasReady())
	rd := c.Ready()
	c.Advance()
	require.Len(t, rd.Loads, 2)
	for _, l := range rd.Loads {
		c.Loaded(t0, l.ID, LocalState{EndOffset: 5}, nil)
	}
	require.Equal(t, []Load{{ID: 1, Partition: tp(0)}, {ID: 2, Partition: tp(1)}}, rd.Loads)
	next := c.Ready()
	require.Empty(t, next.Loads)
	require.Len(t, next.Progress, 2, "each partition reports where its log starts")
}
