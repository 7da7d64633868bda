package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/activetier/activetier/metadata"
)

// rawClient is a kgo client for requests to a chosen broker.
func rawClient(t *testing.T, c *testCluster) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// initProducerID asks broker id for a producer id.
func initProducerID(t *testing.T, cl *kgo.Client, id int32) int64 {
	t.Helper()
	resp, err := cl.Broker(int(id)).Request(t.Context(), kmsg.NewPtrInitProducerIDRequest())
	require.NoError(t, err)
	r := resp.(*kmsg.InitProducerIDResponse)
	require.Zero(t, r.ErrorCode, "InitProducerId at broker %d", id)
	require.Zero(t, r.ProducerEpoch)
	return r.ProducerID
}

// produceRaw sends one batch to broker id with acks=all and returns the
// partition's error code and base offset.
func produceRaw(t *testing.T, cl *kgo.Client, id int32, tp metadata.TopicPartition, batch []byte) (int16, int64) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = tp.Partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(int(id)).Request(t.Context(), req)
	require.NoError(t, err)
	p := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	return p.ErrorCode, p.BaseOffset
}

// TestIdempotentProduce walks one partition through Kafka's sequence
// checks with raw requests: retries answered with their first offsets
// (also by a new leader, for a batch the old one appended), gaps,
// overlaps, batches older than the last five, epoch bumps and stale
// epochs, and a second producer with the same sequences. The log holds
// every batch accepted once, and nothing else.
func TestIdempotentProduce(t *testing.T) {
	c := startCluster(t, "t", 3)
	cl := rawClient(t, c)
	tp := metadata.TopicPartition{Topic: "t", Partition: 0} // led by broker 0
	a, b := initProducerID(t, cl, 0), initProducerID(t, cl, 1)
	require.NotEqual(t, a, b)

	batch := func(pid int64, epoch int16, seq int32, n int) []byte {
		ts := make([]int64, n)
		for i := range ts {
			ts[i] = time.Now().UnixMilli()
		}
		return buildBatch(t, testBatch{pid: pid, epoch: epoch, seq: seq, timestamps: ts, value: fmt.Appendf(nil, "%d-%d-%d", pid, epoch, seq)})
	}
	const (
		ok       = 0
		outOfSeq = 45 // OUT_OF_ORDER_SEQUENCE_NUMBER
		stale    = 47 // INVALID_PRODUCER_EPOCH
	)
	require.Equal(t, kerr.OutOfOrderSequenceNumber.Code, int16(outOfSeq))
	require.Equal(t, kerr.InvalidProducerEpoch.Code, int16(stale))
	steps := []struct {
		name   string
		broker int32
		batch  []byte
		code   int16
		base   int64 // for ok
		move   int32 // before the step, move the leadership to this broker (if > 0)
	}{
		{name: "first batch", batch: batch(a, 0, 0, 3), base: 0},
		{name: "its retry", batch: batch(a, 0, 0, 3), base: 0},
		{name: "next batch", batch: batch(a, 0, 3, 2), base: 3},
		{name: "retry of the first, one of the last five", batch: batch(a, 0, 0, 3), base: 0},
		{name: "a gap", batch: batch(a, 0, 6, 1), code: outOfSeq},
		{name: "overlapping the last", batch: batch(a, 0, 4, 2), code: outOfSeq},
		{name: "another producer, the same sequences", batch: batch(b, 0, 0, 3), base: 5},
		{name: "fifth batch", batch: batch(a, 0, 5, 1), base: 8},
		{name: "sixth batch", batch: batch(a, 0, 6, 1), base: 9},
		{name: "seventh batch", batch: batch(a, 0, 7, 1), base: 10},
		{name: "eighth batch", batch: batch(a, 0, 8, 1), base: 11},
		{name: "retry of the fourth, one of the last five", batch: batch(a, 0, 3, 2), base: 3},
		{name: "ninth batch", batch: batch(a, 0, 9, 1), base: 12},
		{name: "retry of the fourth, no longer one of the last five", batch: batch(a, 0, 3, 2), code: outOfSeq},
		{name: "new epoch, not at sequence 0", batch: batch(a, 1, 10, 1), code: outOfSeq},
		{name: "new epoch at sequence 0", batch: batch(a, 1, 0, 1), base: 13},
		{name: "stale epoch", batch: batch(a, 0, 10, 1), code: stale},
		{name: "retry at a new leader", move: 1, broker: 1, batch: batch(a, 1, 0, 1), base: 13},
		{name: "the old leader refuses", broker: 0, batch: batch(a, 1, 1, 1), code: kerr.NotLeaderForPartition.Code},
		{name: "next batch at the new leader", broker: 1, batch: batch(a, 1, 1, 1), base: 14},
		{name: "stale epoch at the new leader", broker: 1, batch: batch(a, 0, 10, 1), code: stale},
		{name: "the other producer's retry at the new leader", broker: 1, batch: batch(b, 0, 0, 3), base: 5},
		{name: "the other producer's gap at the new leader", broker: 1, batch: batch(b, 0, 4, 1), code: outOfSeq},
		{name: "an unknown producer may start anywhere", broker: 1, batch: batch(a+1000, 0, 17, 1), base: 15},
	}
	for _, s := range steps {
		if s.move > 0 {
			c.moveLeader(t, tp, s.move)
		}
		code, base := produceRaw(t, cl, s.broker, tp, s.batch)
		require.Equal(t, s.code, code, "%s: error code", s.name)
		if s.code == ok {
			require.Equal(t, s.base, base, "%s: base offset", s.name)
		}
	}
	end, err := c.logs[1].EndOffset(tp)
	require.NoError(t, err)
	require.Equal(t, int64(16), end, "every accepted batch once")
}

