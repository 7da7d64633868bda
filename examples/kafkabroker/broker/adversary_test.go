package broker

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
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

// The tests in this file are a hostile or buggy client's and
// controller's: requests a well-behaved client never sends, over the wire
// or through the exported API, each checking that the broker answers as
// Kafka does and keeps serving everyone else.
// produceAcks sends one batch to broker 0 with the given acks and returns
// the partition's answer.
func produceAcks(t *testing.T, conn net.Conn, corr int32, tp metadata.TopicPartition, acks int16, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = tp.Partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	body := rawRequest(t, conn, corr, req)
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(9)
	require.NoError(t, resp.ReadFrom(body[1:]))
	return resp.Topics[0].Partitions[0]
}

// TestAdversaryInvalidAcks: acks other than 0, 1 and -1 are refused with
// INVALID_REQUIRED_ACKS, as Kafka does, and nothing is appended: a client
// asking for acks=2 must not be told its records are stored on two
// replicas when the leader acknowledged them alone.
func TestAdversaryInvalidAcks(t *testing.T) {
	c := startCluster(t, "t", 1)
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	conn, err := net.Dial("tcp", c.view.Brokers[0].Kafka)
	require.NoError(t, err)
	defer conn.Close()
	for i, acks := range []int16{2, 3, -2, 32767} {
		p := produceAcks(t, conn, int32(i), tp, acks, recordBatch(t, []byte("v")))
		require.Equal(t, kerr.InvalidRequiredAcks.Code, p.ErrorCode, "acks=%d", acks)
	}
	end, err := c.logs[0].EndOffset(tp)
	require.NoError(t, err)
	require.Zero(t, end, "a refused batch was appended")
	// And the connection still serves good requests.
	require.Zero(t, produceAcks(t, conn, 9, tp, 1, recordBatch(t, []byte("v"))).ErrorCode)
}

// TestAdversaryLargeSizePrefix: a client that announces a request of
// nearly the largest size the broker takes and then sends nothing holds
// only the bytes it sent, not the size it announced: ten of them must
// not cost the broker a gigabyte.
func TestAdversaryLargeSizePrefix(t *testing.T) {
	c := startCluster(t, "t", 1)
	const conns, size = 10, maxRequestBytes - 1
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var open []net.Conn
	defer func() {
		for _, conn := range open {
			conn.Close()
		}
	}()
	for range conns {
		conn, err := net.Dial("tcp", c.view.Brokers[0].Kafka)
		require.NoError(t, err)
		open = append(open, conn)
		hdr := binary.BigEndian.AppendUint32(nil, size)
		hdr = append(hdr, 0, 18, 0, 0, 0, 0, 0, 1) // an ApiVersions header, and no more
		_, err = conn.Write(hdr)
		require.NoError(t, err)
	}
	// Every broker still answers while those connections hang.
	var resp kmsg.ApiVersionsResponse
	require.NoError(t, resp.ReadFrom(rawRequestOn(t, c, kmsg.NewPtrApiVersionsRequest())))
	require.Zero(t, resp.ErrorCode)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew by %d MiB for %d connections announcing %d MiB each", grown>>20, conns, size>>20)
	require.Less(t, grown, int64(conns*size/4), "the broker allocated what the connections announced, not what they sent")
	// A large request that does arrive is read whole.
	conn, err := net.Dial("tcp", c.view.Brokers[0].Kafka)
	require.NoError(t, err)
	defer conn.Close()
	big := recordBatch(t, make([]byte, 3<<20))
	require.Zero(t, produceAcks(t, conn, 1, metadata.TopicPartition{Topic: "t", Partition: 0}, 1, big).ErrorCode)
}

// TestAdversaryMalformedFrames: frames no client should send (sizes below
// a header, truncated headers, negative and unknown versions, an unknown
// key, a served request whose body is garbage) get an error answer or
// close only their own connection, never a crash or a wedge: a
// connection opened before them keeps being served, on the same broker.
func TestAdversaryMalformedFrames(t *testing.T) {
	c := startCluster(t, "t", 1)
	addr := c.view.Brokers[0].Kafka
	good, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer good.Close()
	corr := int32(100)
	stillServes := func() {
		t.Helper()
		corr++
		var resp kmsg.ApiVersionsResponse
		require.NoError(t, resp.ReadFrom(rawRequest(t, good, corr, kmsg.NewPtrApiVersionsRequest())))
		require.Zero(t, resp.ErrorCode)
	}
	frame := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	header := func(key, version int16, corr int32) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, uint32(corr))
		return append(b, 0xff, 0xff) // null client id
	}
	for _, tc := range []struct {
		name   string
		frame  []byte
		answer bool // an answer with the request's correlation id, and the connection stays
	}{
		{"size zero", binary.BigEndian.AppendUint32(nil, 0), false},
		{"size below a header", frame([]byte{0, 3, 0}), false},
		{"negative size", binary.BigEndian.AppendUint32(nil, 0xffffffff), false},
		{"truncated client id", frame(append(header(3, 1, 7)[:8], 0, 50, 'x')), false},
		{"negative version of Metadata", frame(header(3, -1, 7)), true},
		{"Metadata v99", frame(header(3, 99, 7)), true},
		{"Produce v2 with a garbage body", frame(append(header(0, 2, 7), 0xde, 0xad)), true},
		{"unknown key", frame(header(1000, 0, 7)), true},
		{"negative key", frame(header(-5, 0, 7)), true},
		{"Metadata v9 with a garbage body", frame(append(header(3, 9, 7), 0x7f, 0xff, 0xff, 0xff)), false},
		{"Produce v9 claiming a huge array", frame(append(append(header(0, 9, 7), 0), 0xff, 0xff, 0xff, 0xff, 0x0f)), false},
		{"ApiVersions v3 with a garbage body", frame(append(append(header(18, 3, 7), 0), 0xff, 0xff, 0xff, 0xff, 0xff)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer conn.Close()
			require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
			_, err = conn.Write(tc.frame)
			require.NoError(t, err)
			size := make([]byte, 4)
			_, err = io.ReadFull(conn, size)
			if !tc.answer {
				require.Error(t, err, "an answer to a frame that cannot be answered")
				var ne net.Error
				require.False(t, errors.As(err, &ne) && ne.Timeout(), "the connection was neither answered nor closed")
				stillServes()
				return
			}
			require.NoError(t, err, "no answer")
			body := make([]byte, binary.BigEndian.Uint32(size))
			_, err = io.ReadFull(conn, body)
			require.NoError(t, err)
			require.Equal(t, int32(7), int32(binary.BigEndian.Uint32(body)), "correlation id")
			// The connection stays up for a good request.
			var resp kmsg.ApiVersionsResponse
			require.NoError(t, resp.ReadFrom(rawRequest(t, conn, 8, kmsg.NewPtrApiVersionsRequest())))
			stillServes()
		})
	}
}

