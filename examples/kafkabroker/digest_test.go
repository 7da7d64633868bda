package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/activetier/activetier/examples/kafkabroker/broker"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// diskChange is what TestDigestCatchesDiskChanges does to the last frame
// of a stopped follower's disklog segment: frame is the whole frame, at
// is the index in it of the byte of a record value to change.
type diskChange func(frame []byte, at int)

// flipValueByte changes one byte of a record's value and nothing else: a
// disk that no longer holds what was written.
func flipValueByte(frame []byte, at int) { frame[at] ^= 0x01 }

// rewriteConsistently changes the same byte, then recomputes the Kafka
// batch's CRC and the disklog frame's CRC over the changed bytes, as a
// buggy writer that stored the wrong value would: every checksum on disk
// is valid.
func rewriteConsistently(frame []byte, at int) {
	frame[at] ^= 0x01
	data := frame[diskFrameHeader:]
	binary.BigEndian.PutUint32(data[kafkaCRCAt:], crc32.Checksum(data[kafkaCRCAt+4:], castagnoliTable))
	binary.BigEndian.PutUint32(frame[4:], crc32.Checksum(frame[8:], castagnoliTable))
}

// The layouts the test edits: disklog's frame (see package disklog: length,
// crc, epoch, first, last, maxTs, index, count, then the batch) and
// Kafka's record batch v2 (its CRC-32C at byte 17 covers the bytes from
// the attributes, at 21, to the end).
const (
	diskFrameHeader = 44
	kafkaCRCAt      = 17
)

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// TestDigestCatchesDiskChanges produces records with kgo to a partition of
// three replicas, waits until a follower holds them all, SIGKILLs it,
// changes its disklog on disk in the last record batch it holds (one byte
// of a record's value), restarts it on its data and produces once more.
// It shows which layer catches what:
//
//   - "intact", the control: no byte changed. The restarted follower
//     reads back the records of the last entry it held, checks them
//     against the leader's digest and finds nothing; it checks the next
//     entry it applies too.
//   - "byte flipped": the byte alone changed. The disklog frame's CRC-32C
//     covers the batch, so the disklog's recovery, on Open, finds a
//     checksum mismatch and truncates the log before that frame (and the
//     rest of the Append call it was written in); the follower fetches
//     the records again and its log ends up equal to the leader's. The
//     digest has nothing to catch: the changed bytes are never read as
//     records.
//   - "byte and checksums rewritten": the byte changed and both the
//     Kafka batch's CRC and the disklog frame's CRC recomputed, as a
//     buggy writer would. Every checksum on disk is valid, so the disklog
//     and a Kafka client reading the batch accept it; only the replica
//     digest catches it: the restarted follower rereads the batch, its
//     digest differs from the one the leader published, and the broker
//     logs a mismatch at Error and reports it in GET /v1/status, naming
//     the partition and a range that holds the changed batch. Replication
//     goes on; the follower's log keeps the changed batch (repairing it is
//     the operator's, or a rebuild's).
//
// In each, the next entry the follower applies is checked and matches.
// The test produces it only once the restart's own check is done: a
// follower that starts fetching a new entry while it takes the value of
// the last one it held does not read that one back (followcore issues a
// Verify only for a partition with no operation outstanding), so a
// change on disk then goes unseen; producing right after the restart
// missed the rewritten batch in 3 of 8 runs.
func TestDigestCatchesDiskChanges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change diskChange
		// Which layer catches the change: the disklog's recovery, or
		// the replica digest.
		disklog, digest bool
		// checks is how many digest checks the restarted follower makes
		// at least before anything new is produced, where the digest
		// catches nothing: over an intact log, the reread of the last
		// entry it held; over a truncated one, whatever was left of it.
		checks uint64
	}{
		{"intact", nil, false, false, 1},
		{"byte flipped", flipValueByte, true, false, 0},
		{"byte and checksums rewritten", rewriteConsistently, false, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const topic = "digest"
			tp := metadata.TopicPartition{Topic: topic, Partition: 0}
			c := startProcCluster(t, map[string]int{topic: 1})
			pl := c.ctl.View().Topics[0].Partitions[0]
			leader := int(pl.Leader)
			victim := int(pl.Replicas[slices.IndexFunc(pl.Replicas, func(id int32) bool { return id != pl.Leader })])

			prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			require.NoError(t, err)
			defer prod.Close()
			n := 0
			produceBatch := func(records int) {
				var rs []*kgo.Record
				for range records {
					rs = append(rs, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "digest-%06d", n)})
					n++
				}
				require.NoError(t, prod.ProduceSync(t.Context(), rs...).FirstErr())
			}
			for range 8 {
				produceBatch(10)
			}
			waitEnd(t, c, []int{leader, victim}, int64(n), nil)

			c.brokers[victim].kill()
			first, last := changeLastFrame(t, filepath.Join(c.dirs[victim], fmt.Sprintf("%s-%d", topic, 0)), tc.change)
			t.Logf("broker %d killed; the last batch of its log holds offsets %d-%d", victim, first, last)
			c.restart(victim)
			// What the restart checks, before anything new is produced:
			// a follower whose start overlaps the fetch of a new entry
			// does not read back what it held (see the doc comment).
			restarted := waitEnd(t, c, []int{leader, victim}, int64(n), func(st broker.Status) bool {
				if tc.digest {
					return st.DigestMismatches > 0
				}
				return st.DigestChecks >= tc.checks
			})
			// The next entry it applies is checked, and matches: after a
			// mismatch the follower took the leader's value.
			produceBatch(10)
			st := waitEnd(t, c, []int{leader, victim}, int64(n), func(st broker.Status) bool {
				return st.DigestChecks > restarted.DigestChecks
			})
			t.Logf("restarted broker %d: %d digest checks, %d mismatches %+v", victim, st.DigestChecks, st.DigestMismatches, st.Mismatches)
			c.stopAll()
			logText, err := os.ReadFile(c.brokers[victim].log)
			require.NoError(t, err)
			truncated := strings.Contains(string(logText), "disklog: recovery truncates a damaged tail")
			logged := strings.Contains(string(logText), "replica digest mismatch")
			mine, theirs := c.readLog(victim, tp), c.readLog(leader, tp)
			differ, where := diverging(map[metadata.TopicPartition][]storage.Batch{tp: theirs}, map[metadata.TopicPartition][]storage.Batch{tp: mine})

			assert.Equal(t, tc.disklog, truncated, "whether the disklog's recovery truncated the log")
			if tc.disklog {
				assert.Contains(t, string(logText), "checksum mismatch")
			}
			if !tc.digest {
				assert.Zero(t, st.DigestMismatches, "mismatches %+v", st.Mismatches)
				assert.Empty(t, st.Mismatches)
				assert.False(t, logged, "a digest mismatch logged")
				// Intact, or truncated and fetched again: the same log.
				assert.Zero(t, differ, "the follower's log differs from the leader's: %s", where)
				return
			}
			assert.True(t, logged, "the broker did not log the digest mismatch")
			require.Equal(t, uint64(1), st.DigestMismatches)
			require.Len(t, st.Mismatches, 1)
			m := st.Mismatches[0]
			assert.Equal(t, topic, m.Topic)
			assert.Equal(t, int32(0), m.Partition)
			assert.Equal(t, "reread", m.What)
			assert.Equal(t, int32(leader), m.Publisher)
			assert.LessOrEqual(t, m.From, first, "the mismatch's range does not hold the changed batch")
			assert.GreaterOrEqual(t, m.To, last+1, "the mismatch's range does not hold the changed batch")
			assert.Contains(t, string(logText), fmt.Sprintf("partition=%s epoch=%d publisher=%d from=%d last=%d check=reread", tp, m.Epoch, m.Publisher, m.From, m.To-1),
				"the logged mismatch does not name the partition, epoch and offsets")
			// The changed batch is still in the follower's log, valid to
			// every checksum: the disklog reads it and its Kafka CRC
			// holds, so a consumer would take the changed value.
			assert.Equal(t, last-first+1, differ, "the logs differ elsewhere than the changed batch: %s", where)
			i := slices.IndexFunc(mine, func(b storage.Batch) bool { return b.FirstOffset == first })
			require.GreaterOrEqual(t, i, 0)
			data := mine[i].Data
			assert.Equal(t, binary.BigEndian.Uint32(data[kafkaCRCAt:]), crc32.Checksum(data[kafkaCRCAt+4:], castagnoliTable))
			_, err = batchRecords(data)
			assert.NoError(t, err)
		})
	}
}

