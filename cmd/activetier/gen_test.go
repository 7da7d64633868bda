package main

import (
	"bytes"
	"time"

	"github.com/activetier/activetier/storage"
)

// batch is next in memory of its own, for tests that keep what they
// generate.
func (g *recordGen) batch(epoch int32, first int64, now time.Time, target int) storage.Batch {
	b := g.next(epoch, first, now, target)
	b.Data = bytes.Clone(b.Data)
	return b
}
