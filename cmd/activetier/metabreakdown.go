package main

import (
	"context"
	"encoding/binary"
	"sync"

	"github.com/activetier/activetier/metadata"
)

// metadataBreakdown splits the metadata bytes published by what they
// carry, to show what a run's metadata is made of.
type metadataBreakdown struct {
	// Entries: the entries' own fields, checksums excluded.
	Entries int64 `json:"entries"`
	// Markers: epoch-start markers, in messages of their own or beside
	// entries.
	Markers int64 `json:"markers"`
	// Headers: what every message repeats whatever it carries (version,
	// writer, counts, topic table, object reference, message checksum).
	Headers int64 `json:"headers"`
	// SectionChecksums: the sections' xxhash64 checksums, 8 bytes an entry.
	SectionChecksums int64 `json:"section_checksums"`
	// MarkerMessages and EntryMessages count the messages with markers only
	// and those with entries.
	MarkerMessages int64 `json:"marker_messages"`
	EntryMessages  int64 `json:"entry_messages"`
	// Undecoded: bytes of messages this build could not decode.
	Undecoded int64 `json:"undecoded,omitempty"`
}

// breakdownLog is a metadata.Log that adds every message appended to a
// metadataBreakdown.
type breakdownLog struct {
	metadata.Log
	mu sync.Mutex
	b  metadataBreakdown
}

// Append splits value and appends it.
func (l *breakdownLog) Append(ctx context.Context, partition int32, value []byte) (int64, error) {
	off, err := l.Log.Append(ctx, partition, value)
	if err == nil {
		l.add(value)
	}
	return off, err
}

// add attributes value's bytes: the header is counted field by field as
// the codec lays it out, markers are what encoding the message without
// them saves, and entries the rest.
func (l *breakdownLog) add(value []byte) {
	var d metadataBreakdown
	m, err := metadata.DecodeMessage(value)
	switch {
	case err != nil:
		d.Undecoded = int64(len(value))
	case len(m.Entries) == 0:
		d.MarkerMessages = 1
		d.Headers = headerBytes(m)
		d.Markers = int64(len(value)) - d.Headers
	default:
		d.EntryMessages = 1
		d.Headers = headerBytes(m)
		if len(m.Markers) > 0 {
			noMarkers := *m
			noMarkers.Markers = nil
			if b, err := metadata.AppendMessage(nil, &noMarkers); err == nil {
				d.Markers = int64(len(value) - len(b))
			}
		}
		d.SectionChecksums = 8 * int64(len(m.Entries))
		d.Entries = int64(len(value)) - d.Headers - d.Markers - d.SectionChecksums
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Entries += d.Entries
	l.b.Markers += d.Markers
	l.b.Headers += d.Headers
	l.b.SectionChecksums += d.SectionChecksums
	l.b.MarkerMessages += d.MarkerMessages
	l.b.EntryMessages += d.EntryMessages
	l.b.Undecoded += d.Undecoded
}

// breakdown returns the totals so far.
func (l *breakdownLog) breakdown() metadataBreakdown {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b
}

// headerBytes is the size of what m carries besides its entries and
// markers: version byte, writer, counts, topic table, object reference
// and first position when it has entries, and message checksum.
func headerBytes(m *metadata.Message) int64 {
	n := 1 + uvarintLen(uint64(m.WriterBrokerID)) + uvarintLen(uint64(len(m.Entries))) + uvarintLen(uint64(len(m.Markers))) + 4
	topics := make(map[metadata.TopicPartition]bool)
	topic := func(tp metadata.TopicPartition) {
		tp.Partition = 0
		if topics[tp] {
			return
		}
		topics[tp] = true
		n++ // kind
		if tp.TopicID != ([16]byte{}) {
			n += 16
		}
		if tp.Topic != "" {
			n += uvarintLen(uint64(len(tp.Topic))) + len(tp.Topic)
		}
	}
	for _, e := range m.Entries {
		topic(e.Partition)
	}
	for _, s := range m.Markers {
		topic(s.Partition)
	}
	n += uvarintLen(uint64(len(topics)))
	if len(m.Entries) > 0 {
		for _, s := range []string{m.Object.AZ, m.Object.Bucket, m.Object.Key} {
			n += uvarintLen(uint64(len(s))) + len(s)
		}
		n += uvarintLen(uint64(m.Entries[0].Position))
	}
	return int64(n)
}

func uvarintLen(v uint64) int { return len(binary.AppendUvarint(nil, v)) }
