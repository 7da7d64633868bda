package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/activetier/activetier/examples/kafkabroker/disklog"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testCluster is three brokers in one process, on memstore's buckets and
// metadata log, and their controller: the protocol and the control path
// without processes.
type testCluster struct {
	brokers []*Broker
	logs    []*disklog.Log
	view    Cluster // as at the start
	ctl     *Controller
	stops   []func() // each stops its broker and waits for it

	objects  *memstore.Cluster
	meta     *memstore.Log
	lagTime  time.Duration
	maxFetch int
	register bool
	ctx      context.Context
	wg       *sync.WaitGroup
}

// clusterOption changes how startCluster starts the brokers.
type clusterOption func(*testCluster)

// withLagTime sets the brokers' ReplicaLagTime.
func withLagTime(d time.Duration) clusterOption { return func(c *testCluster) { c.lagTime = d } }

// withMaxFetchBytes sets the brokers' MaxFetchBytes.
func withMaxFetchBytes(n int) clusterOption { return func(c *testCluster) { c.maxFetch = n } }

// withRegistration makes the brokers register with the controller.
func withRegistration() clusterOption { return func(c *testCluster) { c.register = true } }

func startCluster(t *testing.T, topic string, partitions int, opts ...clusterOption) *testCluster {
	t.Helper()
	objects, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az0": "b0", "az1": "b1", "az2": "b2"}})
	require.NoError(t, err)
	meta, err := memstore.NewLog(3, memstore.WithMaxPollWait(10*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { meta.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })

	c := &testCluster{objects: objects, meta: meta, ctx: ctx, wg: &wg}
	for _, o := range opts {
		o(c)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c.view.Controller = ln.Addr().String()
	for id := range int32(3) {
		lg, err := disklog.Open(t.TempDir(), disklog.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { lg.Close() })
		c.logs = append(c.logs, lg)
		c.brokers = append(c.brokers, nil)
		c.stops = append(c.stops, nil)
		controller := ""
		if c.register {
			controller = c.view.Controller
		}
		c.view.Brokers = append(c.view.Brokers, c.startBroker(t, id, controller).Info())
	}
	// Partition p led by broker p % 3, all three in sync.
	c.view.Topics = []Topic{PlaceTopic(topic, int32(partitions), 3, c.view.Brokers)}
	c.ctl, err = NewController(c.view)
	require.NoError(t, err)
	srv := &http.Server{Handler: c.ctl.Handler(), ReadHeaderTimeout: 10 * time.Second}
	wg.Go(func() { _ = srv.Serve(ln) })
	t.Cleanup(func() { srv.Close(); c.ctl.CloseIdleConnections() })
	require.NoError(t, c.ctl.Update(t.Context(), func(*Cluster) {}))
	return c
}

// startBroker starts broker id on its log, with new listeners; one given
// a controller registers with it.
func (c *testCluster) startBroker(t *testing.T, id int32, controller string) *Broker {
	t.Helper()
	az := fmt.Sprintf("az%d", id)
	store, err := c.objects.Store(az)
	require.NoError(t, err)
	kl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b, err := New(Config{ID: id, AZ: az, Kafka: kl, Control: cl, Log: c.logs[id], Controller: controller, ReplicaLagTime: c.lagTime, MaxFetchBytes: c.maxFetch,
		Node: walstore.NodeConfig{Store: store, Log: c.meta, Interval: 10 * time.Millisecond}})
	require.NoError(t, err)
	bctx, stop := context.WithCancel(c.ctx)
	done := make(chan struct{})
	c.wg.Go(func() { defer close(done); _ = b.Run(bctx) })
	c.stops[id] = func() { stop(); <-done }
	c.brokers[id] = b
	return b
}

// moveLeader makes broker to the leader of tp at the next epoch, as a
// controller does, and waits until every broker has it.
func (c *testCluster) moveLeader(t *testing.T, tp metadata.TopicPartition, to int32) {
	t.Helper()
	require.NoError(t, c.ctl.Update(t.Context(), func(v *Cluster) {
		for ti := range v.Topics {
			if v.Topics[ti].Name == tp.Topic {
				pl := &v.Topics[ti].Partitions[tp.Partition]
				pl.Leader, pl.Epoch = to, pl.Epoch+1
			}
		}
	}))
}

// failover takes a stopped broker out of the live brokers and of every
// partition's in-sync replicas, as the controller does once it notices,
// and moves tp's leadership to broker to at the next epoch, in one change.
func (c *testCluster) failover(t *testing.T, dead int32, tp metadata.TopicPartition, to int32) {
	t.Helper()
	require.NoError(t, c.ctl.Update(t.Context(), func(v *Cluster) {
		v.fail(dead)
		if pl := v.placement(tp.Topic, tp.Partition); pl.Leader != to {
			pl.Leader, pl.Epoch, pl.PartitionEpoch = to, pl.Epoch+1, pl.PartitionEpoch+1
		}
	}))
}

func (c *testCluster) seeds() []string {
	var s []string
	for _, b := range c.view.Brokers {
		s = append(s, b.Kafka)
	}
	return s
}

// TestProduceConsumeFromFollowers: kgo produces with acks=all; consumers
// in each AZ read every partition from the replica in their rack, and see
// every record in order.
func TestProduceConsumeFromFollowers(t *testing.T) {
	const topic, partitions, n = "orders", 3, 3000
	c := startCluster(t, topic, partitions)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer prod.Close()
	want := make(map[int32][][]byte)
	for i := range n {
		p := int32(i % partitions)
		v := fmt.Appendf(nil, "record %d of partition %d", i, p)
		want[p] = append(want[p], v)
		prod.Produce(t.Context(), &kgo.Record{Topic: topic, Partition: p, Value: v}, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	require.NoError(t, prod.Flush(t.Context()))

	for _, rack := range []string{"az0", "az1", "az2"} {
		offsets := map[string]map[int32]kgo.Offset{topic: {}}
		for p := range int32(partitions) {
			offsets[topic][p] = kgo.NewOffset().At(0)
		}
		cons, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumePartitions(offsets), kgo.Rack(rack))
		require.NoError(t, err)
		got := make(map[int32][][]byte)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		for total := 0; total < n && ctx.Err() == nil; {
			fs := cons.PollFetches(ctx)
			for _, e := range fs.Errors() {
				if ctx.Err() == nil {
					t.Logf("fetch error: %v", e.Err)
				}
			}
			fs.EachRecord(func(r *kgo.Record) {
				got[r.Partition] = append(got[r.Partition], r.Value)
				total++
			})
		}
		cancel()
		cons.Close()
		require.Equal(t, want, got, "consumer in %s", rack)
	}
	// Each broker leads one partition and served the other two to the
	// consumer in its AZ as their follower, and the rest from nowhere.
	for _, b := range c.brokers {
		st := b.Status()
		require.Positive(t, st.ServedFollower, "broker %d served nothing as a follower", b.cfg.ID)
	}
}

// rawRequest sends one request on conn and returns the response body.
func rawRequest(t *testing.T, conn net.Conn, corr int32, req kmsg.Request) []byte {
	t.Helper()
	buf := []byte{0, 0, 0, 0}
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.Key()))
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.GetVersion()))
	buf = binary.BigEndian.AppendUint32(buf, uint32(corr))
	buf = binary.BigEndian.AppendUint16(buf, 4)
	buf = append(buf, "test"...)
	if req.IsFlexible() {
		buf = append(buf, 0)
	}
	buf = req.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err := conn.Write(buf)
	require.NoError(t, err)
	size := make([]byte, 4)
	_, err = io.ReadFull(conn, size)
	require.NoError(t, err, "no answer to %s v%d", kmsg.NameForKey(req.Key()), req.GetVersion())
	body := make([]byte, binary.BigEndian.Uint32(size))
	_, err = io.ReadFull(conn, body)
	require.NoError(t, err)
	require.Equal(t, corr, int32(binary.BigEndian.Uint32(body)), "correlation ID")
	return body[4:]
}

