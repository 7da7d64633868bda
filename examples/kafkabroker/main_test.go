package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/activetier/activetier/internal/harness/testenv"
	"github.com/activetier/activetier/metadata"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func TestParseFlags(t *testing.T) {
	ok := []string{"-id", "1", "-az", "az1", "-data", "/d", "-buckets", "az0=a,az1=b", "-metadata-brokers", "k:9092"}
	for _, c := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"ok", ok, ""},
		{"no id", ok[2:], "-id: missing"},
		{"no bucket for the AZ", append(slices.Clone(ok), "-az", "az9"), `no bucket for this broker's AZ "az9"`},
		{"bad pair", append(slices.Clone(ok), "-buckets", "az1"), `"az1" is not AZ=BUCKET`},
		{"AZ twice", append(slices.Clone(ok), "-buckets", "az1=a,az1=b"), `AZ "az1" is listed twice`},
		{"zero interval", append(slices.Clone(ok), "-interval", "0s"), "-interval must be positive"},
		{"zero lag time", append(slices.Clone(ok), "-replica-lag-time", "0s"), "-replica-lag-time must be positive"},
		{"no metadata", []string{"-id", "1", "-az", "az1", "-data", "/d", "-buckets", "az1=b"}, "-metadata-brokers: missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o, err := parseFlags(fs, c.args)
			if c.wantErr != "" {
				require.ErrorContains(t, err, c.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, map[string]string{"az0": "a", "az1": "b"}, o.buckets)
		})
	}
}

// consumeAll reads every partition of topic from offset 0 until it holds
// want[p] records of each, as an assign-mode consumer in rack, and
// returns them per partition in the order read.
func consumeAll(t *testing.T, seeds []string, rack, topic string, want map[int32]int) map[int32][]*kgo.Record {
	t.Helper()
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range want {
		offsets[topic][p] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(offsets), kgo.Rack(rack), kgo.FetchMaxWait(200*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	got := make(map[int32][]*kgo.Record)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	done := func() bool {
		for p, n := range want {
			if len(got[p]) < n {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], r) })
	}
	for p, n := range want {
		require.Len(t, got[p], n, "%s in rack %s: partition %d", topic, rack, p)
	}
	return got
}

// TestThreeBrokers runs three broker processes replicating through the S3
// server and a metadata topic on a kfake process: 100,000 records produced
// to 12 partitions with acks=all come back from each AZ's replica, in order
// and byte for byte; kcat round-trips a file through them; and the three
// brokers' logs are equal.
func TestThreeBrokers(t *testing.T) {
	t.Parallel() // its own processes, buckets and metadata cluster
	const topic, partitions, n = "orders", 12, 100_000
	c := startProcCluster(t, map[string]int{topic: partitions, "kcat": 1, "latency": partitions})

	seed := rand.Uint64()
	t.Logf("record seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	require.NoError(t, err)
	defer prod.Close()
	want := make(map[int32][][]byte)
	var mu sync.Mutex
	var produceErr error
	began := time.Now()
	for i := range n {
		p := int32(i % partitions)
		v := fmt.Appendf(nil, "%02d-%06d-", p, i)
		for range rng.IntN(120) {
			v = append(v, byte('a'+rng.IntN(26)))
		}
		want[p] = append(want[p], v)
		prod.Produce(t.Context(), &kgo.Record{Topic: topic, Partition: p, Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				produceErr = err
				mu.Unlock()
			}
		})
	}
	require.NoError(t, prod.Flush(t.Context()))
	require.NoError(t, produceErr)
	t.Logf("produced %d records to %d partitions with acks=all in %v", n, partitions, time.Since(began).Round(time.Millisecond))

	counts := make(map[int32]int)
	for p, vs := range want {
		counts[p] = len(vs)
	}
	for rack := range 3 {
		got := consumeAll(t, c.seeds(), fmt.Sprintf("az%d", rack), topic, counts)
		for p, rs := range got {
			for i, r := range rs {
				if !bytes.Equal(want[p][i], r.Value) || r.Offset != int64(i) {
					t.Fatalf("rack az%d, partition %d, record %d at offset %d: got %q, want %q", rack, p, i, r.Offset, r.Value, want[p][i])
				}
			}
		}
	}
	for id := range 3 {
		st := c.status(id)
		require.Positive(t, st.ServedFollower, "broker %d served no consumer as a follower", id)
		t.Logf("broker %d: %d bytes served as follower, %d as leader; %d objects stored, %d entries applied", id, st.ServedFollower, st.ServedLeader, st.Objects, st.Applied)
	}

	t.Run("kcat", func(t *testing.T) { kcatRoundTrip(t, c) })
	t.Run("latency", func(t *testing.T) { measureLatency(t, c, "latency", partitions) })

	c.stopAll()
	for p := range int32(partitions) {
		tp := metadata.TopicPartition{Topic: topic, Partition: p}
		leader := c.readLog(0, tp)
		require.NotEmpty(t, leader)
		for id := 1; id < 3; id++ {
			require.Equal(t, leader, c.readLog(id, tp), "broker %d's log of %s differs from broker 0's", id, tp)
		}
	}
}