// TestAdversaryViewTooLarge: a CreateTopics that would make the
// controller's view larger than a broker takes (POST /v1/cluster reads at
// most maxControlBody) is refused; committed, every later view, the
// elections after a broker fails included, would be refused by every
// broker. The topics that fit are created, and every broker takes the
// view.
func TestAdversaryViewTooLarge(t *testing.T) {
	var mu sync.Mutex
	var refused []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v Cluster
		if err := decodeOne(http.MaxBytesReader(w, r.Body, maxControlBody), &v); err != nil {
			mu.Lock()
			refused = append(refused, err.Error())
			mu.Unlock()
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	var view Cluster
	for id := range int32(3) {
		view.Brokers = append(view.Brokers, BrokerInfo{ID: id, AZ: fmt.Sprintf("az%d", id), Kafka: "127.0.0.1:1",
			Control: strings.TrimPrefix(srv.URL, "http://"), Incarnation: fmt.Sprint(id)})
	}
	ctl, err := NewController(view)
	require.NoError(t, err)
	defer ctl.CloseIdleConnections()
	var req TopicsRequest
	for i := range 12 {
		req.Topics = append(req.Topics, TopicRequest{Name: fmt.Sprintf("big-%02d", i), Partitions: maxPartitionsPerTopic, ReplicationFactor: 3})
	}
	answers := ctl.CreateTopics(t.Context(), req)
	created := 0
	for _, a := range answers {
		if a.Code == 0 {
			created++
		}
	}
	body, err := json.Marshal(ctl.View())
	require.NoError(t, err)
	t.Logf("%d of %d topics created; the view is %d bytes", created, len(req.Topics), len(body))
	require.LessOrEqual(t, len(body), maxControlBody, "the controller committed a view no broker takes")
	require.Less(t, created, len(req.Topics), "every topic was created")
	assert.Equal(t, kerr.InvalidPartitions.Code, answers[len(answers)-1].Code, "%s", answers[len(answers)-1].Message)
	// The brokers took the view the created topics are in.
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, refused)
}

// produceMany sends one Produce request to broker id carrying the batches
// in order, each for tp (a partition listed more than once), and returns
// each one's error code and base offset; nil for acks=0.
func produceMany(t *testing.T, cl *kgo.Client, id int32, acks int16, tp metadata.TopicPartition, batches ...[]byte) [][2]int64 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = tp.Topic
	for _, b := range batches {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = tp.Partition, b
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(int(id)).Request(t.Context(), req)
	require.NoError(t, err)
	if acks == 0 {
		return nil
	}
	var out [][2]int64
	for _, p := range resp.(*kmsg.ProduceResponse).Topics[0].Partitions {
		out = append(out, [2]int64{int64(p.ErrorCode), p.BaseOffset})
	}
	return out
}

// TestAdversaryIdempotentSequences: what a buggy idempotent producer
// sends, over the wire: sequences wrapping at MaxInt32, a producer id
// with base sequence -1 or a negative epoch, two batches of one
// partition in one request and the whole request retried, the same
// batches at acks=0 and acks=1, and epochs skipped. The log holds every
// accepted batch exactly once, at the offsets answered.
func TestAdversaryIdempotentSequences(t *testing.T) {
	c := startCluster(t, "t", 1)
	cl := rawClient(t, c)
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	pid := initProducerID(t, cl, 0)
	batch := func(pid int64, epoch int16, seq int32, n int) []byte {
		ts := make([]int64, n)
		for i := range ts {
			ts[i] = int64(1000 + i)
		}
		return buildBatch(t, testBatch{pid: pid, epoch: epoch, seq: seq, timestamps: ts, value: fmt.Appendf(nil, "%d-%d-%d", pid, epoch, seq)})
	}
	const (
		ok       = 0
		outOfSeq = int64(45)
		stale    = int64(47)
		invalid  = int64(87) // INVALID_RECORD
	)
	require.Equal(t, kerr.InvalidRecord.Code, int16(invalid))
	const top = int32(1<<31 - 1)
	steps := []struct {
		name    string
		acks    int16
		batches [][]byte
		want    [][2]int64 // code, base offset
	}{
		{"a first batch just below MaxInt32", -1, [][]byte{batch(pid, 0, top-1, 1)}, [][2]int64{{ok, 0}}},
		{"a batch of MaxInt32 and 0", -1, [][]byte{batch(pid, 0, top, 2)}, [][2]int64{{ok, 1}}},
		{"the wrapping batch's retry", -1, [][]byte{batch(pid, 0, top, 2)}, [][2]int64{{ok, 1}}},
		{"overlapping the wrapped part", -1, [][]byte{batch(pid, 0, 0, 1)}, [][2]int64{{outOfSeq, -1}}},
		{"after the wrap", 1, [][]byte{batch(pid, 0, 1, 3)}, [][2]int64{{ok, 3}}},
		{"base sequence -1 with a producer id", 1, [][]byte{batch(pid, 0, -1, 1)}, [][2]int64{{invalid, -1}}},
		{"a negative epoch", 1, [][]byte{batch(pid, -1, 5, 1)}, [][2]int64{{invalid, -1}}},
		{"two batches of the partition in one request", -1, [][]byte{batch(pid, 0, 4, 2), batch(pid, 0, 6, 1)}, [][2]int64{{ok, 6}, {ok, 8}}},
		{"that request retried", -1, [][]byte{batch(pid, 0, 4, 2), batch(pid, 0, 6, 1)}, [][2]int64{{ok, 6}, {ok, 8}}},
		{"a retry and a new batch, reordered", 1, [][]byte{batch(pid, 0, 7, 1), batch(pid, 0, 6, 1)}, [][2]int64{{ok, 9}, {ok, 8}}},
		{"a retry at acks=0", 0, [][]byte{batch(pid, 0, 7, 1)}, nil},
		{"a gap then the batch it skipped", 1, [][]byte{batch(pid, 0, 9, 1), batch(pid, 0, 8, 1)}, [][2]int64{{outOfSeq, -1}, {ok, 10}}},
		{"epochs skipped, at sequence 0", 1, [][]byte{batch(pid, 9, 0, 1)}, [][2]int64{{ok, 11}}},
		{"the epoch skipped over", 1, [][]byte{batch(pid, 5, 0, 1)}, [][2]int64{{stale, -1}}},
		{"the highest epoch", 1, [][]byte{batch(pid, 1<<15-1, 0, 1)}, [][2]int64{{ok, 12}}},
		{"another broker's producer id", 1, [][]byte{batch(initProducerID(t, cl, 2), 0, 0, 1)}, [][2]int64{{ok, 13}}},
	}
	for _, s := range steps {
		got := produceMany(t, cl, 0, s.acks, tp, s.batches...)
		for i := range got {
			if got[i][0] != ok {
				got[i][1] = -1
			}
		}
		require.Equal(t, s.want, got, s.name)
	}
	end, err := c.logs[0].EndOffset(tp)
	require.NoError(t, err)
	require.Equal(t, int64(14), end, "every accepted batch once")

	// A new leader rebuilt the same state from its log's batch headers.
	require.Eventually(t, func() bool {
		end, err := c.logs[1].EndOffset(tp)
		return err == nil && end == 14
	}, 30*time.Second, 5*time.Millisecond)
	c.moveLeader(t, tp, 1)
	for _, s := range []struct {
		name  string
		batch []byte
		want  [2]int64
	}{
		{"the last batch's retry", batch(pid, 1<<15-1, 0, 1), [2]int64{ok, 12}},
		{"the other producer's retry", steps[len(steps)-1].batches[0], [2]int64{ok, 13}},
		{"a batch of the epoch before", batch(pid, 9, 1, 1), [2]int64{stale, -1}},
		{"the next batch", batch(pid, 1<<15-1, 1, 1), [2]int64{ok, 14}},
	} {
		got := produceMany(t, cl, 1, -1, tp, s.batch)[0]
		if got[0] != ok {
			got[1] = -1
		}
		require.Equal(t, s.want, got, "at the new leader: %s", s.name)
	}
}

