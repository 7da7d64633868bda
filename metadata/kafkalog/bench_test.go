package kafkalog

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/activetier/activetier/metadata"
)

// The benchmarks publish and read encoded metadata messages of 100
// entries, one flush's entries for one metadata partition, and report
// entries per second and bytes per entry. Each has a baseline moving the
// same bytes with franz-go directly, so the log's overhead reads as a ratio.
const (
	// benchSeed makes the benchmark message the same on every run.
	benchSeed = 1176
	// benchPartitions is how many metadata partitions the concurrent
	// publishers write to, one each.
	benchPartitions = 4
	// benchReadMessages is how many messages one read op reads, from
	// offset 0 to the end of the partition.
	benchReadMessages = 1000
)

// benchMessage returns an encoded message of 100 entries over
// three topics, and the number of entries it holds.
func benchMessage(b *testing.B) ([]byte, int) {
	r := rand.New(rand.NewPCG(benchSeed, benchSeed))
	var parts []metadata.TopicPartition
	parts = append(parts, topicPartitions("orders", 50)...)
	parts = append(parts, topicPartitions("payments.v2", 30)...)
	parts = append(parts, topicPartitions("clickstream-raw", 20)...)
	m := flushMessage(r, 3, "000000000000a2c1", parts)
	v, err := metadata.AppendMessage(nil, m)
	require.NoError(b, err)
	return v, len(m.Entries)
}

func reportEntries(b *testing.B, start time.Time, messages, entriesPerMessage, messageBytes int) {
	elapsed := time.Since(start).Seconds()
	b.ReportMetric(float64(messages*entriesPerMessage)/elapsed, "entries/s")
	b.ReportMetric(float64(messageBytes)/float64(entriesPerMessage), "B/entry")
}

func benchClient(b *testing.B, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
	}, opts...)...)
	require.NoError(b, err)
	b.Cleanup(cl.Close)
	return cl
}

func BenchmarkPublish(b *testing.B) {
	value, entries := benchMessage(b)
	ctx := context.Background()
	run := func(b *testing.B, publish func(partition int32) error) {
		b.Run("Sequential", func(b *testing.B) {
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				if err := publish(0); err != nil {
					b.Fatal(err)
				}
			}
			reportEntries(b, start, b.N, entries, len(value))
		})
		// A leader's flush writes one message to each of several metadata
		// partitions at once.
		b.Run("Concurrent", func(b *testing.B) {
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			b.SetParallelism(benchPartitions)
			var next atomic.Int32
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				p := next.Add(1) % benchPartitions
				for pb.Next() {
					if err := publish(p); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportEntries(b, start, b.N, entries, len(value))
		})
	}

	b.Run("kafkalog", func(b *testing.B) {
		c := newCluster(b, kfake.SeedTopics(benchPartitions, testTopic))
		l := openLog(b, c, Config{Partitions: benchPartitions})
		run(b, func(p int32) error {
			_, err := l.Append(ctx, p, value)
			return err
		})
	})
	b.Run("baseline-kgo-ProduceSync", func(b *testing.B) {
		c := newCluster(b, kfake.SeedTopics(benchPartitions, testTopic))
		cl := benchClient(b, c)
		run(b, func(p int32) error {
			return cl.ProduceSync(ctx, &kgo.Record{Topic: testTopic, Partition: p, Value: value}).FirstErr()
		})
	})
}

// BenchmarkRead reads a partition of benchReadMessages messages from offset 0
// to the end per op, as a follower catching up does.
func BenchmarkRead(b *testing.B) {
	value, entries := benchMessage(b)
	ctx := context.Background()
	populate := func(b *testing.B) *kfake.Cluster {
		c := newCluster(b, kfake.SeedTopics(1, testTopic))
		cl := benchClient(b, c)
		for range benchReadMessages {
			cl.Produce(ctx, &kgo.Record{Topic: testTopic, Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		require.NoError(b, cl.Flush(ctx))
		return c
	}
	run := func(b *testing.B, readAll func() int) {
		b.SetBytes(int64(benchReadMessages * len(value)))
		b.ReportAllocs()
		start := time.Now()
		for b.Loop() {
			if n := readAll(); n != benchReadMessages {
				b.Fatalf("read %d messages, want %d", n, benchReadMessages)
			}
		}
		reportEntries(b, start, b.N*benchReadMessages, entries, len(value))
	}

	for _, limit := range []int{100, 10} {
		b.Run("kafkalog/limit="+strconv.Itoa(limit), func(b *testing.B) {
			c := populate(b)
			l := openLog(b, c, Config{Partitions: 1})
			run(b, func() int {
				next := int64(0)
				for next < benchReadMessages {
					recs, err := l.Read(ctx, 0, next, limit)
					if err != nil {
						b.Fatal(err)
					}
					next += int64(len(recs))
				}
				return int(next)
			})
		})
	}

	// The same fetch requests the log sends, decoded by franz-go, without
	// the log's copying and bookkeeping.
	b.Run("baseline-kgo-direct-fetch", func(b *testing.B) {
		c := populate(b)
		cl := benchClient(b, c)
		info, err := topicMetadata(ctx, cl, testTopic)
		require.NoError(b, err)
		decompressor := kgo.DefaultDecompressor()
		run(b, func() int {
			next := int64(0)
			for next < benchReadMessages {
				req := kmsg.NewPtrFetchRequest()
				req.MaxWaitMillis = 500
				req.MinBytes = 1
				req.MaxBytes = DefaultReadMaxBytes
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic, rt.TopicID = testTopic, info.id
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.FetchOffset = next
				rp.PartitionMaxBytes = DefaultReadMaxBytes
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := cl.Broker(int(info.leaders[0])).Request(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				p := &resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
				fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: next, Topic: testTopic}, p, decompressor, nil)
				if fp.Err != nil {
					b.Fatal(fp.Err)
				}
				next += int64(len(fp.Records))
			}
			return int(next)
		})
	})

	// A franz-go consumer, as an application would read a partition
	// without a group. It is created per op so every op starts at offset
	// 0; the connection setup is part of its cost.
	b.Run("baseline-kgo-consumer", func(b *testing.B) {
		c := populate(b)
		run(b, func() int {
			cl, err := kgo.NewClient(
				kgo.SeedBrokers(c.ListenAddrs()...),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{testTopic: {0: kgo.NewOffset().At(0)}}),
			)
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			n := 0
			for n < benchReadMessages {
				fs := cl.PollFetches(ctx)
				if err := fs.Err0(); err != nil {
					b.Fatal(err)
				}
				n += fs.NumRecords()
			}
			return n
		})
	})
}
