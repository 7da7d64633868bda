package metadata

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every error Validate and AppendMessage
// return for an entry, marker or message that breaks the rules below. The
// error text names the offending field, and for a message the index of the
// entry or marker.
var ErrInvalid = errors.New("metadata: invalid")

// Validate reports whether e describes a section a follower can fetch and
// apply: a named partition, a non-empty byte range, offsets and epochs that
// cannot be confused with Kafka's "unknown" value -1, and a publisher epoch
// no older than the records' epoch, and a Digest wherever DigestFrom
// says a chain starts. It does not check Object, which a Message checks
// against its own.
func (e *Entry) Validate() error {
	if err := e.check(); err != nil {
		return fmt.Errorf("%w: entry %s: %w", ErrInvalid, e.Partition, err)
	}
	return nil
}

func (e *Entry) check() error {
	if err := e.Partition.check(); err != nil {
		return err
	}
	switch {
	case e.RecordEpoch < 0:
		return fmt.Errorf("RecordEpoch %d is negative", e.RecordEpoch)
	case e.PublisherEpoch < e.RecordEpoch:
		return fmt.Errorf("PublisherEpoch %d is below RecordEpoch %d", e.PublisherEpoch, e.RecordEpoch)
	case e.FirstOffset < 0:
		return fmt.Errorf("FirstOffset %d is negative", e.FirstOffset)
	case e.LastOffset < e.FirstOffset:
		return fmt.Errorf("LastOffset %d is below FirstOffset %d", e.LastOffset, e.FirstOffset)
	case e.Position < 0:
		return fmt.Errorf("Position %d is negative", e.Position)
	case e.Length <= 0:
		return fmt.Errorf("Length %d is not positive", e.Length)
	case e.Position > math.MaxInt64-e.Length:
		return fmt.Errorf("byte range Position %d + Length %d overflows int64", e.Position, e.Length)
	case !e.Codec.Valid():
		return fmt.Errorf("Codec %s is not defined", e.Codec)
	case e.UncompressedSize <= 0:
		return fmt.Errorf("UncompressedSize %d is not positive", e.UncompressedSize)
	case e.WriterBrokerID < 0:
		return fmt.Errorf("WriterBrokerID %d is negative", e.WriterBrokerID)
	case e.Digest == 0 && e.DigestFrom != 0:
		return fmt.Errorf("DigestFrom %d is set but Digest is 0 (none published): a chain begins with a digest", e.DigestFrom)
	case e.Digest != 0 && (e.DigestFrom < 0 || e.DigestFrom > e.FirstOffset):
		return fmt.Errorf("DigestFrom %d is outside [0, FirstOffset %d]: a chain begins at or before the entry", e.DigestFrom, e.FirstOffset)
	}
	return nil
}

// Validate reports whether s is a usable epoch-start marker: a named
// partition and non-negative epoch, start offset and broker id.
func (s *EpochStart) Validate() error {
	if err := s.check(); err != nil {
		return fmt.Errorf("%w: epoch start %s: %w", ErrInvalid, s.Partition, err)
	}
	return nil
}

func (s *EpochStart) check() error {
	if err := s.Partition.check(); err != nil {
		return err
	}
	switch {
	case s.Epoch < 0:
		return fmt.Errorf("Epoch %d is negative", s.Epoch)
	case s.StartOffset < 0:
		return fmt.Errorf("StartOffset %d is negative", s.StartOffset)
	case s.LeaderBrokerID < 0:
		return fmt.Errorf("LeaderBrokerID %d is negative", s.LeaderBrokerID)
	}
	return nil
}

// Validate reports whether c is a usable commit: a named partition and a
// non-negative epoch and offset.
func (c *Commit) Validate() error {
	if err := c.check(); err != nil {
		return fmt.Errorf("%w: commit %s: %w", ErrInvalid, c.Partition, err)
	}
	return nil
}

func (c *Commit) check() error {
	if err := c.Partition.check(); err != nil {
		return err
	}
	switch {
	case c.Epoch < 0:
		return fmt.Errorf("Epoch %d is negative", c.Epoch)
	case c.Offset < 0:
		return fmt.Errorf("Offset %d is negative", c.Offset)
	}
	return nil
}

func compareCommits(a, b *Commit) int {
	return cmp.Or(
		a.Partition.Compare(b.Partition),
		cmp.Compare(a.Epoch, b.Epoch),
		cmp.Compare(a.Offset, b.Offset),
	)
}

