package metering_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/internal/harness/memtest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metering"
	"github.com/activetier/activetier/storage"
)

// markers is a metadata message of one epoch-start marker per partition.
func markers(t *testing.T, tps ...metadata.TopicPartition) []byte {
	t.Helper()
	m := &metadata.Message{WriterBrokerID: 1}
	for _, tp := range tps {
		m.Markers = append(m.Markers, metadata.EpochStart{Partition: tp, Epoch: 1, LeaderBrokerID: 1})
	}
	b, err := metadata.AppendMessage(nil, m)
	require.NoError(t, err)
	return b
}

// A topic deleted and created again gets a new topic id under its old
// name. Its incarnations share the ledger's rows, one per partition, so
// that re-creating a topic any number of times adds none; what each
// incarnation used stays in the bill.
func TestIncarnationsShareRows(t *testing.T) {
	ctx := context.Background()
	l, err := memstore.NewLog(1)
	require.NoError(t, err)
	defer l.Close()
	m := newMeter(t)
	log := m.Log(l)
	const incarnations, partitions = 100, 3
	for i := range incarnations {
		var tps []metadata.TopicPartition
		for p := range partitions {
			tps = append(tps, metadata.TopicPartition{Topic: "reborn", TopicID: [16]byte{byte(i + 1), 0xaa}, Partition: int32(p)})
		}
		_, err := log.Append(ctx, 0, markers(t, tps...))
		require.NoError(t, err)
	}
	// A partition known by its id alone is another partition, and so is
	// one of another name with a colliding id.
	_, err = log.Append(ctx, 0, markers(t, metadata.TopicPartition{TopicID: [16]byte{1, 0xaa}, Partition: 0},
		metadata.TopicPartition{Topic: "other", TopicID: [16]byte{1, 0xaa}, Partition: 0}))
	require.NoError(t, err)

	led := m.Snapshot().Ledger
	require.Equal(t, partitions+2, len(led.Partitions), "one row per named partition, whatever its incarnations")
	for _, c := range led.Partitions[:partitions] {
		require.Equal(t, "reborn", c.Partition.Topic)
		require.Zero(t, c.Partition.TopicID, "a named row has no id: it is the name's")
		require.Positive(t, c.Share.MetadataBytes)
	}
	rest := []metadata.TopicPartition{led.Partitions[partitions].Partition, led.Partitions[partitions+1].Partition}
	require.ElementsMatch(t, []metadata.TopicPartition{{TopicID: [16]byte{1, 0xaa}}, {Topic: "other"}}, rest)
	require.InDelta(t, float64(m.Usage().MetadataBytes), led.Total().Share.MetadataBytes, 1e-6, "the bill is whole")
	require.Zero(t, led.Unattributed.Share.MetadataBytes)
}

// reseal replaces old by new (of the same length) in a metadata message
// and recomputes its checksum, as a broken or hostile writer could.
func reseal(t *testing.T, msg []byte, old, new string) []byte {
	t.Helper()
	require.Len(t, new, len(old))
	body := bytes.Replace(msg[:len(msg)-4], []byte(old), []byte(new), 1)
	return binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
}

// A partition whose topic name Kafka would refuse (here not even UTF-8)
// gets no row, whether it comes in a metadata message or in a PUT body's
// footer: its usage is unattributed, and the name reaches no report or
// metric label.
func TestInvalidTopicNamesGetNoRow(t *testing.T) {
	ctx := context.Background()
	l, err := memstore.NewLog(1)
	require.NoError(t, err)
	defer l.Close()
	local, _ := memtest.Stores(t)
	m := newMeter(t)
	const bad = "\xff\xfe(ovr)!"

	msg := reseal(t, markers(t, metadata.TopicPartition{Topic: "zzzzzzzz", Partition: 1}), "zzzzzzzz", bad)
	_, err = metadata.DecodeMessage(msg)
	require.ErrorIs(t, err, metadata.ErrInvalidTopicName)
	_, err = m.Log(l).Append(ctx, 0, msg)
	require.NoError(t, err, "the Meter forwards what it cannot read")
	_, err = m.Log(l).Read(ctx, 0, 0, 10)
	require.NoError(t, err)

	enc, err := combiner.NewEncoder(combiner.EncoderOptions{Codec: metadata.CodecNone})
	require.NoError(t, err)
	defer enc.Close()
	body, infos, err := enc.Encode(nil, []combiner.SectionInput{
		{Partition: metadata.TopicPartition{Topic: bad}, Batches: []storage.Batch{{Epoch: 1, Data: make([]byte, 100)}}},
		{Partition: tpA, Batches: []storage.Batch{{Epoch: 1, Data: make([]byte, 100)}}},
	})
	require.NoError(t, err)
	ref, err := m.Store(local).Put(ctx, "o", body)
	require.NoError(t, err)
	for _, s := range infos {
		_, err := m.Store(local).GetRange(ctx, ref, s.Position, s.Length)
		require.NoError(t, err)
	}

	s := m.Snapshot()
	require.Equal(t, int64(2), s.UndecodableMessages)
	require.Positive(t, s.Ledger.InvalidPartitions)
	for _, c := range append(s.Ledger.Partitions, s.Ledger.Topics()...) {
		if name := c.Partition.Topic; name == metering.OverflowTopic || name == metering.UnattributedTopic {
			continue
		}
		require.NoError(t, metadata.ValidateTopicName(metering.TopicName(c.Partition)), "row %q", c.Partition.Topic)
	}
	require.Len(t, s.Ledger.Partitions, 1)
	un := s.Ledger.Unattributed.Share
	require.Positive(t, un.MetadataBytes)
	require.Positive(t, un.Puts)
	require.Positive(t, un.Gets)
	u, total := m.Usage(), s.Ledger.Total().Share
	require.InDelta(t, float64(u.Puts), total.Puts, 1e-9)
	require.InDelta(t, float64(u.Gets), total.Gets, 1e-9)
	require.InDelta(t, float64(u.MetadataBytes), total.MetadataBytes, 1e-6)
}
