package metadata

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCommitsRoundTrip: commits come back in canonical order with the
// entries and markers they ride with, a message that has commits is
// written as version 3, or 4 when it also has markers, and the version 3
// encoding of one with markers decodes to the same message.
func TestCommitsRoundTrip(t *testing.T) {
	orders := func(p int32) TopicPartition { return TopicPartition{Topic: "orders", Partition: p} }
	for _, tc := range []struct {
		name string
		m    *Message
	}{
		{"with entries", func() *Message {
			m := typicalMessage(rand.New(rand.NewPCG(3, 4)), 3, 0)
			m.Commits = []Commit{{Partition: orders(2), Epoch: 7, Offset: 10}, {Partition: orders(0), Epoch: 7, Offset: 5}}
			return m
		}()},
		{"commits only", &Message{WriterBrokerID: 1, Commits: []Commit{{Partition: orders(1), Epoch: 0, Offset: 0}}}},
		{"commits and markers", &Message{WriterBrokerID: 1,
			Markers: []EpochStart{{Partition: orders(4), Epoch: 2, StartOffset: 9, LeaderBrokerID: 1}},
			Commits: []Commit{{Partition: TopicPartition{TopicID: [16]byte{1}, Partition: 3}, Epoch: 2, Offset: 1 << 40}, {Partition: orders(4), Epoch: 2, Offset: 9}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v3, err := appendMessage(nil, tc.m, messageVersion3)
			require.NoError(t, err)
			require.Equal(t, byte(messageVersion3), v3[0])
			got3, err := DecodeMessage(v3)
			require.NoError(t, err)
			b, err := AppendMessage(nil, tc.m)
			require.NoError(t, err)
			want := byte(messageVersion3)
			if len(tc.m.Markers) > 0 {
				want = messageVersion4
			}
			require.Equal(t, want, b[0])
			got, err := DecodeMessage(b)
			require.NoError(t, err)
			require.ElementsMatch(t, tc.m.Commits, got.Commits)
			for i := 1; i < len(got.Commits); i++ {
				require.LessOrEqual(t, compareCommits(&got.Commits[i-1], &got.Commits[i]), 0, "canonical order")
			}
			again, err := AppendMessage(nil, got)
			require.NoError(t, err)
			require.Equal(t, b, again)
			require.Equal(t, got, got3)
		})
	}

	m := typicalMessage(rand.New(rand.NewPCG(3, 4)), 3, 0)
	b, err := AppendMessage(nil, m)
	require.NoError(t, err)
	require.Equal(t, byte(messageVersion2), b[0], "a message without commits stays version 2, which earlier releases read")
}

func TestCommitValidate(t *testing.T) {
	tp := TopicPartition{Topic: "orders", Partition: 4}
	for _, tc := range []struct {
		name string
		c    Commit
		want string
	}{
		{"negative epoch", Commit{Partition: tp, Epoch: -1}, "commits[0] (orders-4): Epoch -1 is negative"},
		{"negative offset", Commit{Partition: tp, Offset: -1}, "commits[0] (orders-4): Offset -1 is negative"},
		{"no topic", Commit{Offset: 1}, "Partition has neither"},
		{"negative partition", Commit{Partition: TopicPartition{Topic: "a", Partition: -1}}, "Partition.Partition -1 is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.c.Validate(), ErrInvalid)
			_, err := AppendMessage(nil, &Message{Commits: []Commit{tc.c}})
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := AppendMessage(nil, &Message{Object: testObject, Commits: []Commit{{Partition: tp}}})
	require.ErrorIs(t, err, ErrInvalid, "a message without entries names no object")
}

// TestDecodeCommitsMalformed: each way a commits section can be broken is
// rejected with the item and offset it concerns.
func TestDecodeCommitsMalformed(t *testing.T) {
	// Version 3, which must carry commits; version 4 may carry none.
	good, err := appendMessage(nil, &Message{WriterBrokerID: 1, Commits: []Commit{
		{Partition: TopicPartition{Topic: "a", Partition: 1}, Epoch: 2, Offset: 3},
		{Partition: TopicPartition{Topic: "a", Partition: 2}, Epoch: 2, Offset: 3},
	}}, messageVersion3)
	require.NoError(t, err)
	// version, writer, n, k, nc, t, kind, len, 'a', then 2 × 4 varints.
	require.Equal(t, []byte{3, 1, 0, 0, 2, 1, 1, 1, 'a', 0, 1, 2, 3, 0, 2, 2, 3}, good[:len(good)-checksumSize])
	seal := func(body []byte) []byte {
		return binary.LittleEndian.AppendUint32(bytes.Clone(body), crc32c(body))
	}
	body := good[:len(good)-checksumSize]
	with := func(at int, v ...byte) []byte {
		out := bytes.Clone(body)
		return seal(append(out[:at], append(v, out[at+1:]...)...))
	}
	for _, tc := range []struct {
		name   string
		in     []byte
		offset int
		what   string
	}{
		{"zero commits", with(4, 0), 4, "commit count"},
		{"huge commit count", with(4, 0x7f), 4, "commit count"},
		{"commit topic out of range", with(9, 1), 9, "commit topic"},
		{"out of order", with(10, 3), 13, "commit"},
		{"truncated", seal(body[:len(body)-1]), 16, "commit offset"},
		{"epoch too large", seal(append(bytes.Clone(body[:15]), 0x80, 0x80, 0x80, 0x80, 0x08, 3)), 15, "commit epoch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			de := decodeErr(t, tc.in)
			require.Equal(t, tc.what, de.What, "error: %v", de)
			require.Equal(t, tc.offset, de.Offset, "error: %v", de)
		})
	}
}

// TestSplitRoutesCommits: a commit goes where its partition's markers go,
// to the metadata partition of each follower.
func TestSplitRoutesCommits(t *testing.T) {
	p, err := NewPartitioner(4)
	require.NoError(t, err)
	a, b := TopicPartition{Topic: "a"}, TopicPartition{Topic: "b"}
	routed, err := p.Split(&Message{WriterBrokerID: 0, Commits: []Commit{{Partition: a, Offset: 5}, {Partition: b, Offset: 6}}},
		func(tp TopicPartition) []int32 {
			if tp == a {
				return []int32{1, 2}
			}
			return []int32{2}
		})
	require.NoError(t, err)
	require.Len(t, routed, 2)
	require.Equal(t, int32(1), routed[0].Partition)
	require.Equal(t, []Commit{{Partition: a, Offset: 5}}, routed[0].Message.Commits)
	require.Equal(t, int32(2), routed[1].Partition)
	require.Equal(t, []Commit{{Partition: a, Offset: 5}, {Partition: b, Offset: 6}}, routed[1].Message.Commits)
}