// initProducerIDAt sends an InitProducerId at version v to addr, on a
// connection of its own, and returns the answer.
func initProducerIDAt(t *testing.T, addr string, v int16, txnID *string) *kmsg.InitProducerIDResponse {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(v)
	req.TransactionalID = txnID
	req.ProducerID, req.ProducerEpoch = 12345, 3 // what a v3+ producer bumping its epoch sends
	body := rawRequest(t, conn, 1, req)
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.SetVersion(v)
	if resp.IsFlexible() {
		body = body[1:]
	}
	require.NoError(t, resp.ReadFrom(body))
	return resp
}

// TestAdversaryInitProducerID: InitProducerId at every version, many at
// once on every broker, and across restarts of a broker whose
// producer-ids file is kept or damaged: no id is handed out twice, each id names its broker, and a damaged file
// is an error, never a reuse. A transactional id is refused at every
// version.
func TestAdversaryInitProducerID(t *testing.T) {
	c := startCluster(t, "t", 1)
	seen := make(map[int64]string)
	var mu sync.Mutex
	take := func(addr string, broker int32, v int16, who string) {
		r := initProducerIDAt(t, addr, v, nil)
		require.Zero(t, r.ErrorCode, "%s", who)
		require.Zero(t, r.ProducerEpoch, "%s", who)
		require.Equal(t, int64(broker), r.ProducerID>>producerIDBits, "%s: the id names another broker", who)
		mu.Lock()
		defer mu.Unlock()
		if prev, dup := seen[r.ProducerID]; dup {
			t.Errorf("%s got producer id %d, which %s got", who, r.ProducerID, prev)
		}
		seen[r.ProducerID] = who
	}
	for v := range int16(5) {
		for id, b := range c.view.Brokers {
			take(b.Kafka, int32(id), v, fmt.Sprintf("v%d at broker %d", v, id))
			r := initProducerIDAt(t, b.Kafka, v, kmsg.StringPtr("txn"))
			require.Equal(t, kerr.TransactionalIDAuthorizationFailed.Code, r.ErrorCode, "a transactional id at v%d", v)
		}
	}
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Go(func() {
			id := int32(i % 3)
			take(c.view.Brokers[id].Kafka, id, 4, fmt.Sprintf("concurrent request %d at broker %d", i, id))
		})
	}
	wg.Wait()

	restart := func(damage func(path string)) *Broker {
		c.stops[0]()
		damage(filepath.Join(c.logs[0].Dir(), producerIDFile))
		return c.startBroker(t, 0, "")
	}
	b0 := restart(func(string) {})
	for i := range 1100 { // into a second block
		take(b0.Info().Kafka, 0, 4, fmt.Sprintf("request %d after a restart", i))
	}
	for _, damaged := range []string{"", "12ab\n", "-5\n", "99999999999999999999\n"} {
		b0 = restart(func(path string) { require.NoError(t, os.WriteFile(path, []byte(damaged), 0o644)) })
		r := initProducerIDAt(t, b0.Info().Kafka, 4, nil)
		require.Equal(t, kerr.UnknownServerError.Code, r.ErrorCode, "a file holding %q", damaged)
	}
	t.Logf("%d producer ids, none twice", len(seen))
}

// TestAdversaryProducerIDsDirectoryLost: a broker that lost its
// directory moments after handing out ids does not hand them out again,
// as long as it handed out fewer than producerIDsPerSecond a second
// since: the clock floor counts the fractions of a second too, so a
// restart later in the same second is not taken as no time at all.
func TestAdversaryProducerIDsDirectoryLost(t *testing.T) {
	clock := time.Date(2026, 6, 1, 12, 0, 0, int(100*time.Millisecond), time.UTC)
	now := func() time.Time { return clock }
	first, err := newProducerIDs(t.TempDir(), 3, now).allocate()
	require.NoError(t, err)
	clock = clock.Add(800 * time.Millisecond) // the same second: 204 ids later on the floor
	again, err := newProducerIDs(t.TempDir(), 3, now).allocate()
	require.NoError(t, err)
	require.Greater(t, again, first, "a broker with a new directory handed out an id it handed out 0.8 s before")
}

// listOffsetAt asks broker 0 for one partition's offset at ts, at
// version v, and returns the answer.
func listOffsetAt(t *testing.T, conn net.Conn, v int16, tp metadata.TopicPartition, ts int64, leaderEpoch int32) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(v)
	req.IsolationLevel = 1 // read_committed: the same, there being no transactions
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch, rp.MaxNumOffsets = tp.Partition, ts, leaderEpoch, 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	body := rawRequest(t, conn, 1, req)
	resp := kmsg.NewPtrListOffsetsResponse()
	resp.SetVersion(v)
	if resp.IsFlexible() {
		body = body[1:]
	}
	require.NoError(t, resp.ReadFrom(body))
	return resp.Topics[0].Partitions[0]
}

