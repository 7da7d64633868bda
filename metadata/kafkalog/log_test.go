package kafkalog

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/activetier/activetier/metadata"
)

func TestConfigValidation(t *testing.T) {
	seeds := []string{"127.0.0.1:9092"}
	tests := []struct {
		name  string
		cfg   Config
		field string // the message must name it
	}{
		{"no brokers", Config{}, "Config.SeedBrokers"},
		{"empty broker", Config{SeedBrokers: []string{"a:1", " "}}, "Config.SeedBrokers[1]"},
		{"bad topic character", Config{SeedBrokers: seeds, Topic: "wal/meta"}, "Config.Topic"},
		{"topic dot", Config{SeedBrokers: seeds, Topic: ".."}, "Config.Topic"},
		{"negative partitions", Config{SeedBrokers: seeds, Partitions: -1}, "Config.Partitions"},
		{"negative replication", Config{SeedBrokers: seeds, ReplicationFactor: -2}, "Config.ReplicationFactor"},
		{"compacted", Config{SeedBrokers: seeds, TopicConfigs: map[string]string{"cleanup.policy": "compact"}}, `Config.TopicConfigs["cleanup.policy"]`},
		{"compact and delete", Config{SeedBrokers: seeds, TopicConfigs: map[string]string{"cleanup.policy": "compact,delete"}}, `Config.TopicConfigs["cleanup.policy"]`},
		{"read wait too short", Config{SeedBrokers: seeds, ReadWait: time.Microsecond}, "Config.ReadWait"},
		{"negative read bytes", Config{SeedBrokers: seeds, ReadMaxBytes: -1}, "Config.ReadMaxBytes"},
		{"negative delivery timeout", Config{SeedBrokers: seeds, DeliveryTimeout: -time.Second}, "Config.DeliveryTimeout"},
		{"delivery timeout too short", Config{SeedBrokers: seeds, DeliveryTimeout: time.Millisecond}, "Config.DeliveryTimeout"},
		{"negative request timeout", Config{SeedBrokers: seeds, RequestTimeout: -time.Second}, "Config.RequestTimeout"},
		{"request timeout too short", Config{SeedBrokers: seeds, RequestTimeout: 99 * time.Millisecond}, "Config.RequestTimeout"},
		{"leader acks", Config{SeedBrokers: seeds, ClientOpts: []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}}, "Config.ClientOpts"},
		{"no idempotence", Config{SeedBrokers: seeds, ClientOpts: []kgo.Opt{kgo.DisableIdempotentWrite()}}, "Config.ClientOpts"},
		{"transactional", Config{SeedBrokers: seeds, ClientOpts: []kgo.Opt{kgo.TransactionalID("x")}}, "Config.ClientOpts"},
		{"auto create", Config{SeedBrokers: seeds, ClientOpts: []kgo.Opt{kgo.AllowAutoTopicCreation()}}, "Config.ClientOpts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Invalid configs fail before any connection is made, so
			// the address needs no server.
			l, err := New(testContext(t), tt.cfg)
			require.Error(t, err)
			assert.Nil(t, l)
			assert.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.field)
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := Config{SeedBrokers: []string{"k:9092"}, TopicConfigs: map[string]string{"retention.ms": "5"}}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, DefaultTopic, cfg.Topic)
	assert.Equal(t, DefaultPartitions, cfg.Partitions)
	assert.Equal(t, DefaultReadWait, cfg.ReadWait)
	assert.Equal(t, DefaultReadMaxBytes, cfg.ReadMaxBytes)
	assert.Equal(t, DefaultDeliveryTimeout, cfg.DeliveryTimeout)
	assert.Equal(t, DefaultRequestTimeout, cfg.RequestTimeout)
	assert.Equal(t, map[string]string{"cleanup.policy": "delete", "retention.ms": "5", "segment.ms": "600000"}, cfg.TopicConfigs)
	assert.NotNil(t, cfg.Logger)
}