// waitEnd waits until every broker of ids holds tp's log to end (per its
// status) and done, if given, holds of the last one's status, which it
// returns.
func waitEnd(t *testing.T, c *procCluster, ids []int, end int64, done func(broker.Status) bool) broker.Status {
	t.Helper()
	last := make(map[int]broker.Status)
	reached := func() bool {
		for _, id := range ids {
			st, err := c.tryStatus(id)
			if err != nil {
				return false
			}
			last[id] = st
			if len(st.Partitions) == 0 || st.Partitions[0].End != end {
				return false
			}
		}
		return done == nil || done(last[ids[len(ids)-1]])
	}
	for deadline := time.Now().Add(60 * time.Second); !reached(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the brokers %v did not reach log end %d and the condition within 60s: %s", ids, end, statusReport(last))
		}
	}
	return last[ids[len(ids)-1]]
}

// statusReport says, for each broker's last status, its partitions' log
// ends and its digest checks and mismatches.
func statusReport(sts map[int]broker.Status) string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(sts)) {
		st := sts[id]
		fmt.Fprintf(&b, "\n  broker %d: ", id)
		for _, ps := range st.Partitions {
			fmt.Fprintf(&b, "%s-%d %s ends at %d, ", ps.Topic, ps.Partition, ps.Role, ps.End)
		}
		fmt.Fprintf(&b, "%d digest checks, %d mismatches %+v", st.DigestChecks, st.DigestMismatches, st.Mismatches)
	}
	return b.String()
}

// changeLastFrame applies change to the last frame of the last segment in
// a stopped broker's partition directory, at a byte of the last record's
// value, and returns the offsets the frame holds. A nil change changes
// nothing.
func changeLastFrame(t *testing.T, dir string, change diskChange) (first, last int64) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	require.NotEmpty(t, segs, "no segment in %s", dir)
	slices.Sort(segs)
	path := segs[len(segs)-1]
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	pos := -1
	for at := 0; at < len(b); at += 4 + int(binary.BigEndian.Uint32(b[at:])) {
		pos = at
	}
	require.GreaterOrEqual(t, pos, 0, "no frame in %s", path)
	frame := b[pos:]
	require.Equal(t, int(binary.BigEndian.Uint32(frame)), len(frame)-4, "the last frame of %s is torn", path)
	first, last = int64(binary.BigEndian.Uint64(frame[12:])), int64(binary.BigEndian.Uint64(frame[20:]))
	if change == nil {
		return first, last
	}
	// The last byte of the last record's value: its sequence number's
	// last digit, which an uncompressed batch holds as is.
	v := bytes.LastIndex(frame, []byte("digest-"))
	require.Greater(t, v, diskFrameHeader, "no record value in the last frame of %s", path)
	change(frame, v+len("digest-000000")-1)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return first, last
}
