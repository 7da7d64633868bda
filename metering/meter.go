package metering

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// ErrInvalidConfig is returned by New for a Config it cannot use.
var ErrInvalidConfig = errors.New("metering: invalid config")

// Default limits of Config.
const (
	// DefaultMaxPartitions bounds the partitions the ledger keeps apart.
	DefaultMaxPartitions = 100_000
	// DefaultMaxObjects bounds the objects whose layout the Meter keeps to
	// attribute GETs: a follower reads an object within seconds of its
	// publication, and garbage collection deletes it soon after.
	DefaultMaxObjects = 4096
)

// Config configures a Meter. The zero value prices nothing (a Prices must
// be given) and is otherwise usable.
type Config struct {
	// Prices is the price list the ledger's costs are quoted in.
	Prices costmodel.Prices
	// MetadataAppendCrossings is how many AZ boundaries a published
	// metadata byte crosses (to the log's partition leader and its
	// replicas); 0 means costmodel.DefaultMetadataRF. MetadataReadCrossings
	// is the same for a byte read; 0 means 1. Set NoMetadataCrossings for a
	// log whose traffic stays within one AZ.
	MetadataAppendCrossings int
	MetadataReadCrossings   int
	NoMetadataCrossings     bool
	// ControlBytesPerEntry is the follower-to-leader fetch traffic one
	// entry read stands for; 0 means
	// costmodel.DefaultControlBytesPerPartition.
	ControlBytesPerEntry int
	// MaxPartitions bounds the partitions the ledger keeps apart; the
	// usage of any further partition goes to the Overflow row. 0 means
	// DefaultMaxPartitions.
	MaxPartitions int
	// MaxObjects bounds the objects whose section layout is kept; the
	// oldest is forgotten first. 0 means DefaultMaxObjects.
	MaxObjects int
}

func (c Config) resolve() (Config, error) {
	if err := c.Prices.Validate(); err != nil {
		return c, fmt.Errorf("%w: Prices: %w", ErrInvalidConfig, err)
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"MetadataAppendCrossings", c.MetadataAppendCrossings}, {"MetadataReadCrossings", c.MetadataReadCrossings},
		{"ControlBytesPerEntry", c.ControlBytesPerEntry}, {"MaxPartitions", c.MaxPartitions}, {"MaxObjects", c.MaxObjects},
	} {
		if f.v < 0 {
			return c, fmt.Errorf("%w: %s is %d, must not be negative", ErrInvalidConfig, f.name, f.v)
		}
	}
	if c.NoMetadataCrossings && (c.MetadataAppendCrossings != 0 || c.MetadataReadCrossings != 0) {
		return c, fmt.Errorf("%w: NoMetadataCrossings excludes MetadataAppendCrossings and MetadataReadCrossings", ErrInvalidConfig)
	}
	if !c.NoMetadataCrossings {
		c.MetadataAppendCrossings = orDefault(c.MetadataAppendCrossings, costmodel.DefaultMetadataRF)
		c.MetadataReadCrossings = orDefault(c.MetadataReadCrossings, 1)
	}
	c.ControlBytesPerEntry = orDefault(c.ControlBytesPerEntry, costmodel.DefaultControlBytesPerPartition)
	c.MaxPartitions = orDefault(c.MaxPartitions, DefaultMaxPartitions)
	c.MaxObjects = orDefault(c.MaxObjects, DefaultMaxObjects)
	return c, nil
}

// orDefault returns v, or def when v is zero.
func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Op names a request kind, as the metrics label it.
type Op string

// The requests a Meter counts: the object store's, then the metadata log's.
const (
	OpPut        Op = "put"
	OpGet        Op = "get"
	OpDelete     Op = "delete"
	OpList       Op = "list"
	OpAppend     Op = "append"
	OpRead       Op = "read"
	OpWatermarks Op = "watermarks"
	OpTrim       Op = "trim"
)

var (
	storeOps = [...]Op{OpPut, OpGet, OpDelete, OpList}
	logOps   = [...]Op{OpAppend, OpRead, OpWatermarks, OpTrim}
)