func TestNewValidatesExistingTopic(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(8, testTopic))
	l := openLog(t, c, Config{Partitions: 8})
	assert.Equal(t, int32(8), l.Partitions())
	// The producer's durability comes from franz-go's defaults, which New
	// checks rather than sets: acks from all in-sync replicas, idempotent.
	assert.Equal(t, kgo.AllISRAcks(), l.cl.OptValue(kgo.RequiredAcks))
	assert.Equal(t, false, l.cl.OptValue(kgo.DisableIdempotentWrite))

	// Creation allowed changes nothing for a topic that exists.
	for _, create := range []bool{false, true} {
		_, err := New(testContext(t), Config{SeedBrokers: c.ListenAddrs(), Topic: testTopic, Partitions: 4, CreateTopic: create, Logger: quietLogger()})
		var pce *PartitionCountError
		require.ErrorAs(t, err, &pce, "CreateTopic %v", create)
		assert.Equal(t, PartitionCountError{Topic: testTopic, Configured: 4, Actual: 8}, *pce)
		assert.ErrorIs(t, err, ErrPartitionCount)
		assert.Contains(t, err.Error(), "8 partitions")
	}
}

func TestNewMissingTopic(t *testing.T) {
	c := newCluster(t)
	_, err := New(testContext(t), Config{SeedBrokers: c.ListenAddrs(), Logger: quietLogger()})
	require.ErrorIs(t, err, ErrTopicNotFound)
	assert.ErrorIs(t, err, kerr.UnknownTopicOrPartition)
	assert.Contains(t, err.Error(), DefaultTopic)
	assert.Contains(t, err.Error(), "CreateTopic")
	assert.Nil(t, c.TopicInfo(DefaultTopic), "New created a topic without CreateTopic")
}

func TestNewCreatesTopic(t *testing.T) {
	c := newCluster(t)
	cfg := Config{
		SeedBrokers:  c.ListenAddrs(),
		CreateTopic:  true,
		Partitions:   12,
		TopicConfigs: map[string]string{"retention.ms": "7200000"},
		Logger:       quietLogger(),
	}
	l, err := New(testContext(t), cfg)
	require.NoError(t, err)
	defer l.Close()

	info := c.TopicInfo(DefaultTopic)
	require.NotNil(t, info, "topic %q not created", DefaultTopic)
	assert.Equal(t, 12, len(c.PartitionInfos(DefaultTopic)))

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	require.NoError(t, err)
	defer cl.Close()
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(testContext(t), DefaultTopic)
	require.NoError(t, err)
	got := map[string]string{}
	for _, c := range rcs[0].Configs {
		if c.Value != nil && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
			got[c.Key] = *c.Value
		}
	}
	assert.Equal(t, map[string]string{"cleanup.policy": "delete", "retention.ms": "7200000", "segment.ms": "600000"}, got)

	// A second broker starting up finds the topic and uses it.
	l2, err := New(testContext(t), cfg)
	require.NoError(t, err)
	defer l2.Close()
	off, err := l2.Append(testContext(t), 11, []byte("x"))
	require.NoError(t, err)
	assert.Equal(t, int64(0), off)
}

func TestNewRejectsCompactedTopic(t *testing.T) {
	c := newCluster(t)
	require.NoError(t, c.CreateTopic(testTopic, 4, map[string]string{"cleanup.policy": "compact"}))
	_, err := New(testContext(t), Config{SeedBrokers: c.ListenAddrs(), Topic: testTopic, Partitions: 4, Logger: quietLogger()})
	require.ErrorIs(t, err, ErrTopicConfig)
	assert.Contains(t, err.Error(), "cleanup.policy=compact")
}

func TestNewUnreachableBrokers(t *testing.T) {
	// A port that was just free: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = New(ctx, Config{SeedBrokers: []string{addr}, Logger: quietLogger()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), addr, "the error names the brokers tried")
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
}

func TestAppendAndRead(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(3, testTopic))
	l := openLog(t, c, Config{Partitions: 3})
	ctx := testContext(t)

	want0 := appendN(t, l, 0, 10)
	want2 := appendN(t, l, 2, 3)

	assert.Equal(t, want0, valuesOf(readAll(t, l, 0, 0, 10, 100)))
	assert.Equal(t, want2, valuesOf(readAll(t, l, 2, 0, 3, 100)))
	assert.Equal(t, want0[4:], valuesOf(readAll(t, l, 0, 4, 6, 100)), "read from the middle")

	low, high, err := l.Watermarks(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, [2]int64{0, 10}, [2]int64{low, high})
	low, high, err = l.Watermarks(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, [2]int64{0, 0}, [2]int64{low, high})
}