// rawRequestOn sends req to broker 0 on a connection of its own and
// returns the response body.
func rawRequestOn(t *testing.T, c *testCluster, req kmsg.Request) []byte {
	t.Helper()
	conn, err := net.Dial("tcp", c.view.Brokers[0].Kafka)
	require.NoError(t, err)
	defer conn.Close()
	return rawRequest(t, conn, 1, req)
}

// TestUnsupportedRequests sends every request kmsg knows that the broker
// does not serve, each at its highest version, on one connection: each
// gets an answer that parses, with UNSUPPORTED_VERSION wherever it has an
// error code, and the connection stays up for the next.
func TestUnsupportedRequests(t *testing.T) {
	c := startCluster(t, "t", 1)
	conn, err := net.Dial("tcp", c.view.Brokers[0].Kafka)
	require.NoError(t, err)
	defer conn.Close()
	corr := int32(0)
	for key := range int16(100) {
		req := kmsg.RequestForKey(key)
		if req == nil || versionSupported(key, req.MaxVersion()) {
			continue
		}
		t.Run(kmsg.NameForKey(key), func(t *testing.T) {
			req.SetVersion(req.MaxVersion())
			// One named element in every list the request has, so
			// per-topic and per-partition answers are checked too.
			fill(reflect.ValueOf(req).Elem())
			corr++
			body := rawRequest(t, conn, corr, req)
			resp := req.ResponseKind()
			resp.SetVersion(req.GetVersion())
			if resp.IsFlexible() && key != kmsg.ApiVersions.Int16() {
				body = body[1:] // empty header tags
			}
			require.NoError(t, resp.ReadFrom(body), "the answer parses")
			// Codes of fields this version lacks read back as zero.
			found := false
			for _, code := range errorCodes(reflect.ValueOf(resp).Elem()) {
				if code != 0 {
					require.Equal(t, kerr.UnsupportedVersion.Code, code)
					found = true
				}
			}
			require.True(t, found, "no error code in the answer")
		})
	}
	// And the connection still serves.
	corr++
	api := kmsg.NewPtrApiVersionsRequest()
	body := rawRequest(t, conn, corr, api)
	var resp kmsg.ApiVersionsResponse
	require.NoError(t, resp.ReadFrom(body))
	require.Zero(t, resp.ErrorCode)

	// A key no Kafka version has gets an error code too.
	buf := binary.BigEndian.AppendUint32(nil, 10)
	buf = append(buf, 0x7f, 0x00, 0, 1, 0, 0, 0, 99, 0xff, 0xff)
	_, err = conn.Write(buf)
	require.NoError(t, err)
	ans := make([]byte, 10)
	_, err = io.ReadFull(conn, ans)
	require.NoError(t, err)
	require.Equal(t, []byte{0, 0, 0, 6, 0, 0, 0, 99, 0, byte(kerr.UnsupportedVersion.Code)}, ans)
}