// Validate reports whether tp names a partition: a topic name or ID, a
// name (when there is one) that ValidateTopicName accepts, and a partition
// number that is not negative. Errors match ErrInvalid, and
// ErrInvalidTopicName for a bad name.
func (tp TopicPartition) Validate() error {
	if err := tp.check(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func (tp TopicPartition) check() error {
	if tp.Topic == "" && tp.TopicID == ([16]byte{}) {
		return errors.New("Partition has neither a topic name nor a topic id")
	}
	if tp.Topic != "" {
		if err := ValidateTopicName(tp.Topic); err != nil {
			return err
		}
	}
	if tp.Partition < 0 {
		return fmt.Errorf("Partition.Partition %d is negative", tp.Partition)
	}
	return nil
}

// ErrInvalidTopicName is matched (errors.Is) by every error of
// ValidateTopicName, and so by those of Validate, AppendMessage and
// DecodeMessage for a partition whose topic name Kafka would refuse.
var ErrInvalidTopicName = errors.New("metadata: invalid topic name")

// MaxTopicNameLength is the longest topic name Kafka accepts, in bytes.
const MaxTopicNameLength = 249

// ValidateTopicName reports whether name is one Kafka accepts for a topic
// (its org.apache.kafka.common.internals.Topic.validate): 1 to
// MaxTopicNameLength bytes of ASCII letters, digits, '.', '_' and '-',
// and neither "." nor "..". Such a name is valid UTF-8, so it is a valid
// Prometheus label value, and it is a valid file name. Errors match
// ErrInvalidTopicName.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: an empty name", ErrInvalidTopicName)
	case len(name) > MaxTopicNameLength:
		// The name is not quoted: it may be of any length.
		return fmt.Errorf("%w: %d bytes long, Kafka allows %d", ErrInvalidTopicName, len(name), MaxTopicNameLength)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q", ErrInvalidTopicName, name)
	}
	for i := range len(name) {
		if c := name[i]; !topicNameByte(c) {
			return fmt.Errorf("%w: %q has %q at byte %d; Kafka allows [a-zA-Z0-9._-]", ErrInvalidTopicName, name, name[i:i+1], i)
		}
	}
	return nil
}

func topicNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// Validate reports whether m can be encoded: at least one entry, marker or
// commit, valid entries, markers and commits, every entry in m.Object (which must then name a
// bucket and key; a message of markers and commits only has an empty Object), a
// non-negative writer, and entries whose byte ranges do not overlap, as the
// sections of one object never do.
func (m *Message) Validate() error {
	_, err := m.plan(nil)
	return err
}

// topicKey is a topic's identity as the codec's topic table stores it.
type topicKey struct {
	name string
	id   [16]byte
}

func keyOf(tp TopicPartition) topicKey { return topicKey{name: tp.Topic, id: tp.TopicID} }

func (a topicKey) compare(b topicKey) int {
	if c := strings.Compare(a.name, b.name); c != 0 {
		return c
	}
	return bytes.Compare(a.id[:], b.id[:])
}

// plan is a validated message in canonical order: entries by Position,
// markers by (topic, partition, epoch, start offset, leader), and the
// sorted table of distinct topics both refer to. The encoder and Validate
// share it so that encoding validates exactly once.
type plan struct {
	m *Message
	// entryOrder and markerOrder map canonical position to index in m;
	// nil when m is already in canonical order, the common case, which
	// then costs no allocation.
	entryOrder  []int
	markerOrder []int
	commitOrder []int
	topics      []topicKey
	// digests says an entry has a Digest, which only version 5 carries.
	digests bool
}

func (p *plan) commit(i int) *Commit {
	if p.commitOrder != nil {
		i = p.commitOrder[i]
	}
	return &p.m.Commits[i]
}

func (p *plan) entry(i int) *Entry {
	if p.entryOrder != nil {
		i = p.entryOrder[i]
	}
	return &p.m.Entries[i]
}

func (p *plan) marker(i int) *EpochStart {
	if p.markerOrder != nil {
		i = p.markerOrder[i]
	}
	return &p.m.Markers[i]
}

// topicIndex returns the index of k in the sorted topic table.
func (p *plan) topicIndex(k topicKey) int {
	i, _ := slices.BinarySearchFunc(p.topics, k, topicKey.compare)
	return i
}

func compareMarkers(a, b *EpochStart) int {
	return cmp.Or(
		a.Partition.Compare(b.Partition),
		cmp.Compare(a.Epoch, b.Epoch),
		cmp.Compare(a.StartOffset, b.StartOffset),
		cmp.Compare(a.LeaderBrokerID, b.LeaderBrokerID),
	)
}