// TestReadFollowsPosition reads with a small limit, so most records come
// from the read-ahead, and jumps back and forth as a follower re-positions
// after truncation or restart.
func TestReadFollowsPosition(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, testTopic))
	l := openLog(t, c, Config{Partitions: 1})
	ctx := testContext(t)
	want := appendN(t, l, 0, 20)

	for _, limit := range []int{1, 3, 7, 20, 50} {
		assert.Equal(t, want, valuesOf(readAll(t, l, 0, 0, 20, limit)), "limit %d", limit)
	}
	for _, from := range []int64{5, 2, 17, 0, 19, 3} {
		recs, err := l.Read(ctx, 0, from, 2)
		require.NoError(t, err)
		require.NotEmpty(t, recs)
		assert.Equal(t, from, recs[0].Offset)
		assert.Equal(t, want[from], recs[0].Value)
	}

	// Appends after a read-ahead was taken are seen: the read-ahead ends
	// where the fetch ended and the next Read goes to the broker.
	more := appendN(t, l, 0, 2)
	assert.Equal(t, append(want[18:], more...), valuesOf(readAll(t, l, 0, 18, 4, 1)))
}

// TestAppendTooLarge shows that a message over the broker's limit (Kafka's
// message.max.bytes, about 1 MB by default) fails at once with Kafka's
// error; the leader engine must split such a flush.
func TestAppendTooLarge(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, testTopic))
	l := openLog(t, c, Config{Partitions: 1})
	_, err := l.Append(testContext(t), 0, make([]byte, 2<<20))
	require.ErrorIs(t, err, kerr.MessageTooLarge)
	assert.Contains(t, err.Error(), "append to partition 0")
	appendN(t, l, 0, 1)
}

// TestAppendUnreachable shows Append returning at ctx's deadline while the
// broker drops every produce; the error says the outcome is unknown.
func TestAppendUnreachable(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, testTopic))
	l := openLog(t, c, Config{Partitions: 1})
	appendN(t, l, 0, 1)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, errors.New("dropped"), true // closes the connection
	})
	ctx, cancel := context.WithTimeout(testContext(t), 300*time.Millisecond)
	defer cancel()
	_, err := l.Append(ctx, 0, []byte("lost?"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "may still be stored")
}

// TestNewWithClientOptsOnly takes the brokers from ClientOpts, as a broker
// that already builds its franz-go options does.
func TestNewWithClientOptsOnly(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(2, testTopic))
	l, err := New(testContext(t), Config{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.ClientID("broker-7")},
		Topic:      testTopic,
		Partitions: 2,
		Logger:     quietLogger(),
	})
	require.NoError(t, err)
	defer l.Close()
	appendN(t, l, 1, 2)
}

func TestReadValuesAreOwnedByCaller(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, testTopic))
	l := openLog(t, c, Config{Partitions: 1})
	ctx := testContext(t)
	buf := []byte("first")
	_, err := l.Append(ctx, 0, buf)
	require.NoError(t, err)
	copy(buf, "xxxxx")
	appendN(t, l, 0, 3)

	recs, err := l.Read(ctx, 0, 0, 2)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, []byte("first"), recs[0].Value)
	// Values of one Read may share a buffer but not capacity: growing one
	// must not overwrite the next, which lies less than 128 bytes further.
	recs[0].Value = append(recs[0].Value, bytes.Repeat([]byte{'!'}, 128)...)
	assert.Equal(t, []byte("p0-o1"), recs[1].Value)
	// Nor does scribbling on a returned value change what is read later.
	copy(recs[1].Value, "zzzzz")
	again := readAll(t, l, 0, 1, 3, 1)
	assert.Equal(t, [][]byte{[]byte("p0-o1"), []byte("p0-o2"), []byte("p0-o3")}, valuesOf(again))
}

