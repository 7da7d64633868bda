package metering_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/internal/harness/memtest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metering"
	"github.com/activetier/activetier/storage"
)

var (
	tpA = metadata.TopicPartition{Topic: "a", Partition: 0}
	tpB = metadata.TopicPartition{Topic: "b", Partition: 7}
)

// object encodes a combined object with one section per partition, each
// of the given payload size, uncompressed, and returns it with its
// sections.
func object(t testing.TB, sizes map[metadata.TopicPartition]int) ([]byte, []combiner.SectionInfo) {
	t.Helper()
	enc, err := combiner.NewEncoder(combiner.EncoderOptions{Codec: metadata.CodecNone})
	require.NoError(t, err)
	defer enc.Close()
	var in []combiner.SectionInput
	for _, tp := range []metadata.TopicPartition{tpA, tpB} {
		if n, ok := sizes[tp]; ok {
			in = append(in, combiner.SectionInput{Partition: tp,
				Batches: []storage.Batch{{Epoch: 1, FirstOffset: 0, LastOffset: 0, Data: make([]byte, n)}}})
		}
	}
	body, infos, err := enc.Encode(nil, in)
	require.NoError(t, err)
	return body, infos
}

func row(l metering.Ledger, tp metadata.TopicPartition) costmodel.Share {
	for _, c := range l.Partitions {
		if c.Partition == tp {
			return c.Share
		}
	}
	return costmodel.Share{}
}

func TestPutAndGetAttribution(t *testing.T) {
	ctx := context.Background()
	local, _ := memtest.Stores(t)
	m := newMeter(t)
	s := m.Store(local)
	body, infos := object(t, map[metadata.TopicPartition]int{tpA: 1000, tpB: 3000})
	ref, err := s.Put(ctx, "k1", body)
	require.NoError(t, err)

	l := m.Snapshot().Ledger
	a, b := row(l, tpA), row(l, tpB)
	wA := float64(infos[0].Length) / float64(infos[0].Length+infos[1].Length)
	require.InDelta(t, wA, a.Puts, 1e-12)
	require.InDelta(t, 1-wA, b.Puts, 1e-12)
	require.InDelta(t, float64(len(body)), a.BytesUp+b.BytesUp, 1e-6, "header and footer bytes go with the sections")

	for _, tc := range []struct {
		name       string
		off, n     int64
		wantA      float64 // share of the GET attributed to tpA
		unassigned bool
	}{
		{"section A", infos[0].Position, infos[0].Length, 1, false},
		{"section B", infos[1].Position, infos[1].Length, 0, false},
		{"both, coalesced", infos[0].Position, infos[0].Length + infos[1].Length, wA, false},
		{"half of A and all of B", infos[0].Position + infos[0].Length/2, infos[0].Length - infos[0].Length/2 + infos[1].Length,
			float64(infos[0].Length-infos[0].Length/2) / float64(infos[0].Length-infos[0].Length/2+infos[1].Length), false},
		{"the footer only", int64(len(body)) - 8, 8, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := m.Snapshot().Ledger
			got, err := s.GetRange(ctx, ref, tc.off, tc.n)
			require.NoError(t, err)
			after := m.Snapshot().Ledger
			dA := row(after, tpA).Gets - row(before, tpA).Gets
			dB := row(after, tpB).Gets - row(before, tpB).Gets
			dU := after.Unattributed.Share.Gets - before.Unattributed.Share.Gets
			if tc.unassigned {
				require.Equal(t, 1.0, dU)
				require.Zero(t, dA+dB)
				return
			}
			require.InDelta(t, tc.wantA, dA, 1e-12)
			require.InDelta(t, 1-tc.wantA, dB, 1e-12)
			bytesA := row(after, tpA).BytesDown - row(before, tpA).BytesDown
			bytesB := row(after, tpB).BytesDown - row(before, tpB).BytesDown
			require.InDelta(t, float64(len(got)), bytesA+bytesB, 1e-6)
		})
	}

	// Once deleted, the object's layout is forgotten: a later GET (of a
	// missing object) has no partition.
	require.NoError(t, s.Delete(ctx, []metadata.ObjectRef{ref}))
	_, err = s.GetRange(ctx, ref, infos[0].Position, infos[0].Length)
	require.ErrorIs(t, err, storage.ErrNotFound)
	snap := m.Snapshot()
	require.Equal(t, 1.0, snap.Ledger.Unattributed.Share.Gets-1, "the footer GET and the missing object's")
	require.Equal(t, uint64(1), snap.Store[1].Errors[metering.KindNotFound])
}

