package walstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// ctxHangLocal is a local log whose Append, once hang is set, answers
// only when its context ends.
type ctxHangLocal struct {
	*memstore.LocalLog
	hang atomic.Bool
}

func (l *ctxHangLocal) Append(ctx context.Context, tp metadata.TopicPartition, bs []storage.Batch) error {
	if l.hang.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return l.LocalLog.Append(ctx, tp, bs)
}

// A follower's local Append that hangs, past LocalTimeout and given up
// on, still ends when Run does: its context is Run's, so no goroutine of
// the Node outlives Run (the bubble fails if one does).
func TestHungLocalAppendEndsWithRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		local := &ctxHangLocal{LocalLog: memstore.NewLocalLog()}
		_, n1, _, log1 := twoBrokers(t, walstore.NodeConfig{Local: local})
		local.hang.Store(true)
		produce(t, n1, log1, tpA, 1, 10, 19)
		settle(10 * time.Minute)
	})
}
