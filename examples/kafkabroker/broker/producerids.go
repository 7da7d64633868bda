package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Producer ids are unique across brokers and restarts without asking
// anyone: broker b hands out b<<producerIDBits | n. No other broker can
// hand out the same id. n comes from blocks of producerIDBlock, each
// reserved in a file in the broker's log directory (written and synced
// before any id of it is handed out), so a restarted broker continues
// after its last block, as Kafka's controller hands out blocks of 1000.
// And no block starts below producerIDsPerSecond per second since 2025,
// so that even a broker whose directory was lost does not hand out an id
// its earlier self did, unless that self handed out more than that many
// a second on average: partitions on other brokers may still hold the
// state of its earlier producers.
const (
	producerIDBits       = 40
	producerIDBlock      = 1000
	producerIDsPerSecond = 256
	producerIDClockBase  = 1735689600 // 2025-01-01T00:00:00Z
	maxBrokerID          = 1<<(63-producerIDBits) - 1
	producerIDFile       = "producer-ids"
)

// producerIDs is one broker's allocator of producer ids.
type producerIDs struct {
	path   string
	prefix int64
	now    func() time.Time

	mu          sync.Mutex
	loaded      bool
	next, limit int64 // n in [next, limit) are reserved and not handed out
}

func newProducerIDs(dir string, broker int32, now func() time.Time) *producerIDs {
	return &producerIDs{path: filepath.Join(dir, producerIDFile), prefix: int64(broker) << producerIDBits, now: now}
}

// errProducerIDs is the failure to reserve producer ids.
var errProducerIDs = errors.New("broker: reserving producer ids")

// allocate returns a producer id no broker handed out before.
func (a *producerIDs) allocate() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.loaded {
		limit, err := readReserved(a.path)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", errProducerIDs, err)
		}
		a.next, a.limit, a.loaded = limit, limit, true
	}
	if a.next == a.limit {
		// The floor counts milliseconds: in whole seconds, a broker
		// whose directory was lost and that restarted within the
		// second would start where its earlier self did.
		floor := max(0, a.now().UnixMilli()-producerIDClockBase*1000) * producerIDsPerSecond / 1000
		start := max(a.limit, floor)
		if start+producerIDBlock > 1<<producerIDBits {
			return 0, fmt.Errorf("%w: all %d of this broker's are used", errProducerIDs, int64(1)<<producerIDBits)
		}
		if err := writeReserved(a.path, start+producerIDBlock); err != nil {
			return 0, fmt.Errorf("%w: %w", errProducerIDs, err)
		}
		a.next, a.limit = start, start+producerIDBlock
	}
	id := a.prefix | a.next
	a.next++
	return id, nil
}

// readReserved reads the end of the last reserved block; no file means
// none was reserved.
func readReserved(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 || n > 1<<producerIDBits {
		return 0, fmt.Errorf("%s holds %q, not a count of producer ids", path, b)
	}
	return n, nil
}

// writeReserved replaces the file atomically and durably: a temporary
// file written and synced, renamed over it, and the directory synced.
func writeReserved(path string, limit int64) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.FormatInt(limit, 10) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
