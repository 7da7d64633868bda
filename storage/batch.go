package storage

import "fmt"

// Batch is one opaque record batch of one partition (for example a Kafka
// RecordBatch) together with the facts the format indexes: the record
// leader epoch and the inclusive offset range and largest timestamp of the
// batch's records. The combiner never looks inside Data.
type Batch struct {
	Epoch        int32
	FirstOffset  int64
	LastOffset   int64
	MaxTimestamp int64
	Data         []byte
}

// EpochEntry says that leader epoch Epoch wrote its first record at
// StartOffset. It is one line of Kafka's leader-epoch-checkpoint file.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// String formats the entry as "(epoch, start)".
func (e EpochEntry) String() string { return fmt.Sprintf("(%d, %d)", e.Epoch, e.StartOffset) }