// StoreOps returns the object store's Ops, in a fixed order.
func StoreOps() []Op { return storeOps[:len(storeOps):len(storeOps)] }

// LogOps returns the metadata log's Ops, in a fixed order.
func LogOps() []Op { return logOps[:len(logOps):len(logOps)] }

// ErrorKind classifies a failed request by the contract error it matches.
type ErrorKind string

// The kinds of failure, from the ObjectStore and metadata.Log contracts;
// KindOther is an error that matches none of them (a contract breach the
// engines treat as transient).
const (
	KindUnavailable   ErrorKind = "unavailable"
	KindNotFound      ErrorKind = "not_found"
	KindAlreadyExists ErrorKind = "already_exists"
	KindInvalidRange  ErrorKind = "invalid_range"
	KindPermanent     ErrorKind = "permanent"
	KindUnknownBucket ErrorKind = "unknown_bucket"
	KindClosed        ErrorKind = "closed"
	KindOutOfRange    ErrorKind = "offset_out_of_range"
	KindUnknownPart   ErrorKind = "unknown_partition"
	KindCanceled      ErrorKind = "canceled"
	KindOther         ErrorKind = "other"
)

var errorKinds = [...]ErrorKind{KindUnavailable, KindNotFound, KindAlreadyExists, KindInvalidRange, KindPermanent,
	KindUnknownBucket, KindClosed, KindOutOfRange, KindUnknownPart, KindCanceled, KindOther}

// ErrorKinds returns every ErrorKind, in a fixed order.
func ErrorKinds() []ErrorKind { return slices.Clone(errorKinds[:]) }

// kindSentinels maps each kind to the error that identifies it, in the
// order they are tried: a store's ErrPermanent may also wrap a cause.
var kindSentinels = []struct {
	kind ErrorKind
	err  error
}{
	{KindPermanent, storage.ErrPermanent}, {KindUnknownBucket, storage.ErrUnknownBucket},
	{KindNotFound, storage.ErrNotFound}, {KindAlreadyExists, storage.ErrAlreadyExists},
	{KindInvalidRange, storage.ErrInvalidRange}, {KindUnavailable, storage.ErrUnavailable},
	{KindClosed, metadata.ErrClosed}, {KindOutOfRange, metadata.ErrOffsetOutOfRange},
	{KindUnknownPart, metadata.ErrUnknownPartition},
	{KindCanceled, context.Canceled}, {KindCanceled, context.DeadlineExceeded},
}

// Classify returns the kind of a non-nil error.
func Classify(err error) ErrorKind {
	for _, s := range kindSentinels {
		if errors.Is(err, s.err) {
			return s.kind
		}
	}
	return KindOther
}

func kindIndex(k ErrorKind) int {
	if i := slices.Index(errorKinds[:], k); i >= 0 {
		return i
	}
	return len(errorKinds) - 1
}

// opCounters is one Op's live counters.
type opCounters struct {
	requests atomic.Uint64
	errors   [len(errorKinds)]atomic.Uint64
	latency  latency
}

// OpStats is a snapshot of one Op's counters.
type OpStats struct {
	Op Op
	// Requests counts the calls that reached the dependency, failed ones
	// included; Errors counts the failed ones by kind (zero kinds absent).
	Requests uint64
	Errors   map[ErrorKind]uint64
	// Latency is the time each call took, failed ones included.
	Latency Histogram
}

func (c *opCounters) snapshot(op Op) OpStats {
	s := OpStats{Op: op, Requests: c.requests.Load(), Latency: c.latency.snapshot()}
	for i := range c.errors {
		if n := c.errors[i].Load(); n > 0 {
			if s.Errors == nil {
				s.Errors = make(map[ErrorKind]uint64)
			}
			s.Errors[errorKinds[i]] = n
		}
	}
	return s
}

// Meter counts and attributes the traffic of the stores and logs it wraps.
// Create it with New; one Meter usually serves one broker, wrapping its
// object store and its metadata log.
type Meter struct {
	cfg Config
	ops map[Op]*opCounters // fixed at New: read without a lock

	bytesUp, bytesDown                   atomic.Int64
	metaAppendedBytes, metaReadBytes     atomic.Int64
	metaRecordsRead, metaEntriesRead     atomic.Int64
	metaUndecodable, putBodiesUnreadable atomic.Int64

	ledger *ledger
}