// kcatRoundTrip produces a file of records with kcat (librdkafka) and
// consumes it back from a follower's rack, byte for byte.
func kcatRoundTrip(t *testing.T, c *procCluster) {
	kcat := testenv.Tool(t, "kcat")
	var file bytes.Buffer
	for i := range 2000 {
		fmt.Fprintf(&file, "line %04d %s\n", i, strings.Repeat(string(rune('a'+i%26)), i%90))
	}
	path := filepath.Join(t.TempDir(), "records.txt")
	require.NoError(t, os.WriteFile(path, file.Bytes(), 0o644))
	brokers := strings.Join(c.seeds(), ",")

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	before := c.status(2).ServedFollower
	out, err := exec.CommandContext(ctx, kcat, "-b", brokers, "-t", "kcat", "-p", "0", "-P", "-X", "acks=all", "-l", path).CombinedOutput()
	require.NoError(t, err, "kcat -P: %s", out)
	// Partition 0 is led by broker 0; az2 is a follower's rack.
	cmd := exec.CommandContext(ctx, kcat, "-b", brokers, "-t", "kcat", "-p", "0", "-C", "-o", "beginning", "-e", "-q", "-X", "client.rack=az2")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	require.NoError(t, err, "kcat -C: %s", stderr.String())
	require.Equal(t, file.String(), string(got), "the file did not come back byte for byte")
	require.Greater(t, c.status(2).ServedFollower-before, int64(file.Len()), "kcat did not read from the follower in its rack")
}

// measureLatency produces at a steady rate with acks=1 while a consumer
// in az1 reads every partition, and reports how long each record took
// from the producer's timestamp to the consumer: p50 and p99. Broker 1
// leads a third of the partitions; the consumer reads the rest from it as
// a follower, and those are the samples.
func measureLatency(t *testing.T, c *procCluster, topic string, partitions int) {
	const rate, seconds, size = 1000, 4, 1000 // records/s, s, bytes
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range int32(partitions) {
		offsets[topic][p] = kgo.NewOffset().At(0)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumePartitions(offsets), kgo.Rack("az1"), kgo.FetchMaxWait(500*time.Millisecond))
	require.NoError(t, err)
	defer cons.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer prod.Close()

	var lat []time.Duration
	total := rate * seconds
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		ctx, cancel := context.WithTimeout(t.Context(), time.Duration(seconds)*time.Second+30*time.Second)
		defer cancel()
		for n := 0; n < total && ctx.Err() == nil; {
			fs := cons.PollFetches(ctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				n++
				if r.Partition%3 != 1 { // followed by broker 1
					lat = append(lat, now.Sub(r.Timestamp))
				}
			})
		}
	}()
	value := bytes.Repeat([]byte("x"), size)
	tick := time.NewTicker(time.Second / rate)
	for i := range total {
		<-tick.C
		prod.Produce(t.Context(), &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: value, Timestamp: time.Now()}, nil)
	}
	tick.Stop()
	require.NoError(t, prod.Flush(t.Context()))
	<-consumed
	require.NotEmpty(t, lat)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))].Round(100 * time.Microsecond) }
	t.Logf("produce-to-consume from a follower at %d records/s of %d B (%.1f MB/s), 20ms flush interval: p50 %v, p99 %v, max %v over %d records",
		rate, size, float64(rate*size)/1e6, q(0.5), q(0.99), lat[len(lat)-1].Round(100*time.Microsecond), len(lat))
	st := c.status(1)
	t.Logf("broker 1's follower side: apply lag p50 %.1f ms, p99 %.1f ms (from the batch's newest timestamp to its append)", st.LagP50Ms, st.LagP99Ms)
	for id := range 3 {
		st := c.status(id)
		t.Logf("broker %d's leader side: upload p50 %.1f ms, p99 %.1f ms; append to publication p50 %.1f ms, p99 %.1f ms", id, st.UploadP50, st.UploadP99, st.PublishP50, st.PublishP99)
	}
}
