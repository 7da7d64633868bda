package faults

import (
	"fmt"

	"github.com/activetier/activetier/metadata"
)

// Op names one operation of a dependency a wrapper can fail.
type Op uint8

// The operations. Local, Partitions and Close do no I/O a fault could
// stand for, so they are not injected.
const (
	// storage.ObjectStore and storage.RangeReader.
	OpPut Op = iota + 1
	OpGetRange
	OpReadRange
	OpDelete
	OpList
	// metadata.Log.
	OpLogAppend
	OpLogRead
	OpLogWatermarks
	OpLogTrim
	// storage.LocalLog.
	OpLocalEndOffset
	OpLocalEpochs
	OpLocalAppend
	OpLocalTruncate
	OpLocalRead

	opEnd // one past the last Op
)

var opNames = [opEnd]string{
	OpPut:            "Put",
	OpGetRange:       "GetRange",
	OpReadRange:      "ReadRange",
	OpDelete:         "Delete",
	OpList:           "List",
	OpLogAppend:      "Log.Append",
	OpLogRead:        "Log.Read",
	OpLogWatermarks:  "Log.Watermarks",
	OpLogTrim:        "Log.Trim",
	OpLocalEndOffset: "LocalLog.EndOffset",
	OpLocalEpochs:    "LocalLog.Epochs",
	OpLocalAppend:    "LocalLog.Append",
	OpLocalTruncate:  "LocalLog.Truncate",
	OpLocalRead:      "LocalLog.Read",
}

// Ops returns every Op, in order.
func Ops() []Op {
	ops := make([]Op, 0, opEnd-1)
	for o := OpPut; o < opEnd; o++ {
		ops = append(ops, o)
	}
	return ops
}

// String returns the method the operation is: "Put", "Log.Append",
// "LocalLog.Read".
func (o Op) String() string {
	if o > 0 && o < opEnd {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// IsGet reports whether o reads a range of an object: GetRange or
// ReadRange, the two ways to make a GET.
func (o Op) IsGet() bool { return o == OpGetRange || o == OpReadRange }

// Reads reports whether o returns bytes a corrupting Effect can change:
// the GETs, Log.Read and LocalLog.Read.
func (o Op) Reads() bool { return o.IsGet() || o == OpLogRead || o == OpLocalRead }

// Request is one operation as an Injector sees it: which it is and what it
// addresses. Only the fields of its kind of operation are set.
type Request struct {
	Op Op
	// StoreAZ is the AZ of the object store making the request.
	StoreAZ string
	// AZ and Bucket are the bucket an object-store request addresses and
	// its AZ (for a Delete, those of its first object).
	AZ, Bucket string
	// Key is the object's key; for a List, the prefix listed.
	Key string
	// Refs are the objects of a Delete.
	Refs []metadata.ObjectRef
	// Offset and Length are a GET's byte range, and Length a Put's body
	// size. For Log.Read and LocalLog.Read, Offset is where the read
	// starts and Length the most it returns (records or bytes); for
	// Log.Trim and LocalLog.Truncate, Offset is the offset given.
	Offset, Length int64
	// Body is a Put's body. An Injector may read it while Inject runs,
	// and must neither change nor keep it.
	Body []byte
	// Partition is the metadata-log partition of a Log operation.
	Partition int32
	// TopicPartition is the partition of a LocalLog operation.
	TopicPartition metadata.TopicPartition
}

// String describes the request for errors: the operation and what it
// addresses.
func (r Request) String() string {
	switch r.Op {
	case OpPut:
		return fmt.Sprintf("%s %s/%s (%d bytes)", r.Op, r.Bucket, r.Key, r.Length)
	case OpGetRange, OpReadRange:
		return fmt.Sprintf("%s %s/%s range [%d, +%d)", r.Op, r.Bucket, r.Key, r.Offset, r.Length)
	case OpDelete:
		if len(r.Refs) == 0 {
			return fmt.Sprintf("%s of no objects", r.Op)
		}
		return fmt.Sprintf("%s of %d objects (first %s)", r.Op, len(r.Refs), r.Refs[0])
	case OpList:
		return fmt.Sprintf("%s %s/%s*", r.Op, r.Bucket, r.Key)
	case OpLogAppend, OpLogWatermarks:
		return fmt.Sprintf("%s partition %d", r.Op, r.Partition)
	case OpLogRead:
		return fmt.Sprintf("%s partition %d from %d (at most %d)", r.Op, r.Partition, r.Offset, r.Length)
	case OpLogTrim:
		return fmt.Sprintf("%s partition %d before %d", r.Op, r.Partition, r.Offset)
	case OpLocalEndOffset, OpLocalEpochs, OpLocalAppend:
		return fmt.Sprintf("%s %s", r.Op, r.TopicPartition)
	case OpLocalTruncate:
		return fmt.Sprintf("%s %s at %d", r.Op, r.TopicPartition, r.Offset)
	case OpLocalRead:
		return fmt.Sprintf("%s %s from %d (at most %d bytes)", r.Op, r.TopicPartition, r.Offset, r.Length)
	}
	return r.Op.String()
}