// New returns a Meter, or an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Meter, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	m := &Meter{cfg: cfg, ops: make(map[Op]*opCounters), ledger: newLedger(cfg.MaxPartitions, cfg.MaxObjects)}
	for _, op := range append(StoreOps(), LogOps()...) {
		m.ops[op] = &opCounters{}
	}
	return m, nil
}

// Prices returns the price list of the Meter's ledger.
func (m *Meter) Prices() costmodel.Prices { return m.cfg.Prices }

// counted reports whether a call reached its dependency and so is a
// request as a bill counts it: a call refused before any request (a
// context already done when it was made, a bucket the store was not
// configured with) is not one. sent is whether the context was live when
// the call was made: a request cancelled in flight (a hedged GET that
// lost) was sent, and is billed.
func counted(sent bool, err error) bool {
	return err == nil || (sent && !errors.Is(err, storage.ErrUnknownBucket))
}

func (m *Meter) record(op Op, err error, took time.Duration) {
	c := m.ops[op]
	c.requests.Add(1)
	if err != nil {
		c.errors[kindIndex(Classify(err))].Add(1)
	}
	c.latency.observe(took)
}

// Snapshot is the Meter's counters at one moment.
type Snapshot struct {
	// Store and Log hold one OpStats per Op of StoreOps and LogOps.
	Store, Log []OpStats
	// BytesUp is the body bytes of every PUT made; BytesDown the bytes
	// returned by successful GETs.
	BytesUp, BytesDown int64
	// MetadataAppendedBytes and MetadataReadBytes are the bytes of metadata
	// messages appended and read; MetadataRecordsRead the messages read and
	// MetadataEntriesRead the entries in them.
	MetadataAppendedBytes, MetadataReadBytes int64
	MetadataRecordsRead, MetadataEntriesRead int64
	// UnreadablePutBodies counts PUT bodies that were not combined objects
	// and UndecodableMessages metadata messages that did not decode: their
	// cost is in the ledger's unattributed row.
	UnreadablePutBodies, UndecodableMessages int64
	// Ledger is the cost ledger.
	Ledger Ledger
}

// Snapshot returns the Meter's counters and ledger.
func (m *Meter) Snapshot() Snapshot {
	s := Snapshot{
		BytesUp: m.bytesUp.Load(), BytesDown: m.bytesDown.Load(),
		MetadataAppendedBytes: m.metaAppendedBytes.Load(), MetadataReadBytes: m.metaReadBytes.Load(),
		MetadataRecordsRead: m.metaRecordsRead.Load(), MetadataEntriesRead: m.metaEntriesRead.Load(),
		UnreadablePutBodies: m.putBodiesUnreadable.Load(), UndecodableMessages: m.metaUndecodable.Load(),
	}
	for _, op := range storeOps {
		s.Store = append(s.Store, m.ops[op].snapshot(op))
	}
	for _, op := range logOps {
		s.Log = append(s.Log, m.ops[op].snapshot(op))
	}
	s.Ledger = m.ledger.snapshot(m.cfg.Prices)
	return s
}

// Usage returns the traffic the Meter saw as a costmodel.Usage, for
// costmodel.RunCost: requests and bytes of the store, metadata bytes times
// their crossings, control bytes of the entries read. ProducedBytes and RF
// are the caller's to fill.
func (m *Meter) Usage() costmodel.Usage {
	return costmodel.Usage{
		Puts:          int64(m.ops[OpPut].requests.Load()),
		Gets:          int64(m.ops[OpGet].requests.Load()),
		BytesUp:       m.bytesUp.Load(),
		BytesDown:     m.bytesDown.Load(),
		MetadataBytes: m.metaAppendedBytes.Load()*int64(m.cfg.MetadataAppendCrossings) + m.metaReadBytes.Load()*int64(m.cfg.MetadataReadCrossings),
		ControlBytes:  m.metaEntriesRead.Load() * int64(m.cfg.ControlBytesPerEntry),
	}
}
