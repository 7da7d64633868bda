package metadata

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Partitioner routes metadata to the partitions of a Log by follower, so
// that a broker reads one metadata partition, the one its id maps to,
// instead of all of them (with a hash of the data partition, a broker's
// followed partitions land on every metadata partition and it must poll
// them all; docs/design.md, "Data flow", routing by follower affinity). A follower with broker id b reads
// partition b % N; an entry is written to the partition of each of its
// partition's followers, once per distinct metadata partition.
//
// The cost is duplication: an entry with followers on k distinct metadata
// partitions is written k times (at most RF-1). The gain is that each
// broker's read fan-out is one partition, and, with N at least the number of
// brokers, it reads only metadata for partitions it follows.
//
// A Partitioner is a small value, safe for concurrent use.
type Partitioner struct {
	n int32
}

// NewPartitioner returns a Partitioner for a Log with the given number of
// partitions, which must be positive.
func NewPartitioner(partitions int32) (Partitioner, error) {
	if partitions <= 0 {
		return Partitioner{}, fmt.Errorf("metadata: partitioner: partitions %d must be positive", partitions)
	}
	return Partitioner{n: partitions}, nil
}

// Partitions returns the number of metadata partitions p routes to.
func (p Partitioner) Partitions() int32 { return p.n }

// errNoPartitions is returned by the methods of a zero Partitioner.
var errNoPartitions = errors.New("metadata: partitioner has no partitions (use NewPartitioner)")

// For returns the metadata partition the follower with broker id follower
// reads: follower % Partitions(). Broker ids must not be negative.
func (p Partitioner) For(follower int32) (int32, error) {
	if p.n <= 0 {
		return 0, errNoPartitions
	}
	if follower < 0 {
		return 0, fmt.Errorf("%w: follower broker id %d is negative", ErrInvalid, follower)
	}
	return follower % p.n, nil
}

// Routed is one message of a split, with the metadata partition it is to
// be appended to.
type Routed struct {
	Partition int32
	Message   *Message
}

// Split divides m, the entries, markers and commits of one combined object,
// into one message per metadata partition that any follower reads.
// followers names the broker ids of a data partition's followers (for
// example from the broker's replica assignment, leader excluded). Each
// returned message holds exactly the entries, markers and commits of m
// whose partition has at least one follower reading that metadata
// partition, in m's order, with m's Object and WriterBrokerID; a message
// that receives no entries has an empty Object. Entries, markers and
// commits of partitions with no followers are in no message: nobody would
// read them.
//
// The result is sorted by Partition. m is validated first (see
// Message.Validate) and is not modified; the returned messages share
// Entries' CustomMetadata with m.
func (p Partitioner) Split(m *Message, followers func(TopicPartition) []int32) ([]Routed, error) {
	if p.n <= 0 {
		return nil, errNoPartitions
	}
	if m == nil {
		return nil, fmt.Errorf("%w: nil message", ErrInvalid)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	// targets holds the distinct metadata partitions of one data
	// partition's followers; RF is small, so a linear search beats a set.
	var targets []int32
	route := func(tp TopicPartition) error {
		targets = targets[:0]
		for _, f := range followers(tp) {
			if f < 0 {
				return fmt.Errorf("%w: follower broker id %d of %s is negative", ErrInvalid, f, tp)
			}
			if part := f % p.n; !slices.Contains(targets, part) {
				targets = append(targets, part)
			}
		}
		return nil
	}
	// One routing pass records where each item goes (followers is called
	// once per item, so that an answer that changes cannot route an item
	// to a partition the counts missed); the counts then size each
	// metadata partition's slices once, not item by item.
	kinds := [3]int{len(m.Entries), len(m.Markers), len(m.Commits)}
	items := kinds[0] + kinds[1] + kinds[2]
	// The metadata partitions of every item, in order; two each (RF 3)
	// before it grows.
	dest := make([]int32, 0, 2*items)
	per := make([]int, 0, items)
	counts := make(map[int32]*[3]int)
	for kind, n := range kinds {
		for i := range n {
			var tp TopicPartition
			switch kind {
			case 0:
				tp = m.Entries[i].Partition
			case 1:
				tp = m.Markers[i].Partition
			default:
				tp = m.Commits[i].Partition
			}
			if err := route(tp); err != nil {
				return nil, err
			}
			for _, part := range targets {
				c := counts[part]
				if c == nil {
					c = new([3]int)
					counts[part] = c
				}
				c[kind]++
			}
			dest = append(dest, targets...)
			per = append(per, len(targets))
		}
	}
	out := make(map[int32]*Message, len(counts))
	for part, c := range counts {
		msg := &Message{WriterBrokerID: m.WriterBrokerID}
		if c[0] > 0 {
			msg.Object, msg.Entries = m.Object, make([]Entry, 0, c[0])
		}
		if c[1] > 0 {
			msg.Markers = make([]EpochStart, 0, c[1])
		}
		if c[2] > 0 {
			msg.Commits = make([]Commit, 0, c[2])
		}
		out[part] = msg
	}
	item := 0
	for kind, n := range kinds {
		for i := range n {
			for _, part := range dest[:per[item]] {
				switch msg := out[part]; kind {
				case 0:
					msg.Entries = append(msg.Entries, m.Entries[i])
				case 1:
					msg.Markers = append(msg.Markers, m.Markers[i])
				default:
					msg.Commits = append(msg.Commits, m.Commits[i])
				}
			}
			dest = dest[per[item]:]
			item++
		}
	}
	routed := make([]Routed, 0, len(out))
	for _, part := range slices.Sorted(maps.Keys(out)) {
		routed = append(routed, Routed{Partition: part, Message: out[part]})
	}
	return routed, nil
}