// A follower's Meter sees no PUT: it learns the layout from the metadata
// entries it reads, and attributes its GETs by them.
func TestFollowerLearnsLayoutFromMetadata(t *testing.T) {
	ctx := context.Background()
	local, peer := memtest.Stores(t)
	body, infos := object(t, map[metadata.TopicPartition]int{tpA: 500, tpB: 1500})
	ref, err := local.Put(ctx, "k1", body)
	require.NoError(t, err)

	log, err := memstore.NewLog(2)
	require.NoError(t, err)
	defer log.Close()
	msg := &metadata.Message{Object: ref, WriterBrokerID: 1, Markers: []metadata.EpochStart{{Partition: tpA, Epoch: 1, LeaderBrokerID: 1}}}
	for _, in := range infos {
		msg.Entries = append(msg.Entries, metadata.Entry{Partition: in.Partition, RecordEpoch: 1, PublisherEpoch: 1,
			FirstOffset: in.FirstOffset, LastOffset: in.LastOffset, Object: ref, Position: in.Position, Length: in.Length,
			Codec: in.Codec, UncompressedSize: in.UncompressedSize, Checksum: in.Checksum, WriterBrokerID: 1})
	}
	value, err := metadata.AppendMessage(nil, msg)
	require.NoError(t, err)
	_, err = log.Append(ctx, 1, value)
	require.NoError(t, err)

	m := newMeter(t)
	recs, err := m.Log(log).Read(ctx, 1, 0, 10)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	_, err = m.Store(peer).GetRange(ctx, ref, infos[1].Position, infos[1].Length)
	require.NoError(t, err)

	l := m.Snapshot().Ledger
	require.Equal(t, 1.0, row(l, tpB).Gets)
	require.Zero(t, row(l, tpA).Gets)
	require.Equal(t, costmodel.Share{}, l.Unattributed.Share)
	// The message's bytes, read once, split among two entries and a marker.
	third := float64(len(value)) / 3
	require.InDelta(t, 2*third, row(l, tpA).MetadataBytes, 1e-9)
	require.InDelta(t, third, row(l, tpB).MetadataBytes, 1e-9)
	require.Equal(t, float64(costmodel.DefaultControlBytesPerPartition), row(l, tpB).ControlBytes)
}

// What is not a combined object, or not a metadata message, is kept as
// unattributed, so that the ledger still adds up to the bill.
func TestUnattributed(t *testing.T) {
	ctx := context.Background()
	local, _ := memtest.Stores(t)
	log, err := memstore.NewLog(1)
	require.NoError(t, err)
	defer log.Close()
	m := newMeter(t)
	_, err = m.Store(local).Put(ctx, "junk", []byte("not a combined object"))
	require.NoError(t, err)
	_, err = m.Log(log).Append(ctx, 0, []byte("not a message"))
	require.NoError(t, err)
	s := m.Snapshot()
	require.Equal(t, costmodel.Share{Puts: 1, BytesUp: 21, MetadataBytes: 13 * costmodel.DefaultMetadataRF}, s.Ledger.Unattributed.Share)
	require.Equal(t, int64(1), s.UnreadablePutBodies)
	require.Equal(t, int64(1), s.UndecodableMessages)
	require.Empty(t, s.Ledger.Partitions)
	require.Equal(t, []metering.Charge{s.Ledger.Unattributed}, s.Ledger.Topics())
}

// errStore fails every call with its error, as a broken dependency would.
type errStore struct {
	storage.ObjectStore
	err error
}

func (e errStore) Put(context.Context, string, []byte) (metadata.ObjectRef, error) {
	return metadata.ObjectRef{}, e.err
}

func (e errStore) GetRange(context.Context, metadata.ObjectRef, int64, int64) ([]byte, error) {
	return nil, e.err
}

// Errors pass through unchanged (errors.Is and the message) and are counted
// by kind; calls refused before any request are not requests.
func TestErrorsByKind(t *testing.T) {
	ctx := context.Background()
	local, _ := memtest.Stores(t)
	for _, tc := range []struct {
		err  error
		kind metering.ErrorKind
	}{
		{storage.ErrUnavailable, metering.KindUnavailable},
		{storage.ErrPermanent, metering.KindPermanent},
		{storage.ErrAlreadyExists, metering.KindAlreadyExists},
		{errors.New("a store breaking its contract"), metering.KindOther},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			m := newMeter(t)
			s := m.Store(errStore{local, tc.err})
			_, err := s.Put(ctx, "k", []byte("x"))
			require.Same(t, tc.err, err)
			_, err = s.GetRange(ctx, metadata.ObjectRef{Bucket: "b1", Key: "k"}, 0, 1)
			require.Same(t, tc.err, err)
			snap := m.Snapshot()
			require.Equal(t, map[metering.ErrorKind]uint64{tc.kind: 1}, snap.Store[0].Errors)
			require.Equal(t, map[metering.ErrorKind]uint64{tc.kind: 1}, snap.Store[1].Errors)
			require.Equal(t, uint64(1), snap.Store[0].Latency.Count)
		})
	}
	t.Run("refused before any request", func(t *testing.T) {
		m := newMeter(t)
		s := m.Store(local)
		_, err := s.GetRange(ctx, metadata.ObjectRef{Bucket: "nowhere", Key: "k"}, 0, 1)
		require.ErrorIs(t, err, storage.ErrUnknownBucket)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err = s.Put(cctx, "k", []byte("x"))
		require.Error(t, err)
		u := m.Usage()
		require.Zero(t, u.Puts+u.Gets)
	})
}

