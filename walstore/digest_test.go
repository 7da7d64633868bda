package walstore_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// flippingLog is a local log whose reads return one byte changed in the
// batch holding offset at: a disk that no longer holds what was written.
type flippingLog struct {
	storage.LocalLog
	at int64
}

func (l *flippingLog) Read(ctx context.Context, tp metadata.TopicPartition, from int64, maxBytes int) ([]storage.Batch, error) {
	bs, err := l.LocalLog.Read(ctx, tp, from, maxBytes)
	for i, b := range bs {
		if b.FirstOffset <= l.at && l.at <= b.LastOffset {
			bs[i].Data = append([]byte(nil), b.Data...)
			bs[i].Data[len(b.Data)/2] ^= 0x04
		}
	}
	return bs, err
}

// TestDigestsCheckWhatAFollowerHeldWhenItRestarts restarts a follower
// from its local log: it reads back the records of the last entry it
// held, checks them against the leader's digest, and reports a byte
// changed on its disk as a mismatch naming the partition and the range;
// the same restart over an intact log checks and finds nothing.
func TestDigestsCheckWhatAFollowerHeldWhenItRestarts(t *testing.T) {
	for _, corrupt := range []bool{false, true} {
		name := map[bool]string{false: "intact", true: "a byte changed"}[corrupt]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				w := newWorld(t)
				tp := metadata.TopicPartition{Topic: "t", Partition: 0}
				leaderLog := memstore.NewLocalLog()
				leader := w.start(1, walstore.NodeConfig{Local: leaderLog})
				require.NoError(t, leader.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
				followerLog := memstore.NewLocalLog()

				// The follower's first life replicates [0, 40).
				fctx, stop := context.WithCancel(ctx)
				first := followerNode(t, w, followerLog, nil)
				done := make(chan error, 1)
				go func() { done <- first.Run(fctx) }()
				require.NoError(t, first.BecomeFollower(ctx, tp, 1, 1))
				for i := range int64(8) {
					produce(t, leader, leaderLog, tp, 1, i*5, i*5+4)
					settle(20 * time.Millisecond)
				}
				settle(time.Second)
				end, err := followerLog.EndOffset(tp)
				require.NoError(t, err)
				require.Equal(t, int64(40), end)
				st := first.Stats().Follower
				assert.NotZero(t, st.DigestChecks, "the follower checked nothing while it replicated")
				assert.Zero(t, st.DigestMismatches)
				stop()
				require.NoError(t, <-done)

				// Its second life starts from the log, read through a disk
				// that changed a byte of the last batch, or through an intact
				// one.
				var local storage.LocalLog = followerLog
				if corrupt {
					local = &flippingLog{LocalLog: followerLog, at: 39}
				}
				var mu sync.Mutex
				var got []*digest.Mismatch
				second := followerNode(t, w, local, func(m *digest.Mismatch) {
					mu.Lock()
					defer mu.Unlock()
					got = append(got, m)
				})
				sctx, stop2 := context.WithCancel(ctx)
				done2 := make(chan error, 1)
				go func() { done2 <- second.Run(sctx) }()
				require.NoError(t, second.BecomeFollower(ctx, tp, 1, 1))
				settle(time.Second)
				st = second.Stats().Follower
				mu.Lock()
				defer mu.Unlock()
				if !corrupt {
					assert.Empty(t, got)
					assert.Zero(t, st.DigestMismatches)
					assert.NotZero(t, st.DigestChecks, "the restarted follower checked nothing it held")
				} else {
					require.Len(t, got, 1)
					m := got[0]
					assert.ErrorIs(t, m, digest.ErrMismatch)
					assert.Equal(t, tp, m.Partition)
					assert.Equal(t, "reread", m.What)
					assert.LessOrEqual(t, m.From, int64(39))
					assert.Equal(t, int64(40), m.To)
					assert.Equal(t, uint64(1), st.DigestMismatches)
					require.Len(t, st.Mismatches, 1)
					assert.Equal(t, *m, st.Mismatches[0])
				}
				stop2()
				require.NoError(t, <-done2)
			})
		})
	}
}

// followerNode makes broker 2's Node on local, not yet running.
func followerNode(t *testing.T, w *world, local storage.LocalLog, onMismatch func(*digest.Mismatch)) *walstore.Node {
	t.Helper()
	n, err := walstore.NewNode(walstore.NodeConfig{BrokerID: 2, Store: w.store(2), Log: w.meta, Local: local,
		Interval: 10 * time.Millisecond, Backoff: walstore.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond},
		Logger: discard(), OnDigestMismatch: onMismatch,
		OnProgress: w.relay})
	require.NoError(t, err)
	return n
}

// TestNoDigestsKeepsTheEarlierMessageVersions: a leader told not to
// publish digests writes every message in a version a broker of the
// release before digests reads, and its follower checks nothing; by
// default the same run publishes and checks them.
func TestNoDigestsKeepsTheEarlierMessageVersions(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "NoDigests"}[off], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				w := newWorld(t)
				tp := metadata.TopicPartition{Topic: "t", Partition: 0}
				leaderLog := memstore.NewLocalLog()
				leader := w.start(1, walstore.NodeConfig{Local: leaderLog, NoDigests: off})
				follower := w.start(2, walstore.NodeConfig{NoDigests: off})
				require.NoError(t, leader.BecomeLeader(ctx, tp, 1, []int32{2}, -1))
				require.NoError(t, follower.BecomeFollower(ctx, tp, 1, 1))
				for i := range int64(5) {
					produce(t, leader, leaderLog, tp, 1, i*3, i*3+2)
					settle(20 * time.Millisecond)
				}
				settle(time.Second)
				var versions []byte
				for p := range int32(w.meta.Partitions()) {
					recs, err := w.meta.Read(ctx, p, 0, 1000)
					require.NoError(t, err)
					for _, r := range recs {
						versions = append(versions, r.Value[0])
					}
				}
				require.NotEmpty(t, versions)
				checks := follower.Stats().Follower.DigestChecks
				if off {
					assert.NotContains(t, versions, byte(5), "a message in the digests' version")
					assert.Zero(t, checks)
				} else {
					assert.Contains(t, versions, byte(5))
					assert.NotZero(t, checks)
				}
			})
		})
	}
}