// TestAdversaryListOffsets: ListOffsets at every version on an empty
// partition, on a batch a producer marked with log append time, with
// timestamps around the records', at stale and future leader epochs, of
// a partition this broker follows and of one it does not know.
func TestAdversaryListOffsets(t *testing.T) {
	c := startCluster(t, "t", 3)
	conn, err := net.Dial("tcp", c.view.Brokers[0].Kafka)
	require.NoError(t, err)
	defer conn.Close()
	empty := metadata.TopicPartition{Topic: "t", Partition: 0} // led by broker 0
	for v := range int16(8) {
		for _, tc := range []struct {
			ts, offset, recTs int64
		}{{-1, 0, -1}, {-2, 0, -1}, {-3, -1, -1}, {0, -1, -1}, {-7, -1, -1}, {1 << 62, -1, -1}} {
			if v == 0 && tc.ts == -3 {
				continue
			}
			got := listOffsetAt(t, conn, v, empty, tc.ts, -1)
			require.Zero(t, got.ErrorCode, "v%d at %d", v, tc.ts)
			if v == 0 {
				if tc.offset < 0 {
					require.Empty(t, got.OldStyleOffsets, "v0 at %d", tc.ts)
					continue
				}
				require.Equal(t, []int64{tc.offset}, got.OldStyleOffsets, "v0 at %d", tc.ts)
				continue
			}
			require.Equal(t, [2]int64{tc.offset, tc.recTs}, [2]int64{got.Offset, got.Timestamp}, "v%d at %d", v, tc.ts)
		}
	}

	// A producer's batch with the log append time attribute: Kafka
	// gives every record the batch's max timestamp.
	cl := rawClient(t, c)
	appendTime := buildBatch(t, testBatch{pid: -1, epoch: -1, seq: -1, timestamps: []int64{-50, 100, 200}, value: []byte("v")})
	appendTime[offAttributes+1] |= attrLogAppendTime
	binary.BigEndian.PutUint32(appendTime[offCRC:], crc32.Checksum(appendTime[offAttributes:], crc32c))
	code, _ := produceRaw(t, cl, 0, empty, appendTime)
	require.Zero(t, code)
	code, _ = produceRaw(t, cl, 0, empty, buildBatch(t, testBatch{pid: -1, epoch: -1, seq: -1, timestamps: []int64{-20, 150, 150}, value: []byte("v")}))
	require.Zero(t, code)
	for _, tc := range []struct {
		name              string
		ts, offset, recTs int64
	}{
		{"a negative timestamp, below every record's", -100, 0, 200},
		{"below the append time", 199, 0, 200},
		{"the append time", 200, 0, 200},
		{"after every record", 201, -1, -1},
		{"the newest", -3, 0, 200},
		{"the end", -1, 6, -1},
	} {
		got := listOffsetAt(t, conn, 7, empty, tc.ts, -1)
		require.Zero(t, got.ErrorCode, tc.name)
		require.Equal(t, [2]int64{tc.offset, tc.recTs}, [2]int64{got.Offset, got.Timestamp}, tc.name)
	}

	for _, tc := range []struct {
		name  string
		tp    metadata.TopicPartition
		epoch int32
		want  int16
	}{
		{"a stale leader epoch", empty, 0, kerr.FencedLeaderEpoch.Code},
		{"a future leader epoch", empty, 2, kerr.UnknownLeaderEpoch.Code},
		{"the current leader epoch", empty, 1, 0},
		{"a partition it follows", metadata.TopicPartition{Topic: "t", Partition: 1}, -1, kerr.NotLeaderForPartition.Code},
		{"an unknown partition", metadata.TopicPartition{Topic: "t", Partition: 3}, -1, kerr.UnknownTopicOrPartition.Code},
		{"an unknown topic", metadata.TopicPartition{Topic: "nope", Partition: 0}, -1, kerr.UnknownTopicOrPartition.Code},
	} {
		require.Equal(t, tc.want, listOffsetAt(t, conn, 7, tc.tp, -1, tc.epoch).ErrorCode, tc.name)
	}
}

// recordValues returns the offset and value of every record in tp's log
// on broker id (its batches uncompressed).
func recordValues(t *testing.T, c *testCluster, id int, tp metadata.TopicPartition) map[int64]string {
	t.Helper()
	out := make(map[int64]string)
	for _, data := range readAll(t, c, id, tp) {
		var rb kmsg.RecordBatch
		require.NoError(t, rb.ReadFrom(data))
		require.Zero(t, rb.Attributes&attrCompression, "a compressed batch")
		rest := rb.Records
		for range rb.NumRecords {
			n, used := binary.Varint(rest)
			require.Positive(t, used)
			var r kmsg.Record
			require.NoError(t, r.ReadFrom(rest[:used+int(n)]))
			out[rb.FirstOffset+int64(r.OffsetDelta)] = string(r.Value)
			rest = rest[used+int(n):]
		}
	}
	return out
}