func TestReadLongPoll(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(2, testTopic))

	t.Run("ReturnsEmptyAfterReadWait", func(t *testing.T) {
		l := openLog(t, c, Config{Partitions: 2, ReadWait: 30 * time.Millisecond})
		ctx := testContext(t)
		_, high, err := l.Watermarks(ctx, 1)
		require.NoError(t, err)
		recs, err := l.Read(ctx, 1, high, 10)
		require.NoError(t, err)
		assert.Empty(t, recs)
	})

	t.Run("WakesOnAppend", func(t *testing.T) {
		// ReadWait is longer than the test allows, so the record can
		// only arrive through the broker ending the long poll.
		l := openLog(t, c, Config{Partitions: 2, ReadWait: time.Minute})
		ctx := testContext(t)
		_, high, err := l.Watermarks(ctx, 0)
		require.NoError(t, err)
		type result struct {
			recs []metadata.Record
			err  error
		}
		done := make(chan result, 1)
		go func() {
			recs, err := l.Read(ctx, 0, high, 10)
			done <- result{recs, err}
		}()
		time.Sleep(50 * time.Millisecond)
		appendN(t, l, 1, 1) // another partition does not end the poll
		want := appendN(t, l, 0, 1)
		r := <-done
		require.NoError(t, r.err)
		require.Len(t, r.recs, 1)
		assert.Equal(t, want[0], r.recs[0].Value)
		assert.Equal(t, high, r.recs[0].Offset)
	})

	t.Run("HonorsCancel", func(t *testing.T) {
		l := openLog(t, c, Config{Partitions: 2, ReadWait: time.Minute})
		ctx, cancel := context.WithCancel(testContext(t))
		time.AfterFunc(50*time.Millisecond, cancel)
		_, high, err := l.Watermarks(testContext(t), 1)
		require.NoError(t, err)
		recs, err := l.Read(ctx, 1, high, 10)
		require.ErrorIs(t, err, context.Canceled)
		assert.Empty(t, recs)
		// The reader is usable afterwards.
		want := appendN(t, l, 1, 1)
		assert.Equal(t, want, valuesOf(readAll(t, l, 1, high, 1, 10)))
	})

	t.Run("ShortContextDeadline", func(t *testing.T) {
		l := openLog(t, c, Config{Partitions: 2, ReadWait: time.Minute})
		_, high, err := l.Watermarks(testContext(t), 1)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		recs, err := l.Read(ctx, 1, high, 10)
		if err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded)
		}
		assert.Empty(t, recs)
	})
}

func TestOutOfRange(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(2, testTopic))
	l := openLog(t, c, Config{Partitions: 2})
	ctx := testContext(t)
	want := appendN(t, l, 0, 10)

	// Populate the read-ahead with offsets 1..9 before trimming.
	recs, err := l.Read(ctx, 0, 0, 1)
	require.NoError(t, err)
	require.Len(t, recs, 1)

	require.NoError(t, l.Trim(ctx, 0, 6))
	low, high, err := l.Watermarks(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, [2]int64{6, 10}, [2]int64{low, high})

	for _, from := range []int64{1, 5, -1} {
		recs, err := l.Read(ctx, 0, from, 10)
		require.ErrorIs(t, err, metadata.ErrOffsetOutOfRange, "Read from %d after Trim(6)", from)
		assert.Empty(t, recs)
	}
	_, err = l.Read(ctx, 0, 3, 10)
	assert.Contains(t, err.Error(), "[6, 10)", "the error gives the watermarks")

	_, err = l.Read(ctx, 0, 11, 10)
	require.ErrorIs(t, err, metadata.ErrOffsetOutOfRange, "Read past the high watermark")

	assert.Equal(t, want[6:], valuesOf(readAll(t, l, 0, 6, 4, 10)))

	for _, before := range []int64{6, 3, 0, -5} {
		require.NoError(t, l.Trim(ctx, 0, before), "Trim(%d) at or below the low watermark", before)
	}
	err = l.Trim(ctx, 0, 11)
	require.ErrorIs(t, err, metadata.ErrOffsetOutOfRange)
	assert.Contains(t, err.Error(), "high watermark is 10")
	require.ErrorIs(t, l.Trim(ctx, 1, 1), metadata.ErrOffsetOutOfRange, "Trim of an empty partition")

	require.NoError(t, l.Trim(ctx, 0, 10), "Trim at the high watermark")
	low, high, err = l.Watermarks(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, [2]int64{10, 10}, [2]int64{low, high})
}

// TestReadAheadTrimmedElsewhere: records read ahead that another log (or
// retention) trimmed away since are not returned: the Read is out of
// range, as it would be without the read-ahead.
func TestReadAheadTrimmedElsewhere(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, testTopic))
	reader := openLog(t, c, Config{Partitions: 1})
	gc := openLog(t, c, Config{Partitions: 1})
	ctx := testContext(t)
	want := appendN(t, reader, 0, 10)
	recs, err := reader.Read(ctx, 0, 0, 1)
	require.NoError(t, err)
	require.Len(t, recs, 1, "offsets 1 to 9 are now read ahead")

	require.NoError(t, gc.Trim(ctx, 0, 6))
	_, err = reader.Read(ctx, 0, 1, 10)
	require.ErrorIs(t, err, metadata.ErrOffsetOutOfRange)
	assert.Contains(t, err.Error(), "[6, 10)")
	assert.Equal(t, want[6:], valuesOf(readAll(t, reader, 0, 6, 4, 10)))
}