// TestIdempotentRetryAtNewLeader: kgo at its defaults (an idempotent
// producer, acks=all) produces to a partition whose leader cannot
// acknowledge, an in-sync follower having stopped, while the other
// follower replicates everything; the controller then moves the
// leadership to that follower and drops the stopped one. The old leader
// answers the waiting requests NOT_LEADER, kgo sends them again to the
// new leader, which holds their batches already and answers with their
// offsets. Every record is stored exactly once, in order.
func TestIdempotentRetryAtNewLeader(t *testing.T) {
	c := startCluster(t, "t", 1)
	tp := metadata.TopicPartition{Topic: "t", Partition: 0} // led by broker 0
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic("t"), kgo.MetadataMinAge(10*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
	require.NoError(t, err)
	defer prod.Close()

	const n = 2000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			wg.Add(1)
			prod.Produce(t.Context(), &kgo.Record{Value: fmt.Appendf(nil, "%05d", i)}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					errs <- err
				}
			})
		}
	}
	produce(0, n/2)
	require.NoError(t, prod.Flush(t.Context()))
	c.stops[2]()
	produce(n/2, n)
	// Broker 0 appends what it gets and cannot acknowledge it; broker 1
	// applies all of it.
	require.Eventually(t, func() bool {
		end0, err0 := c.logs[0].EndOffset(tp)
		end1, err1 := c.logs[1].EndOffset(tp)
		return err0 == nil && err1 == nil && end0 > n/2 && end1 == end0
	}, 30*time.Second, 5*time.Millisecond)
	held, err := c.logs[1].EndOffset(tp)
	require.NoError(t, err)
	c.failover(t, 2, tp, 1)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("%d records were appended by the old leader and retried at the new one", held-n/2)
	got := consumePartition(t, c, tp, n)
	for i, v := range got {
		require.Equal(t, fmt.Sprintf("%05d", i), string(v), "offset %d", i)
	}
}