// TestAdversaryMembershipChurn: while kgo produces at acks=all with its
// idempotent producer, the controller is told again and again that a
// live broker failed, and registrations of a broker's run that is gone
// (a stale incarnation, refused) and of its current run a second time
// arrive, moving leaderships and in-sync sets. Every broker then rejoins,
// and every broker's log holds every acknowledged record at the offset
// it was acknowledged at, and no record twice.
func TestAdversaryMembershipChurn(t *testing.T) {
	const partitions, rounds = 3, 6
	c := startCluster(t, "t", partitions, withRegistration())
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic("t"), kgo.MetadataMinAge(10*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
	require.NoError(t, err)
	defer prod.Close()

	var mu sync.Mutex
	acked := make(map[metadata.TopicPartition]map[int64]string)
	var failed []error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// A bounded window in flight, so the test measures churn,
			// not buffering.
			var batch sync.WaitGroup
			for j := range 50 {
				batch.Add(1)
				prod.Produce(t.Context(), &kgo.Record{Value: fmt.Appendf(nil, "%06d-%02d", i, j)}, func(r *kgo.Record, err error) {
					defer batch.Done()
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						failed = append(failed, err)
						return
					}
					tp := metadata.TopicPartition{Topic: r.Topic, Partition: r.Partition}
					if acked[tp] == nil {
						acked[tp] = make(map[int64]string)
					}
					acked[tp][r.Offset] = string(r.Value)
				})
			}
			batch.Wait()
		}
	})

	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	register := func(info BrokerInfo, want int) {
		body, err := json.Marshal(info)
		require.NoError(t, err)
		resp, err := client.Post("http://"+c.view.Controller+"/v1/brokers", "application/json", strings.NewReader(string(body)))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode)
	}
	for r := range rounds {
		id := int32(r % 3)
		switch r % 3 {
		case 0:
			require.NoError(t, c.ctl.BrokerFailed(t.Context(), id))
		case 1:
			stale := c.brokers[id].Info()
			stale.Incarnation = "0" // sorts before every run's: refused
			register(stale, http.StatusConflict)
		case 2:
			register(c.brokers[id].Info(), http.StatusNoContent) // the current run, again
		}
		time.Sleep(300 * time.Millisecond) // production goes on between changes
	}
	close(stop)
	wg.Wait()
	require.Eventually(t, func() bool {
		v := c.ctl.View()
		for _, pl := range v.Topics[0].Partitions {
			if len(pl.ISR) != 3 || pl.Leader < 0 {
				return false
			}
		}
		for _, b := range c.brokers {
			if !b.Status().Registered {
				return false
			}
		}
		return len(v.Brokers) == 3
	}, 30*time.Second, 10*time.Millisecond, "not every broker rejoined")
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, failed, "records failed")
	total := 0
	for p := range int32(partitions) {
		tp := metadata.TopicPartition{Topic: "t", Partition: p}
		want := acked[tp]
		total += len(want)
		leader := c.ctl.View().Topics[0].Partitions[p].Leader
		end, err := c.logs[leader].EndOffset(tp)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			for id := range c.logs {
				if e, err := c.logs[id].EndOffset(tp); err != nil || e != end {
					return false
				}
			}
			return true
		}, 30*time.Second, 10*time.Millisecond, "the logs of %s do not converge", tp)
		for id := range c.logs {
			got := recordValues(t, c, id, tp)
			for off, v := range want {
				require.Equal(t, v, got[off], "broker %d, %s offset %d: an acknowledged record", id, tp, off)
			}
			seen := make(map[string]int64)
			for off, v := range got {
				if prev, dup := seen[v]; dup {
					t.Fatalf("broker %d, %s: record %q at offsets %d and %d", id, tp, v, prev, off)
				}
				seen[v] = off
			}
		}
	}
	t.Logf("%d records acknowledged through %d membership changes", total, rounds)
	require.Positive(t, total)
}

// TestAdversaryControlEndpoints: the control endpoints of a broker and of
// the controller answer wrong methods, malformed and oversized JSON,
// unknown fields and impossible decisions with an error, and change
// nothing: the broker leads on as before, and reports that are not an
// in-sync follower's current ones do not move its high watermark.
func TestAdversaryControlEndpoints(t *testing.T) {
	c := startCluster(t, "t", 1)
	tp := metadata.TopicPartition{Topic: "t", Partition: 0} // led by broker 0
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	send := func(method, addr, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, "http://"+addr+path, strings.NewReader(body))
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	broker, ctl := c.view.Brokers[0].Control, c.view.Controller
	huge := `[` + strings.Repeat(`{"topic":"t","partition":0},`, maxControlBody/28+1) + `{}]`
	for _, tc := range []struct {
		name, method, addr, path, body string
		want                           int
	}{
		{"GET a view", http.MethodGet, broker, "/v1/cluster", "", http.StatusMethodNotAllowed},
		{"PUT progress", http.MethodPut, broker, "/v1/progress", "[]", http.StatusMethodNotAllowed},
		{"POST status", http.MethodPost, broker, "/v1/status", "", http.StatusMethodNotAllowed},
		{"an unknown path", http.MethodPost, broker, "/v1/isr", "[]", http.StatusNotFound},
		{"a view cut short", http.MethodPost, broker, "/v1/cluster", `{"brokers":[`, http.StatusBadRequest},
		{"a view with an unknown field", http.MethodPost, broker, "/v1/cluster", `{"bogus":1}`, http.StatusBadRequest},
		{"a view of the wrong type", http.MethodPost, broker, "/v1/cluster", `[1,2]`, http.StatusBadRequest},
		{"progress past the size limit", http.MethodPost, broker, "/v1/progress", huge, http.StatusRequestEntityTooLarge},
		{"progress that is not a list", http.MethodPost, broker, "/v1/progress", `{"topic":"t"}`, http.StatusBadRequest},
		{"GET brokers", http.MethodGet, ctl, "/v1/brokers", "", http.StatusMethodNotAllowed},
		{"a registration without an incarnation", http.MethodPost, ctl, "/v1/brokers", `{"id":0,"kafka":"a:1","control":"a:2"}`, http.StatusConflict},
		{"a registration of a negative id", http.MethodPost, ctl, "/v1/brokers", `{"id":-1,"kafka":"a:1","control":"a:2","incarnation":"x"}`, http.StatusConflict},
		{"a registration with an unknown field", http.MethodPost, ctl, "/v1/brokers", `{"id":0,"admin":true}`, http.StatusBadRequest},
		{"proposals past the size limit", http.MethodPost, ctl, "/v1/isr", huge, http.StatusRequestEntityTooLarge},
		{"topics cut short", http.MethodPost, ctl, "/v1/topics", `{"topics":[{"name":`, http.StatusBadRequest},
	} {
		code, body := send(tc.method, tc.addr, tc.path, tc.body)
		require.Equal(t, tc.want, code, "%s: %s", tc.name, body)
	}

	// Views a buggy controller could send: each is refused or ignored,
	// and broker 0 leads on at epoch 1.
	post := func(v Cluster) int {
		t.Helper()
		body, err := json.Marshal(v)
		require.NoError(t, err)
		code, _ := send(http.MethodPost, broker, "/v1/cluster", string(body))
		return code
	}
	view := c.ctl.View()
	for _, tc := range []struct {
		name   string
		change func(pl *Placement)
		want   int
	}{
		{"an in-sync set without the leader", func(pl *Placement) { pl.ISR = []int32{1, 2}; pl.PartitionEpoch++ }, http.StatusConflict},
		{"an in-sync set with a broker that is no replica", func(pl *Placement) { pl.ISR = []int32{0, 1, 2, 5}; pl.PartitionEpoch++ }, http.StatusConflict},
		{"no in-sync replica", func(pl *Placement) { pl.ISR = nil; pl.PartitionEpoch++ }, http.StatusConflict},
		{"a negative epoch", func(pl *Placement) { pl.Epoch = -4 }, http.StatusConflict},
		{"a leader below -1", func(pl *Placement) { pl.Leader = -2 }, http.StatusConflict},
		{"a leader that is not a live broker", func(pl *Placement) { pl.Leader, pl.Epoch = 9, pl.Epoch+1 }, http.StatusConflict},
		{"a stale leader epoch, naming another leader", func(pl *Placement) { pl.Epoch, pl.Leader = 0, 1 }, http.StatusNoContent},
		{"a stale leader epoch, dropping the followers", func(pl *Placement) { pl.ISR, pl.Epoch = []int32{0}, 0 }, http.StatusNoContent},
	} {
		v := view.clone()
		tc.change(&v.Topics[0].Partitions[0])
		require.Equal(t, tc.want, post(v), tc.name)
		st := c.brokers[0].Status().Partitions[0]
		require.Equal(t, [2]string{"leader", "[0 1 2]"}, [2]string{st.Role, fmt.Sprint(st.ISR)}, "after %s", tc.name)
		require.Equal(t, int32(1), st.Epoch, "after %s", tc.name)
	}

	// A topic listed twice, the second time with a placement of its own
	// at a later epoch: which one would the broker follow?
	twice := view.clone()
	again := twice.Topics[0]
	again.Partitions = slices.Clone(again.Partitions)
	again.Partitions[0].Leader, again.Partitions[0].Epoch = 1, 5
	twice.Topics = append(twice.Topics, again)
	require.Equal(t, http.StatusConflict, post(twice), "a view listing a topic twice")
	st := c.brokers[0].Status().Partitions[0]
	require.Equal(t, [2]string{"leader", "1"}, [2]string{st.Role, fmt.Sprint(st.Epoch)}, "after a view listing a topic twice")

	// Broker 2 stops: the high watermark stays where it is, whatever
	// reports that are not broker 2's current ones claim.
	cl := rawClient(t, c)
	code, _ := produceRaw(t, cl, 0, tp, recordBatch(t, []byte("acked")))
	require.Zero(t, code)
	c.stops[2]()
	hw := c.brokers[0].Status().Partitions[0].HW
	require.Equal(t, int64(1), hw)
	conn, err := net.Dial("tcp", c.view.Brokers[0].Kafka)
	require.NoError(t, err)
	defer conn.Close()
	require.Zero(t, produceAcks(t, conn, 1, tp, 1, recordBatch(t, []byte("not acked by all"))).ErrorCode)
	reports := []ProgressReport{
		{Topic: "t", Partition: 0, Follower: 7, Incarnation: "x", Epoch: 1, EndOffset: 1000, LastEpoch: 1}, // no replica
		{Topic: "t", Partition: 0, Follower: 0, Incarnation: "x", Epoch: 1, EndOffset: 1000, LastEpoch: 1}, // the leader itself
		{Topic: "t", Partition: 0, Follower: 2, Incarnation: "x", Epoch: 0, EndOffset: 1000, LastEpoch: 1}, // a stale leader epoch
		{Topic: "t", Partition: 0, Follower: 2, Incarnation: "x", Epoch: 2, EndOffset: 1000, LastEpoch: 2}, // a future one
		{Topic: "t", Partition: 0, Follower: 2, Incarnation: "x", Epoch: 1, EndOffset: -50, LastEpoch: 1},  // a negative end
		{Topic: "t", Partition: 0, Follower: 2, Incarnation: "x", Epoch: 1, EndOffset: 2, LastEpoch: 9},    // an epoch the leader never had
		{Topic: "t", Partition: 9, Follower: 2, Incarnation: "x", Epoch: 1, EndOffset: 1000, LastEpoch: 1}, // no such partition
		{Topic: "", Partition: -1, Follower: -1, Incarnation: "", Epoch: -1, EndOffset: -1, LastEpoch: -1}, // nothing
	}
	body, err := json.Marshal(reports)
	require.NoError(t, err)
	status, answer := send(http.MethodPost, broker, "/v1/progress", string(body))
	require.Equal(t, http.StatusOK, status, answer)
	var answers []ProgressAnswer
	require.NoError(t, json.Unmarshal([]byte(answer), &answers))
	require.Len(t, answers, len(reports))
	for i, a := range answers {
		require.LessOrEqual(t, a.HW, hw, "report %d: %+v", i, reports[i])
	}
	require.Equal(t, hw, c.brokers[0].Status().Partitions[0].HW, "the high watermark moved past what broker 2 holds")
	lo := listOffsetAt(t, conn, 7, tp, -1, -1)
	require.Equal(t, hw, lo.Offset, "ListOffsets latest")
}

