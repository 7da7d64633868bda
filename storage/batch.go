package storage

import "fmt"

// Batch is one opaque record batch of one partition (for example a Kafka
// RecordBatch) together with the facts LocalLog keeps and the
// combined-object format (package combiner) indexes: the record leader
// epoch and the inclusive offset range and largest timestamp of the
// batch's records. Neither the engines nor the format look inside Data.
type Batch struct {
	Epoch        int32
	FirstOffset  int64
	LastOffset   int64
	MaxTimestamp int64
	Data         []byte
}

// EpochEntry says that leader epoch Epoch wrote its first record at
// StartOffset. It is one line of Kafka's leader-epoch-checkpoint file, as
// LocalLog.Epochs returns them and package fencing's Lineage keeps them.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// String formats the entry as "(epoch, start)".
func (e EpochEntry) String() string { return fmt.Sprintf("(%d, %d)", e.Epoch, e.StartOffset) }