// fill gives every list in v one element and every string a value,
// recursively.
func fill(v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() {
			continue
		}
		switch {
		case f.Kind() == reflect.String:
			f.SetString("x")
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			s := reflect.MakeSlice(f.Type(), 1, 1)
			fill(s.Index(0))
			f.Set(s)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
			f.Set(reflect.ValueOf([]string{"x"}))
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Int32:
			f.Set(reflect.ValueOf([]int32{0}))
		case f.Kind() == reflect.Struct:
			fill(f)
		}
	}
}

// errorCodes returns every ErrorCode field in v, recursively.
func errorCodes(v reflect.Value) []int16 {
	var out []int16
	for i := range v.NumField() {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		switch {
		case name == "ErrorCode" && f.Kind() == reflect.Int16:
			out = append(out, int16(f.Int()))
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			for j := range f.Len() {
				out = append(out, errorCodes(f.Index(j))...)
			}
		case f.Kind() == reflect.Struct:
			out = append(out, errorCodes(f)...)
		}
	}
	return out
}

// TestProduceRefusals: what a leader refuses, and what a follower does.
func TestProduceRefusals(t *testing.T) {
	c := startCluster(t, "t", 2)
	conn, err := net.Dial("tcp", c.view.Brokers[0].Kafka)
	require.NoError(t, err)
	defer conn.Close()

	good := recordBatch(t, []byte("v"))
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-1] ^= 1
	for i, tc := range []struct {
		name      string
		partition int32
		records   []byte
		want      int16
	}{
		{"follower", 1, good, kerr.NotLeaderForPartition.Code},
		{"unknown partition", 7, good, kerr.UnknownTopicOrPartition.Code},
		{"crc mismatch", 0, corrupt, kerr.CorruptMessage.Code},
		{"truncated", 0, good[:30], kerr.CorruptMessage.Code},
		{"empty", 0, nil, kerr.InvalidRecord.Code},
		{"good", 0, good, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(9)
			req.Acks, req.TimeoutMillis = 1, 5000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = tc.partition, tc.records
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			body := rawRequest(t, conn, int32(i), req)
			resp := kmsg.NewPtrProduceResponse()
			resp.SetVersion(9)
			require.NoError(t, resp.ReadFrom(body[1:]))
			require.Equal(t, tc.want, resp.Topics[0].Partitions[0].ErrorCode)
		})
	}
	end, err := c.logs[0].EndOffset(metadata.TopicPartition{Topic: "t", Partition: 0})
	require.NoError(t, err)
	require.Equal(t, int64(1), end, "only the good batch was appended")
}

