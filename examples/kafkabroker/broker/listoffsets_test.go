package broker

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/activetier/activetier/metadata"
)

// timedBatches are batches of records with known timestamps, one batch
// per codec, some with equal timestamps and one out of order, at offsets
// 0-3, 4-7, 8-10, 11 and 12-13.
var timedBatches = []struct {
	codec      kgo.CompressionCodec
	timestamps []int64
}{
	{kgo.NoCompression(), []int64{1000, 1000, 2000, 3000}},
	{kgo.GzipCompression(), []int64{3000, 4000, 4000, 5000}},
	{kgo.SnappyCompression(), []int64{6000, 5500, 7000}},
	{kgo.Lz4Compression(), []int64{8000}},
	{kgo.ZstdCompression(), []int64{9000, 9000}},
}

// listOffsetCases: the timestamp asked and the offset and timestamp
// Kafka answers: the first record at or after it, in the first batch
// whose newest record is.
var listOffsetCases = []struct {
	name           string
	ts             int64
	offset, recTs  int64
	oldStyleOffset []int64 // v0's answer
}{
	{"before the first record", 0, 0, 1000, []int64{0}},
	{"equal to the first two", 1000, 0, 1000, []int64{0}},
	{"inside the first batch", 1001, 2, 2000, []int64{2}},
	{"the first batch's last, also the second's first", 3000, 3, 3000, []int64{3}},
	{"inside a gzip batch, equal to two", 3001, 5, 4000, []int64{5}},
	{"the gzip batch's last", 5000, 7, 5000, []int64{7}},
	{"before an out-of-order snappy batch", 5001, 8, 6000, []int64{8}},
	{"inside the out-of-order batch", 6500, 10, 7000, []int64{10}},
	{"an lz4 batch", 7001, 11, 8000, []int64{11}},
	{"a zstd batch of two equal", 9000, 12, 9000, []int64{12}},
	{"after the last record", 9001, -1, -1, nil},
	{"the newest timestamp (-3)", -3, 12, 9000, []int64{12}},
	{"the latest offset (-1)", -1, 14, -1, []int64{14}},
	{"the earliest offset (-2)", -2, 0, -1, []int64{0}},
}

// TestListOffsetsByTime: ListOffsets answers the first record at or after
// the timestamp, read inside batches of every codec, as kadm's
// ListOffsetsAfterMilli (v7) and a raw v0 request (Burrow's) see it.
func TestListOffsetsByTime(t *testing.T) {
	c := startCluster(t, "t", 1)
	cl := rawClient(t, c)
	tp := metadata.TopicPartition{Topic: "t", Partition: 0}
	for _, b := range timedBatches {
		code, _ := produceRaw(t, cl, 0, tp, buildBatch(t, testBatch{pid: -1, epoch: -1, seq: -1, timestamps: b.timestamps, value: []byte("v"), codec: b.codec}))
		require.Zero(t, code, "producing the %v batch", b.codec)
	}
	adm := kadm.NewClient(cl)
	conn, err := net.Dial("tcp", c.view.Brokers[0].Kafka)
	require.NoError(t, err)
	defer conn.Close()
	for i, tc := range listOffsetCases {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrListOffsetsRequest()
			req.SetVersion(7)
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = tc.ts
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := kmsg.NewPtrListOffsetsResponse()
			resp.SetVersion(7)
			require.NoError(t, resp.ReadFrom(rawRequest(t, conn, int32(2*i), req)[1:]))
			got := resp.Topics[0].Partitions[0]
			require.Zero(t, got.ErrorCode)
			assert.Equal(t, tc.offset, got.Offset, "offset")
			assert.Equal(t, tc.recTs, got.Timestamp, "timestamp")
			if tc.offset >= 0 {
				assert.Equal(t, int32(1), got.LeaderEpoch)
			}

			req.SetVersion(0)
			resp.SetVersion(0)
			require.NoError(t, resp.ReadFrom(rawRequest(t, conn, int32(2*i+1), req)))
			require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
			assert.Equal(t, tc.oldStyleOffset, resp.Topics[0].Partitions[0].OldStyleOffsets, "v0")

			if tc.ts >= 0 {
				listed, err := adm.ListOffsetsAfterMilli(t.Context(), tc.ts, "t")
				require.NoError(t, err)
				o, ok := listed.Lookup("t", 0)
				require.True(t, ok)
				require.NoError(t, o.Err)
				want := tc.offset
				if want < 0 {
					want = 14 // kadm answers the end for a time after the last record
				}
				assert.Equal(t, want, o.Offset, "kadm")
			}
		})
	}
}

// TestScanRecordsXerialSnappy: snappy in the Java producer's xerial
// framing (which kgo does not write), in two blocks, reads as one.
func TestScanRecordsXerialSnappy(t *testing.T) {
	plain := buildBatch(t, testBatch{pid: -1, epoch: -1, seq: -1, timestamps: []int64{10, 20, 30}, value: []byte("v")})
	records := plain[batchHeaderLen:]
	half := len(records) / 2
	framed := append(bytes.Clone(xerialMagic), 0, 0, 0, 1, 0, 0, 0, 1)
	for _, part := range [][]byte{records[:half], records[half:]} {
		block := s2.EncodeSnappy(nil, part)
		framed = binary.BigEndian.AppendUint32(framed, uint32(len(block)))
		framed = append(framed, block...)
	}
	batch := append(bytes.Clone(plain[:batchHeaderLen]), framed...)
	binary.BigEndian.PutUint16(batch[offAttributes:], compressionSnappy)
	var got []int64
	require.NoError(t, scanRecords(batch, func(delta, ts int64) bool { got = append(got, delta, ts); return true }))
	require.Equal(t, []int64{0, 10, 1, 20, 2, 30}, got)
}

// FuzzScanRecords: whatever a batch holds, reading its records ends,
// without a panic, within the decompression bound.
func FuzzScanRecords(f *testing.F) {
	t := &testing.T{}
	for _, b := range timedBatches {
		f.Add(buildBatch(t, testBatch{pid: -1, epoch: -1, seq: -1, timestamps: b.timestamps, value: []byte("value"), codec: b.codec}))
	}
	f.Fuzz(func(t *testing.T, batch []byte) {
		n := 0
		err := scanRecords(batch, func(delta, ts int64) bool { n++; return true })
		if err == nil && len(batch) >= batchHeaderLen {
			require.LessOrEqual(t, int64(n), max(readHeader(batch).count, 0))
		}
	})
}