// TestAdversaryCreateTopics: names, counts, replication factors and
// replica assignments a buggy admin client sends, at every CreateTopics
// version, each refused with Kafka's error, and nothing of a refused
// topic created; a legal one at each version is created.
func TestAdversaryCreateTopics(t *testing.T) {
	c := startCluster(t, "t", 1)
	assign := func(replicas ...[]int32) []kmsg.CreateTopicsRequestTopicReplicaAssignment {
		var out []kmsg.CreateTopicsRequestTopicReplicaAssignment
		for p, r := range replicas {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = int32(p), r
			out = append(out, a)
		}
		return out
	}
	renumber := func(as []kmsg.CreateTopicsRequestTopicReplicaAssignment, ps ...int32) []kmsg.CreateTopicsRequestTopicReplicaAssignment {
		for i := range as {
			as[i].Partition = ps[i]
		}
		return as
	}
	for _, tc := range []struct {
		name       string
		topic      string
		partitions int32
		rf         int16
		assignment []kmsg.CreateTopicsRequestTopicReplicaAssignment
		want       int16
	}{
		{"an empty name", "", 1, 1, nil, kerr.InvalidTopicException.Code},
		{"a name of '.'", ".", 1, 1, nil, kerr.InvalidTopicException.Code},
		{"a name of '..'", "..", 1, 1, nil, kerr.InvalidTopicException.Code},
		{"a non-ASCII name", "tópico", 1, 1, nil, kerr.InvalidTopicException.Code},
		{"a name with a NUL", "a\x00b", 1, 1, nil, kerr.InvalidTopicException.Code},
		{"a name with a space", "a b", 1, 1, nil, kerr.InvalidTopicException.Code},
		{"a name of 250 bytes", strings.Repeat("y", 250), 1, 1, nil, kerr.InvalidTopicException.Code},
		{"negative partitions", "neg", -5, 1, nil, kerr.InvalidPartitions.Code},
		{"MaxInt32 partitions", "maxp", 1<<31 - 1, 1, nil, kerr.InvalidPartitions.Code},
		{"a negative replication factor", "negrf", 1, -5, nil, kerr.InvalidReplicationFactor.Code},
		{"the largest replication factor", "maxrf", 1, 1<<15 - 1, nil, kerr.InvalidReplicationFactor.Code},
		{"an assignment and a count", "both", 2, -1, assign([]int32{0}), kerr.InvalidRequest.Code},
		{"an assignment skipping a partition", "gap", -1, -1, renumber(assign([]int32{0}, []int32{1}), 0, 2), kerr.InvalidReplicaAssignment.Code},
		{"an assignment listing a partition twice", "twice", -1, -1, renumber(assign([]int32{0}, []int32{1}), 0, 0), kerr.InvalidReplicaAssignment.Code},
		{"an assignment of a negative partition", "negp", -1, -1, renumber(assign([]int32{0}), -1), kerr.InvalidReplicaAssignment.Code},
		{"an assignment with no replicas", "none", -1, -1, assign([]int32{}), kerr.InvalidReplicaAssignment.Code},
		{"an assignment naming a broker twice", "dupb", -1, -1, assign([]int32{1, 1}), kerr.InvalidReplicaAssignment.Code},
		{"an assignment naming an unknown broker", "unknownb", -1, -1, assign([]int32{0, 9}), kerr.InvalidReplicaAssignment.Code},
		{"an assignment of a negative broker", "negb", -1, -1, assign([]int32{-1}), kerr.InvalidReplicaAssignment.Code},
		{"an assignment of unequal lengths", "uneven", -1, -1, assign([]int32{0, 1}, []int32{2}), kerr.InvalidReplicaAssignment.Code},
	} {
		for v := range int16(8) {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.SetVersion(v)
			req.TimeoutMillis = 10_000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor, rt.ReplicaAssignment = tc.topic, tc.partitions, tc.rf, tc.assignment
			if v < 4 && tc.partitions == -1 && tc.assignment == nil {
				continue // -1 for the default is v4's
			}
			req.Topics = append(req.Topics, rt)
			resp := kmsg.NewPtrCreateTopicsResponse()
			resp.SetVersion(v)
			body := rawRequestOn(t, c, req)
			if resp.IsFlexible() {
				body = body[1:]
			}
			require.NoError(t, resp.ReadFrom(body), "%s at v%d", tc.name, v)
			require.Len(t, resp.Topics, 1)
			require.Equal(t, tc.want, resp.Topics[0].ErrorCode, "%s at v%d", tc.name, v)
		}
	}
	for v := range int16(8) {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(v)
		req.TimeoutMillis = 10_000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("legal.name_%d-%s", v, strings.Repeat("z", 200)), 2, 2
		req.Topics = append(req.Topics, rt)
		resp := kmsg.NewPtrCreateTopicsResponse()
		resp.SetVersion(v)
		body := rawRequestOn(t, c, req)
		if resp.IsFlexible() {
			body = body[1:]
		}
		require.NoError(t, resp.ReadFrom(body))
		require.Zero(t, resp.Topics[0].ErrorCode, "a legal topic at v%d", v)
	}
	view := c.ctl.View()
	require.Len(t, view.Topics, 9, "only the legal topics were created")
	for _, b := range c.brokers {
		_, topics := b.clusterView()
		require.Len(t, topics, 9, "broker %d", b.cfg.ID)
	}
}