// Memory is bounded: partitions beyond MaxPartitions share the overflow
// row, and only MaxObjects layouts are kept.
func TestBounds(t *testing.T) {
	ctx := context.Background()
	local, _ := memtest.Stores(t)
	m, err := metering.New(metering.Config{Prices: costmodel.S3Express2025(), MaxPartitions: 1, MaxObjects: 1})
	require.NoError(t, err)
	s := m.Store(local)
	body, infos := object(t, map[metadata.TopicPartition]int{tpA: 100, tpB: 100})
	ref1, err := s.Put(ctx, "k1", body)
	require.NoError(t, err)
	_, err = s.Put(ctx, "k2", body)
	require.NoError(t, err)
	l := m.Snapshot().Ledger
	require.Len(t, l.Partitions, 1)
	require.InDelta(t, 1.0, l.Overflow.Share.Puts, 1e-12)
	// k1's layout was forgotten when k2's was kept.
	_, err = s.GetRange(ctx, ref1, infos[0].Position, infos[0].Length)
	require.NoError(t, err)
	require.Equal(t, 1.0, m.Snapshot().Ledger.Unattributed.Share.Gets)
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []metering.Config{
		{},
		{Prices: costmodel.S3Express2025(), MaxObjects: -1},
		{Prices: costmodel.S3Express2025(), NoMetadataCrossings: true, MetadataReadCrossings: 2},
	} {
		_, err := metering.New(cfg)
		require.ErrorIs(t, err, metering.ErrInvalidConfig)
	}
	_, err := metering.New(metering.Config{Prices: costmodel.S3Express2025(), NoMetadataCrossings: true})
	require.NoError(t, err)
}

// A ReadRange is the GET it is: counted, its bytes downloaded, and
// attributed to the sections it covers, as GetRange's.
func TestReadRangeIsMetered(t *testing.T) {
	ctx := context.Background()
	local, _ := memtest.Stores(t)
	viaGet, viaRead := newMeter(t), newMeter(t)
	body, infos := object(t, map[metadata.TopicPartition]int{tpA: 1000, tpB: 3000})
	getRef, err := viaGet.Store(local).Put(ctx, "k1", body)
	require.NoError(t, err)
	readRef, err := viaRead.Store(local).Put(ctx, "k2", body)
	require.NoError(t, err)
	rr, ok := viaRead.Store(local).(storage.RangeReader)
	require.True(t, ok, "memstore's Store is a RangeReader, and so is the metered one")
	for _, s := range infos {
		_, err := viaGet.Store(local).GetRange(ctx, getRef, s.Position, s.Length)
		require.NoError(t, err)
		dst := make([]byte, s.Length)
		n, err := rr.ReadRange(ctx, readRef, s.Position, dst)
		require.NoError(t, err)
		require.Equal(t, int(s.Length), n)
	}
	missing := metadata.ObjectRef{Bucket: "b1", Key: "missing"}
	_, err = rr.ReadRange(ctx, missing, 0, make([]byte, 1))
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = viaGet.Store(local).GetRange(ctx, missing, 0, 1)
	require.ErrorIs(t, err, storage.ErrNotFound)

	g, r := viaGet.Snapshot(), viaRead.Snapshot()
	for i := range g.Store {
		require.Equal(t, g.Store[i].Requests, r.Store[i].Requests, "%s requests", g.Store[i].Op)
		require.Equal(t, g.Store[i].Errors, r.Store[i].Errors, "%s errors", g.Store[i].Op)
	}
	require.Equal(t, g.BytesDown, r.BytesDown)
	require.Equal(t, row(g.Ledger, tpA), row(r.Ledger, tpA))
	require.Equal(t, row(g.Ledger, tpB), row(r.Ledger, tpB))
	require.Equal(t, g.Ledger.Unattributed.Share, r.Ledger.Unattributed.Share)
}