// plan validates m and puts it in canonical order. topicBuf, if not nil, is
// used as the topic table's backing array so that small messages encode
// without allocating.
func (m *Message) plan(topicBuf []topicKey) (plan, error) {
	p := plan{m: m, topics: topicBuf[:0]}
	if m.WriterBrokerID < 0 {
		return p, fmt.Errorf("%w: message WriterBrokerID %d is negative", ErrInvalid, m.WriterBrokerID)
	}
	if len(m.Entries) == 0 && len(m.Markers) == 0 && len(m.Commits) == 0 {
		return p, fmt.Errorf("%w: message has no entries and no markers or commits", ErrInvalid)
	}
	if len(m.Entries) == 0 && m.Object != (ObjectRef{}) {
		return p, fmt.Errorf("%w: markers-only message names object %s; its Object must be empty (a message without entries has none)", ErrInvalid, m.Object)
	}
	if len(m.Entries) > 0 && (m.Object.Bucket == "" || m.Object.Key == "") {
		return p, fmt.Errorf("%w: message Object %q lacks a bucket or key", ErrInvalid, m.Object)
	}
	sorted := true
	for i := range m.Entries {
		e := &m.Entries[i]
		if err := e.check(); err != nil {
			return p, fmt.Errorf("%w: entries[%d] (%s): %w", ErrInvalid, i, e.Partition, err)
		}
		p.digests = p.digests || e.Digest != 0
		if e.Object != m.Object {
			return p, fmt.Errorf("%w: entries[%d] (%s): Object %s is not the message's object %s", ErrInvalid, i, e.Partition, e.Object, m.Object)
		}
		if i > 0 && e.Position < m.Entries[i-1].Position {
			sorted = false
		}
		// Consecutive entries of one topic are the norm; skip the search.
		if i == 0 || keyOf(e.Partition) != keyOf(m.Entries[i-1].Partition) {
			p.topics = insertTopic(p.topics, keyOf(e.Partition))
		}
	}
	if !sorted {
		p.entryOrder = make([]int, len(m.Entries))
		for i := range p.entryOrder {
			p.entryOrder[i] = i
		}
		slices.SortFunc(p.entryOrder, func(a, b int) int {
			return cmp.Compare(m.Entries[a].Position, m.Entries[b].Position)
		})
	}
	for i := 1; i < len(m.Entries); i++ {
		prev, e := p.entry(i-1), p.entry(i)
		if e.Position < prev.Position+prev.Length {
			return p, fmt.Errorf("%w: entries (%s) at [%d, %d) and (%s) at [%d, %d) overlap", ErrInvalid,
				prev.Partition, prev.Position, prev.Position+prev.Length,
				e.Partition, e.Position, e.Position+e.Length)
		}
	}

	sorted = true
	for i := range m.Markers {
		s := &m.Markers[i]
		if err := s.check(); err != nil {
			return p, fmt.Errorf("%w: markers[%d] (%s): %w", ErrInvalid, i, s.Partition, err)
		}
		if i > 0 && compareMarkers(&m.Markers[i-1], s) > 0 {
			sorted = false
		}
		p.topics = insertTopic(p.topics, keyOf(s.Partition))
	}
	if !sorted {
		p.markerOrder = make([]int, len(m.Markers))
		for i := range p.markerOrder {
			p.markerOrder[i] = i
		}
		slices.SortFunc(p.markerOrder, func(a, b int) int {
			return compareMarkers(&m.Markers[a], &m.Markers[b])
		})
	}
	sorted = true
	for i := range m.Commits {
		c := &m.Commits[i]
		if err := c.check(); err != nil {
			return p, fmt.Errorf("%w: commits[%d] (%s): %w", ErrInvalid, i, c.Partition, err)
		}
		if i > 0 && compareCommits(&m.Commits[i-1], c) > 0 {
			sorted = false
		}
		p.topics = insertTopic(p.topics, keyOf(c.Partition))
	}
	if !sorted {
		p.commitOrder = make([]int, len(m.Commits))
		for i := range p.commitOrder {
			p.commitOrder[i] = i
		}
		slices.SortFunc(p.commitOrder, func(a, b int) int {
			return compareCommits(&m.Commits[a], &m.Commits[b])
		})
	}
	return p, nil
}

// insertTopic adds k to the sorted table topics unless it is there. It
// returns the table rather than updating a plan through a pointer so that a
// caller's stack-allocated table stays on the stack.
func insertTopic(topics []topicKey, k topicKey) []topicKey {
	i, found := slices.BinarySearchFunc(topics, k, topicKey.compare)
	if !found {
		topics = slices.Insert(topics, i, k)
	}
	return topics
}
