package readcore

import "github.com/activetier/activetier/metadata"

// other is traffic of another partition: the busy cluster around the
// reader's partition.
var other = &metadata.Message{Entries: []metadata.Entry{{Partition: metadata.TopicPartition{Topic: "other"}, FirstOffset: 0, LastOffset: 9}}}

// violationError is the typed error a script's core makes of a broken
// answer of the metadata log: it names the call.
type violationError struct{ call, detail string }

func (e *violationError) Error() string { return e.call + ": " + e.detail }