func TestUnknownPartitionAndArguments(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(2, testTopic))
	l := openLog(t, c, Config{Partitions: 2})
	ctx := testContext(t)
	for _, p := range []int32{-1, 2, 1 << 30} {
		_, err := l.Append(ctx, p, nil)
		assert.ErrorIs(t, err, metadata.ErrUnknownPartition)
		_, err = l.Read(ctx, p, 0, 1)
		assert.ErrorIs(t, err, metadata.ErrUnknownPartition)
		_, _, err = l.Watermarks(ctx, p)
		assert.ErrorIs(t, err, metadata.ErrUnknownPartition)
		assert.ErrorIs(t, l.Trim(ctx, p, 1), metadata.ErrUnknownPartition)
	}
	_, err := l.Read(ctx, 0, 0, 0)
	assert.ErrorContains(t, err, "max is 0")
}

func TestClose(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, testTopic))
	l := openLog(t, c, Config{Partitions: 1, ReadWait: time.Minute})
	ctx := testContext(t)
	appendN(t, l, 0, 1)

	done := make(chan error, 1)
	go func() {
		_, err := l.Read(ctx, 0, 1, 10)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, l.Close())
	require.ErrorIs(t, <-done, metadata.ErrClosed, "a waiting Read ends with ErrClosed")

	_, err := l.Append(ctx, 0, []byte("x"))
	assert.ErrorIs(t, err, metadata.ErrClosed)
	_, err = l.Read(ctx, 0, 0, 1)
	assert.ErrorIs(t, err, metadata.ErrClosed)
	_, _, err = l.Watermarks(ctx, 0)
	assert.ErrorIs(t, err, metadata.ErrClosed)
	assert.ErrorIs(t, l.Trim(ctx, 0, 1), metadata.ErrClosed)
	assert.ErrorIs(t, l.Close(), metadata.ErrClosed)
}

// TestLeaderMoves runs on three brokers and moves a partition's leadership
// between reads and appends, as a rolling restart does.
func TestLeaderMoves(t *testing.T) {
	c := newCluster(t, kfake.NumBrokers(3), kfake.SeedTopics(3, testTopic))
	l := openLog(t, c, Config{Partitions: 3})
	var want [3][][]byte
	for p := range int32(3) {
		want[p] = appendN(t, l, p, 5)
		require.Equal(t, want[p], valuesOf(readAll(t, l, p, 0, 5, 10)))
	}
	for p := range int32(3) {
		leader := c.LeaderFor(testTopic, p)
		require.NoError(t, c.MoveTopicPartition(testTopic, p, (leader+1)%3))
	}
	for p := range int32(3) {
		want[p] = append(want[p], appendN(t, l, p, 5)...)
		require.Equal(t, want[p], valuesOf(readAll(t, l, p, 0, 10, 10)), "partition %d after its leader moved", p)
	}
}

// TestBrokerErrors injects broker answers with kfake faults.
func TestBrokerErrors(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, testTopic))
	l := openLog(t, c, Config{Partitions: 1})
	ctx := testContext(t)
	want := appendN(t, l, 0, 3)

	t.Run("TransientFetchErrorIsRetried", func(t *testing.T) {
		h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: testTopic, Err: kerr.NotLeaderForPartition, Count: 2})
		defer h.Remove()
		assert.Equal(t, want, valuesOf(readAll(t, l, 0, 0, 3, 10)))
		assert.Equal(t, 2, h.Hits())
	})
	t.Run("PersistentFetchErrorSurfaces", func(t *testing.T) {
		h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: testTopic, Err: kerr.KafkaStorageError, Count: -1})
		defer h.Remove()
		_, err := l.Read(ctx, 0, 1, 10)
		require.ErrorIs(t, err, kerr.KafkaStorageError)
		assert.Contains(t, err.Error(), "read partition 0")
	})
	t.Run("ProduceRejected", func(t *testing.T) {
		h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: testTopic, Err: kerr.TopicAuthorizationFailed, Count: -1})
		defer h.Remove()
		_, err := l.Append(ctx, 0, []byte("x"))
		require.ErrorIs(t, err, ErrNotAuthorized)
		assert.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
	})
	t.Run("DeleteRecordsRejected", func(t *testing.T) {
		h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DeleteRecords}, Topic: testTopic, Err: kerr.TopicAuthorizationFailed, Count: -1})
		defer h.Remove()
		err := l.Trim(ctx, 0, 1)
		require.ErrorIs(t, err, ErrNotAuthorized)
		assert.Contains(t, err.Error(), "trim partition 0")
	})
}

