package walstore

import (
	"cmp"

	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/internal/leadcore"
)

// CoreConfigs returns the configurations of the leader and follower
// protocol cores a Node made with cfg runs, or why NewNode would refuse
// cfg: cfg validated, its defaults applied, each setting given to the core
// that takes it. NewNode builds its engines' cores from them, adding its
// drivers' hooks; the simulation, which drives the same cores without a
// Node, builds its cores from them too, so that both run them with the
// same settings and walstore's defaults are stated once. The cores are
// internal to this module: outside it the results serve no purpose.
func CoreConfigs(cfg NodeConfig) (leadcore.Config, followcore.Config, error) {
	if err := cfg.validate(); err != nil {
		return leadcore.Config{}, followcore.Config{}, err
	}
	l, f := cfg.coreConfigs()
	return l, f, nil
}

// coreConfigs returns the cores' configurations of c, which validate has
// checked and completed, with the engines' loggers and seeds but none of
// the drivers' hooks.
func (c *NodeConfig) coreConfigs() (leadcore.Config, followcore.Config) {
	up, _ := c.UploadHedge.policy("UploadHedge") // checked by validate
	fp, _ := c.FetchHedge.policy("FetchHedge")
	lead := leadcore.Config{
		BrokerID: c.BrokerID, MetadataPartitions: c.Log.Partitions(), Codec: c.Codec,
		Interval: c.Interval, WaitCutDelay: c.WaitCutDelay, NoDigests: c.NoDigests, ObjectBytes: c.ObjectBytes, MaxPartitions: c.MaxPartitions,
		BufferBytes: c.BufferBytes, MaxInflight: c.MaxInflight, DegradedAfter: c.DegradedAfter,
		MarkerRefresh: c.MarkerRefresh, GCInterval: c.GCInterval, RetainFor: c.RetainFor,
		BackoffInitial: c.Backoff.Initial, BackoffMax: c.Backoff.Max, Seed: c.Seed ^ 0x1eade7, Hedge: up,
		Logger: c.Logger.With("engine", "leader"),
	}
	follow := followcore.Config{
		BrokerID: c.BrokerID, Readahead: c.Readahead, MaxHeld: c.MaxHeld,
		FetchConcurrency: c.FetchConcurrency, HedgeAfter: c.HedgeAfter,
		BackoffInitial: c.Backoff.Initial, BackoffMax: c.Backoff.Max,
		CoalesceGap: cmp.Or(c.CoalesceGap, DefaultCoalesceGap), Hedge: fp, ReportInterval: c.ProgressInterval,
		Seed: c.Seed, Logger: c.Logger.With("engine", "follower"),
	}
	return lead, follow
}

// followerSeed is the seed of the follower engine's own randomness (its
// Manager's, its jitter's); the follower core draws from Seed itself.
func (c *NodeConfig) followerSeed() uint64 { return c.Seed ^ 0xf0110e }