// consumePartition reads n records of tp from offset 0, and checks that
// there are no more once the high watermark is reached.
func consumePartition(t *testing.T, c *testCluster, tp metadata.TopicPartition, n int) [][]byte {
	t.Helper()
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.MetadataMinAge(10*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tp.Topic: {tp.Partition: kgo.NewOffset().At(0)}}))
	require.NoError(t, err)
	defer cons.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var got [][]byte
	for len(got) < n && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, r.Value) })
	}
	require.Equal(t, n, len(got), "records read")
	leader := c.ctl.View().Topics[0].Partitions[tp.Partition].Leader
	end, err := c.logs[leader].EndOffset(tp)
	require.NoError(t, err)
	require.Equal(t, int64(n), end, "records stored more than once")
	return got
}

// TestProducerIDs: ids are unique across brokers, across restarts (the
// reserved blocks are on disk), and after a broker lost its directory
// (the clock floor), and a damaged file is an error, not a reuse.
func TestProducerIDs(t *testing.T) {
	dir := t.TempDir()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	seen := make(map[int64]string)
	take := func(a *producerIDs, n int, who string) {
		t.Helper()
		for range n {
			id, err := a.allocate()
			require.NoError(t, err)
			require.Positive(t, id)
			if prev, dup := seen[id]; dup {
				t.Fatalf("%s handed out %d, which %s did", who, id, prev)
			}
			seen[id] = who
		}
	}
	take(newProducerIDs(dir, 0, now), 2500, "broker 0") // three blocks
	take(newProducerIDs(dir, 0, now), 10, "broker 0 restarted")
	take(newProducerIDs(t.TempDir(), 1, now), 2500, "broker 1")
	take(newProducerIDs(t.TempDir(), maxBrokerID, now), 10, "the highest broker id")
	clock = clock.Add(time.Minute) // 15,360 ids later on the clock floor
	take(newProducerIDs(t.TempDir(), 0, now), 10, "broker 0 with a new directory")

	require.NoError(t, os.WriteFile(filepath.Join(dir, producerIDFile), []byte("garbage"), 0o644))
	_, err := newProducerIDs(dir, 0, now).allocate()
	require.ErrorIs(t, err, errProducerIDs)
}

// TestProducerState covers what the partition test cannot reach: the
// state a new leader rebuilds from a log a failover truncated, sequence
// wrapping, and expiry.
func TestProducerState(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	ps := newProducers(time.Hour, func() time.Time { return clock })
	h := func(pid int64, epoch int16, seq int32, n int64) batchHeader {
		return batchHeader{producerID: pid, producerEpoch: epoch, baseSequence: seq, lastDelta: n - 1, count: n}
	}
	// The old leader appended sequences 0-9 and 10-19; the new leader's
	// log ends after 0-9: the retry of 10-19 is new to it.
	ps.record(h(7, 0, 0, 10), 0, 9)
	dup, err := ps.check(h(7, 0, 10, 10))
	require.NoError(t, err)
	assert.Nil(t, dup)

	// Sequences wrap after MaxInt32.
	ps.record(h(8, 0, 1<<31-2, 2), 10, 11)
	dup, err = ps.check(h(8, 0, 0, 1))
	require.NoError(t, err)
	assert.Nil(t, dup)
	dup, err = ps.check(h(8, 0, 1<<31-2, 2))
	require.NoError(t, err)
	assert.Equal(t, &batchMeta{firstSeq: 1<<31 - 2, lastSeq: 1<<31 - 1, firstOffset: 10, lastOffset: 11}, dup)

	// A producer silent for the expiry is forgotten, once a new one
	// comes at least a minute after the last sweep.
	clock = clock.Add(2 * time.Hour)
	ps.record(h(9, 0, 0, 1), 12, 12)
	assert.NotContains(t, ps.byID, int64(7))
	assert.Contains(t, ps.byID, int64(9))
	_, err = ps.check(h(7, 0, 55, 1)) // unknown again: any sequence
	require.NoError(t, err)
}