func TestTopicDeletedWhileInUse(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, testTopic))
	l := openLog(t, c, Config{Partitions: 1})
	appendN(t, l, 0, 1)
	require.NoError(t, c.DeleteTopic(testTopic))
	ctx := testContext(t)
	_, err := l.Read(ctx, 0, 0, 10)
	require.ErrorIs(t, err, ErrTopicNotFound)
	_, _, err = l.Watermarks(ctx, 0)
	require.ErrorIs(t, err, ErrTopicNotFound)
}

// TestConcurrentUse appends to every partition from several goroutines while
// one follower per partition reads it, as brokers do.
func TestConcurrentUse(t *testing.T) {
	const (
		partitions = 4
		writers    = 4
		perWriter  = 40
	)
	c := newCluster(t, kfake.SeedTopics(partitions, testTopic))
	l := openLog(t, c, Config{Partitions: partitions, ReadWait: 50 * time.Millisecond})
	ctx := testContext(t)

	var wg sync.WaitGroup
	errs := make(chan error, writers+partitions)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				p := int32((w + i) % partitions)
				if _, err := l.Append(ctx, p, []byte{byte(w), byte(i)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	perPartition := writers * perWriter / partitions
	got := make([][]metadata.Record, partitions)
	for p := range int32(partitions) {
		wg.Go(func() {
			for next := int64(0); len(got[p]) < perPartition; {
				recs, err := l.Read(ctx, p, next, 7)
				if err != nil {
					errs <- err
					return
				}
				got[p] = append(got[p], recs...)
				next += int64(len(recs))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	seen := map[[2]byte]bool{}
	for p, recs := range got {
		lastByWriter := map[byte]int{}
		for i, r := range recs {
			require.Equal(t, int64(i), r.Offset, "partition %d", p)
			w, n := r.Value[0], int(r.Value[1])
			require.Equal(t, p, (int(w)+n)%partitions, "record %v in partition %d", r.Value, p)
			if last, ok := lastByWriter[w]; ok {
				require.Greater(t, n, last, "writer %d's records out of order in partition %d", w, p)
			}
			lastByWriter[w] = n
			seen[[2]byte{w, byte(n)}] = true
		}
	}
	assert.Len(t, seen, writers*perWriter)
}

func TestErrorClassification(t *testing.T) {
	tests := []struct {
		in   error
		want []error
	}{
		{kerr.TopicAuthorizationFailed, []error{ErrNotAuthorized, kerr.TopicAuthorizationFailed}},
		{kerr.ClusterAuthorizationFailed, []error{ErrNotAuthorized, kerr.ClusterAuthorizationFailed}},
		{kgo.ErrClientClosed, []error{metadata.ErrClosed}},
		{kerr.UnknownTopicOrPartition, []error{ErrTopicNotFound, kerr.UnknownTopicOrPartition}},
		{kerr.UnknownTopicID, []error{ErrTopicNotFound}},
		{kerr.NotEnoughReplicas, []error{ErrUnavailable, kerr.NotEnoughReplicas}},
		{kerr.LeaderNotAvailable, []error{ErrUnavailable}},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, []error{ErrUnavailable, syscall.ECONNREFUSED}},
		{io.EOF, []error{ErrUnavailable}},
		{kerr.MessageTooLarge, nil},
		{errors.New("dial tcp: refused"), nil},
	}
	for _, tt := range tests {
		err := classify(tt.in, "doing it")
		assert.ErrorIs(t, err, tt.in)
		assert.Contains(t, err.Error(), "doing it")
		for _, w := range tt.want {
			assert.ErrorIs(t, err, w, "classify(%v)", tt.in)
		}
		for _, s := range []error{ErrNotAuthorized, ErrTopicNotFound, ErrUnavailable, metadata.ErrClosed} {
			if !slices.Contains(tt.want, s) {
				assert.NotErrorIs(t, err, s, "classify(%v)", tt.in)
			}
		}
	}
}
