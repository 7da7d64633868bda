package leadcore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

var (
	tpA = metadata.TopicPartition{Topic: "t", Partition: 0}
	tpB = metadata.TopicPartition{Topic: "t", Partition: 1}
	t0  = time.Unix(1_700_000_000, 0).UTC()
)

// harness drives a Core the way a driver does: the scripts' (through
// scriptEnv), the benchmarks' and the Go tests'.
type harness struct {
	t    testing.TB
	c    *Core
	now  time.Time
	reqs map[uint64]any // requests handed out, by id
	keys int
}

func newHarness(t testing.TB, mod func(*Config)) *harness {
	cfg := Config{
		BrokerID: 1, MetadataPartitions: 1, Interval: 100 * time.Millisecond, ObjectBytes: 1000,
		MaxPartitions: 10, BufferBytes: 3000, MaxInflight: 2, DegradedAfter: 5 * time.Second,
		MarkerRefresh: time.Hour, GCInterval: time.Hour, BackoffInitial: 10 * time.Millisecond,
		BackoffMax: time.Second, Seed: 7,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	h := &harness{t: t, c: c, now: t0, reqs: make(map[uint64]any)}
	c.Start(h.now)
	return h
}

// describe keeps rd's encodes for encode, and renders rd as the scripts
// show it: DescribeReady's lines, with the health after "health changed".
func (h *harness) describe(rd Ready) string {
	for _, e := range rd.Encodes {
		h.reqs[e.ID] = e
	}
	out := DescribeReady(rd, h.now)
	if rd.HealthChanged {
		hl := h.c.Health()
		out = strings.Replace(out, "health changed\n", fmt.Sprintf("health changed: degraded=%v err=%v\n", hl.Degraded, hl.Err), 1)
	}
	return out
}

// ready takes the Ready and returns its lines, as describe renders them.
func (h *harness) ready() []string {
	rd := h.c.Ready()
	h.c.Advance()
	return strings.Split(strings.TrimSuffix(h.describe(rd), "\n"), "\n")
}

func (h *harness) advance(d time.Duration) { h.now = h.now.Add(d); h.c.Tick(h.now) }

func (h *harness) append(tp metadata.TopicPartition, epoch int32, first, last int64, size int) error {
	return h.c.Append(h.now, tp, storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, Data: make([]byte, size)})
}

// encode performs Encode id.
func (h *harness) encode(id uint64) {
	e := h.reqs[id].(Encode)
	objs, err := e.Builder.Cut(nil)
	require.NoError(h.t, err)
	h.c.Encoded(h.now, id, objs, err)
}

// stored completes Upload id.
func (h *harness) stored(id uint64) {
	h.keys++
	h.c.Uploaded(h.now, id, metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: fmt.Sprintf("k%d", h.keys)}, nil, Other)
}

func (h *harness) published(id uint64, off int64) { h.c.Published(h.now, id, off, nil, Other) }

func (h *harness) durable(tp metadata.TopicPartition) int64 {
	_, d, _, _ := h.c.Leadership(tp)
	return d
}

var errDown = errors.New("down")

// lineage answers ReadLineage id with one epoch from offset 0.
func (h *harness) lineage(id uint64, epoch int32) {
	h.c.Read(h.now, id, ReadLineage, LocalResult{Epochs: []storage.EpochEntry{{Epoch: epoch, StartOffset: 0}}})
}

func (h *harness) hedgeStored(id uint64, key string) {
	h.c.HedgeUploaded(h.now, id, metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: key}, nil)
}

func tpN(i int) metadata.TopicPartition {
	return metadata.TopicPartition{Topic: "t", Partition: int32(i)}
}
