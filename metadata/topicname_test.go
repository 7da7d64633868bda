package metadata_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
)

func TestValidateTopicName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"orders", true},
		{"a", true},
		{"service-01.events_v2", true},
		{"...", true},
		{strings.Repeat("x", metadata.MaxTopicNameLength), true},
		{"", false},
		{".", false},
		{"..", false},
		{strings.Repeat("x", metadata.MaxTopicNameLength+1), false},
		{"wal/meta", false},
		{"a b", false},
		{"(overflow)", false},
		{"caf\u00e9", false},
		{"\xff\xfe", false},
		{"ok\x00", false},
	} {
		err := metadata.ValidateTopicName(tc.name)
		if tc.ok {
			require.NoError(t, err, "%q", tc.name)
			continue
		}
		require.ErrorIs(t, err, metadata.ErrInvalidTopicName, "%q", tc.name)
		require.Less(t, len(err.Error()), 400, "the error quotes no name of any length")
		tp := metadata.TopicPartition{Topic: tc.name, TopicID: [16]byte{1}, Partition: 0}
		if tc.name == "" {
			continue // an ID alone names the partition
		}
		err = tp.Validate()
		require.ErrorIs(t, err, metadata.ErrInvalid, "%q", tc.name)
		require.ErrorIs(t, err, metadata.ErrInvalidTopicName, "%q", tc.name)
	}
}

// reseal replaces the first occurrence of old in a version 2 or later
// message with new (of the same length) and recomputes its checksum: the
// bytes a broken or hostile writer could append to the metadata log.
func reseal(t *testing.T, msg []byte, old, new string) []byte {
	t.Helper()
	require.Len(t, new, len(old))
	body := msg[:len(msg)-4]
	i := bytes.Index(body, []byte(old))
	require.GreaterOrEqual(t, i, 0)
	out := bytes.Clone(body)
	copy(out[i:], new)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, crc32.MakeTable(crc32.Castagnoli)))
}

// A message naming a topic Kafka would refuse does not decode: the name
// would otherwise reach log lines and metric labels (an invalid UTF-8
// label value panics prometheus.MustNewConstMetric). The encoder refuses
// to write one.
func TestDecodeRefusesInvalidTopicNames(t *testing.T) {
	obj := metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: "k"}
	shapes := map[string]func(topic string) *metadata.Message{
		"entry": func(topic string) *metadata.Message {
			return &metadata.Message{Object: obj, Entries: []metadata.Entry{{
				Partition: metadata.TopicPartition{Topic: topic}, Object: obj, LastOffset: 9, Length: 10, UncompressedSize: 10}}}
		},
		"marker": func(topic string) *metadata.Message {
			return &metadata.Message{Markers: []metadata.EpochStart{{Partition: metadata.TopicPartition{Topic: topic, Partition: 3}, Epoch: 1}}}
		},
		"commit": func(topic string) *metadata.Message {
			return &metadata.Message{Commits: []metadata.Commit{{Partition: metadata.TopicPartition{Topic: topic, TopicID: [16]byte{7}}, Epoch: 1, Offset: 5}}}
		},
	}
	const placeholder = "zzzzqqqq"
	for shape, build := range shapes {
		good, err := metadata.AppendMessage(nil, build(placeholder))
		require.NoError(t, err)
		_, err = metadata.DecodeMessage(good)
		require.NoError(t, err)
		for _, bad := range []string{"\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8", "orders/1", "a b c de", "ok\x00okokk", "(ovrflw)"} {
			got, err := metadata.DecodeMessage(reseal(t, good, placeholder, bad))
			require.Nil(t, got, "%s %q", shape, bad)
			require.ErrorIs(t, err, metadata.ErrCorrupt, "%s %q", shape, bad)
			require.ErrorIs(t, err, metadata.ErrInvalidTopicName, "%s %q", shape, bad)
			require.NotErrorIs(t, err, metadata.ErrChecksum)
			var de *metadata.DecodeError
			require.ErrorAs(t, err, &de)
			require.Equal(t, "topic name", de.What)

			_, err = metadata.AppendMessage(nil, build(bad))
			require.ErrorIs(t, err, metadata.ErrInvalidTopicName, "%s %q", shape, bad)
			require.ErrorIs(t, err, metadata.ErrInvalid)
		}
	}
}