// TestAdversaryFetchMaxBytes: a consumer asking for MaxInt32 bytes gets
// at most the broker's MaxFetchBytes (Kafka's fetch.max.bytes), not the
// whole log read into memory for one answer; a batch larger than that
// still comes whole when it is the first, as in Kafka (KIP-74).
func TestAdversaryFetchMaxBytes(t *testing.T) {
	const limit = 64 << 10
	c := startCluster(t, "t", 1, withMaxFetchBytes(limit))
	cl := rawClient(t, c)
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	code, _ := produceRaw(t, cl, 0, tp, recordBatch(t, make([]byte, 3*limit)))
	require.Zero(t, code)
	for range 20 {
		code, _ := produceRaw(t, cl, 0, tp, recordBatch(t, make([]byte, limit/8)))
		require.Zero(t, code)
	}
	fetch := func(offset int64) []byte {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MaxBytes, req.MinBytes = 0, 1<<31-1, 1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "t"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.FetchOffset, fp.PartitionMaxBytes = offset, 1<<31-1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := cl.Broker(0).Request(t.Context(), req)
		require.NoError(t, err)
		p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		require.Zero(t, p.ErrorCode)
		return p.RecordBatches
	}
	first := fetch(0)
	require.Equal(t, len(recordBatch(t, make([]byte, 3*limit))), len(first), "the first batch, larger than the limit, whole and alone")
	rest := fetch(1)
	require.NotEmpty(t, rest)
	require.LessOrEqual(t, len(rest), limit, "an answer past MaxFetchBytes")
}

// TestAdversaryUnreadResponses: a client that pipelines fetches of a
// large batch and never reads the answers fills its own connection, not
// the broker: other clients produce at acks=all and fetch meanwhile, and
// the broker lets go of the connection once the client closes it.
func TestAdversaryUnreadResponses(t *testing.T) {
	c := startCluster(t, "t", 1)
	cl := rawClient(t, c)
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	code, _ := produceRaw(t, cl, 0, tp, recordBatch(t, make([]byte, 1<<20)))
	require.Zero(t, code)

	hog, err := net.Dial("tcp", c.view.Brokers[0].Kafka)
	require.NoError(t, err)
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.MaxWaitMillis, req.MaxBytes, req.MinBytes = 0, 4<<20, 1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 4 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	var frames []byte
	for corr := range int32(4 * pipelineDepth) {
		buf := []byte{0, 0, 0, 0}
		buf = binary.BigEndian.AppendUint16(buf, uint16(req.Key()))
		buf = binary.BigEndian.AppendUint16(buf, uint16(req.GetVersion()))
		buf = binary.BigEndian.AppendUint32(buf, uint32(corr))
		buf = append(buf, 0xff, 0xff, 0) // null client id, no tags
		buf = req.AppendTo(buf)
		binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
		frames = append(frames, buf...)
	}
	_, err = hog.Write(frames) // the answers, 64 MiB, are never read
	require.NoError(t, err)

	for i := range 20 {
		code, base := produceRaw(t, cl, 0, tp, recordBatch(t, []byte("v")))
		require.Zero(t, code)
		require.Equal(t, int64(1+i), base)
	}
	consumePartition(t, c, tp, 21)
	require.NoError(t, hog.Close())
	// The broker serves on; its goroutines for the hog end with the
	// test's, which goleak checks.
	require.Zero(t, produceAcks(t, dial(t, c.view.Brokers[0].Kafka), 1, tp, -1, recordBatch(t, []byte("after"))).ErrorCode)
}