// recordBatch builds a one-record batch as a producer would.
func recordBatch(t *testing.T, value []byte) []byte {
	t.Helper()
	return buildBatch(t, testBatch{pid: -1, epoch: -1, seq: -1, timestamps: []int64{1}, value: value})
}

// testBatch describes a record batch for buildBatch: the producer's id,
// epoch and base sequence (-1 for a producer that is not idempotent), a
// record per timestamp, each with value, and the compression.
type testBatch struct {
	pid        int64
	epoch      int16
	seq        int32
	timestamps []int64
	value      []byte
	codec      kgo.CompressionCodec // zero: none
}

// buildBatch builds the batch as a producer would, compressing its
// records with kgo's own compressor.
func buildBatch(t *testing.T, tb testBatch) []byte {
	t.Helper()
	var records []byte
	maxTs := tb.timestamps[0]
	for i, ts := range tb.timestamps {
		maxTs = max(maxTs, ts)
		rec := kmsg.Record{TimestampDelta64: ts - tb.timestamps[0], OffsetDelta: int32(i), Value: tb.value}
		body := rec.AppendTo(nil)
		rec.Length = int32(len(body) - 1) // the zero length varint took one byte
		records = rec.AppendTo(records)
	}
	var attrs int16
	if comp, err := kgo.DefaultCompressor(tb.codec); err == nil && comp != nil {
		var buf bytes.Buffer
		var codec kgo.CompressionCodecType
		records, codec = comp.Compress(&buf, records)
		records = bytes.Clone(records)
		attrs = int16(codec)
	}
	rb := kmsg.RecordBatch{Magic: 2, Attributes: attrs, LastOffsetDelta: int32(len(tb.timestamps) - 1), NumRecords: int32(len(tb.timestamps)),
		FirstTimestamp: tb.timestamps[0], MaxTimestamp: maxTs, ProducerID: tb.pid, ProducerEpoch: tb.epoch, FirstSequence: tb.seq, Records: records}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[offBatchLength:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], crc32c))
	return raw
}

// TestFetchWithoutWait: a fetch with MaxWaitMillis 0 gets the records
// there are, not a storage error from a read cut short.
func TestFetchWithoutWait(t *testing.T) {
	c := startCluster(t, "t", 1)
	cl := rawClient(t, c)
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	code, _ := produceRaw(t, cl, 0, tp, recordBatch(t, []byte("v")))
	require.Zero(t, code)
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes, req.MinBytes = 0, 1<<20, 1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := cl.Broker(0).Request(t.Context(), req)
	require.NoError(t, err)
	p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	require.Zero(t, p.ErrorCode)
	require.NotEmpty(t, p.RecordBatches)
}

// TestProduceVersions: ApiVersions lists Produce from v0, as Kafka 4.0
// does for librdkafka's compression, while a Produce below v3 (whose
// message sets this broker does not read) is refused in every partition.
func TestProduceVersions(t *testing.T) {
	c := startCluster(t, "t", 1)
	var api kmsg.ApiVersionsResponse
	require.NoError(t, api.ReadFrom(rawRequestOn(t, c, kmsg.NewPtrApiVersionsRequest())))
	for _, k := range api.ApiKeys {
		if k.ApiKey == kmsg.Produce.Int16() {
			require.Equal(t, [2]int16{0, 9}, [2]int16{k.MinVersion, k.MaxVersion})
		}
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(2)
	req.Acks, req.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = recordBatch(t, []byte("v"))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(2)
	require.NoError(t, resp.ReadFrom(rawRequestOn(t, c, req)))
	require.Equal(t, kerr.UnsupportedVersion.Code, resp.Topics[0].Partitions[0].ErrorCode)
}

// FuzzParseProduced: whatever a produce request's records hold, parsing
// them ends without a panic, and a batch it accepts is one whole batch
// whose offset deltas number its records.
func FuzzParseProduced(f *testing.F) {
	t := &testing.T{}
	f.Add(recordBatch(t, []byte("v")), int16(9))
	f.Add(buildBatch(t, testBatch{pid: 7, epoch: 1, seq: 5, timestamps: []int64{1, 2}, value: []byte("v"), codec: kgo.ZstdCompression()}), int16(3))
	f.Fuzz(func(t *testing.T, records []byte, version int16) {
		pb, err := parseProduced(records, version)
		if err != nil {
			var refused *errRefused
			require.ErrorAs(t, err, &refused)
			return
		}
		require.Len(t, pb.data, len(records))
		require.Equal(t, pb.count-1, pb.lastDelta)
		require.Positive(t, pb.count)
	})
}