// dial connects to addr for the rest of the test.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestAdversaryLargeRegistration: registrations that would make the view
// larger than a broker reads (here, two of 9 MB rack names) are refused,
// as topic creations that would are: committed, every broker would
// refuse every later view.
func TestAdversaryLargeRegistration(t *testing.T) {
	c := startCluster(t, "t", 1)
	for id := int32(7); id < 9; id++ {
		info := c.brokers[0].Info()
		info.ID, info.AZ, info.Incarnation = id, strings.Repeat("z", 9<<20), "big"
		_ = c.ctl.Register(t.Context(), info) // a broker that cannot take the view is an error too
	}
	body, err := json.Marshal(c.ctl.View())
	require.NoError(t, err)
	require.LessOrEqual(t, len(body), maxControlBody, "the controller committed a view no broker takes")
	// Views go on reaching every broker.
	require.NoError(t, c.ctl.BrokerFailed(t.Context(), 2))
	st := c.brokers[1].Status()
	require.Equal(t, "[0 1]", fmt.Sprint(st.Partitions[0].ISR), "broker 1 did not get the view after the refused registrations")
}

// TestAdversaryEveryRequest: every request kmsg knows, at every version,
// with an element named "x" in every list and with none, and with every
// number -1 (a timeout, a partition, an offset, a count), gets an answer
// that parses, on one connection that stays up: neither a handler nor
// the reflection that fills the answers of requests the broker does not
// serve panics (which would end the process) on versions and contents
// the other tests do not reach.
func TestAdversaryEveryRequest(t *testing.T) {
	c := startCluster(t, "t", 1)
	conn := dial(t, c.view.Brokers[0].Kafka)
	corr := int32(0)
	for key := range int16(100) {
		proto := kmsg.RequestForKey(key)
		if proto == nil {
			continue
		}
		for v := int16(0); v <= proto.MaxVersion(); v++ {
			for filled := range 3 {
				req := kmsg.RequestForKey(key)
				req.SetVersion(v)
				if filled > 0 {
					fill(reflect.ValueOf(req).Elem())
				}
				if filled > 1 {
					negate(reflect.ValueOf(req).Elem())
				}
				if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
					p.Acks = 1 // acks=0 has no answer to wait for
				}
				corr++
				body := rawRequest(t, conn, corr, req)
				resp := req.ResponseKind()
				resp.SetVersion(v)
				switch {
				case key == kmsg.ApiVersions.Int16() && !versionSupported(key, v):
					resp.SetVersion(0) // as Kafka answers a version it does not know
				case key == kmsg.ApiVersions.Int16():
					// Its response header is never flexible.
				case resp.IsFlexible():
					body = body[1:]
				}
				require.NoError(t, resp.ReadFrom(body), "%s v%d", kmsg.NameForKey(key), v)
			}
		}
	}
	t.Logf("%d requests answered", corr)
}

// negate sets every integer in v, recursively, to -1, but its version.
func negate(v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() || v.Type().Field(i).Name == "Version" {
			continue
		}
		switch f.Kind() {
		case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(-1)
		case reflect.Slice:
			if f.Type().Elem().Kind() == reflect.Struct {
				for j := range f.Len() {
					negate(f.Index(j))
				}
			}
		case reflect.Struct:
			negate(f)
		}
	}
}

// TestAdversaryStaleRegistration: a registration carrying the incarnation
// of a broker's run that is gone (older than the live run's, a delayed or
// replayed request) is refused with a conflict and changes nothing: the
// live run stays in every in-sync set and keeps its leaderships. A later
// run's registration still fails the live one first, as a restart the
// controller did not notice does.
func TestAdversaryStaleRegistration(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	now := time.Now()
	older, live := newIncarnation(now.Add(-time.Hour)), newIncarnation(now)
	require.Less(t, older, live)
	all := []int32{0, 1, 2}
	view := threeBrokers(Placement{Leader: 0, Epoch: 3, Replicas: all, ISR: all, PartitionEpoch: 5}, all...)
	for i := range view.Brokers {
		view.Brokers[i].Control = addr
	}
	view.Brokers[0].Incarnation = live
	ctl, err := NewController(view)
	require.NoError(t, err)
	defer ctl.CloseIdleConnections()
	api := httptest.NewServer(ctl.Handler())
	defer api.Close()

	stale := view.Brokers[0]
	stale.Incarnation = older
	err = ctl.Register(t.Context(), stale)
	require.ErrorIs(t, err, ErrStaleIncarnation)
	body, err := json.Marshal(stale)
	require.NoError(t, err)
	resp, err := http.Post(api.URL+"/v1/brokers", "application/json", strings.NewReader(string(body)))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
	assert.Equal(t, view, ctl.View(), "a stale registration changed the view")

	later := view.Brokers[0]
	later.Incarnation = newIncarnation(now.Add(time.Second))
	require.NoError(t, ctl.Register(t.Context(), later))
	pl := ctl.View().Topics[0].Partitions[0]
	assert.Equal(t, []int32{1, 2}, pl.ISR, "a restart the controller did not notice fails the run before it")
	assert.Equal(t, int32(1), pl.Leader)
}

// TestAdversaryHungBroker: a broker that accepts the controller's
// connection but never answers delays no other broker's view: the
// controller posts to every broker at once, each post bounded on its
// own. Broker 0 is listed first and hangs until the test ends; broker 1
// must get the view while broker 0's post is still waiting (the test
// waits 10 s for it, a third of the 30 s a post to broker 0 may take).
func TestAdversaryHungBroker(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hung.Close()
	unhang := sync.OnceFunc(func() { close(release) })
	defer unhang() // before hung.Close, which waits for the handler
	got := make(chan Cluster, 1)
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v Cluster
		if err := decodeOne(http.MaxBytesReader(w, r.Body, maxControlBody), &v); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case got <- v:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer live.Close()
	var view Cluster
	for id, srv := range []*httptest.Server{hung, live} {
		view.Brokers = append(view.Brokers, BrokerInfo{ID: int32(id), AZ: fmt.Sprintf("az%d", id), Kafka: "127.0.0.1:1",
			Control: strings.TrimPrefix(srv.URL, "http://"), Incarnation: fmt.Sprint(id)})
	}
	ctl, err := NewController(view)
	require.NoError(t, err)
	defer ctl.CloseIdleConnections()

	done := make(chan error, 1)
	go func() {
		done <- ctl.Update(t.Context(), func(v *Cluster) {
			v.Topics = append(v.Topics, PlaceTopic("t", 1, 2, v.Brokers))
		})
	}()
	select {
	case v := <-got:
		require.Len(t, v.Topics, 1, "broker 1 got a view without the change")
	case err := <-done:
		t.Fatalf("the update returned (%v) before broker 1 got the view", err)
	case <-time.After(10 * time.Second):
		t.Fatal("broker 1 did not get the view while broker 0 hung")
	}
	unhang()
	require.NoError(t, <-done)
}
