package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/fsstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// storeFlag is --store KIND=VALUE: which object store backs the demo's
// buckets, when it is neither memory (the default) nor an S3 endpoint
// (--s3-endpoint). KIND names the store and VALUE is where it keeps its
// buckets, in that store's terms; storeKinds lists the kinds.
type storeFlag struct {
	kind, value string
}

// storeKind is one kind --store accepts.
type storeKind struct {
	name string
	// value is what VALUE is, for help and errors.
	value string
	// help says what the kind keeps the buckets in, for --store's help.
	help string
	// open makes the demo's backend for the AZs from VALUE.
	open func(ctx context.Context, value string, azs []string) (storeBackend, error)
}

// storeKinds are the kinds --store accepts. A new store adds its kind
// here, with a backend that implements storeBackend.
func storeKinds() []storeKind {
	return []storeKind{
		{
			name: "dir", value: "PATH",
			help: "a directory per AZ, made below PATH for the run, on a local disk, NFS, EFS or FSx; the filesystem price list",
			open: func(_ context.Context, value string, azs []string) (storeBackend, error) {
				return openDirObjects(value, azs)
			},
		},
		{
			name: "gcs", value: "PREFIX",
			help: "Cloud Storage buckets PREFIX-az1, PREFIX-az2, ..., created when missing, in project " + gcsProjectEnv + "; " +
				"on the emulator at " + gcsEndpointEnv + " when that is set, else on Cloud Storage with the standard Google credentials; " +
				"the regional Standard price list",
			open: func(ctx context.Context, value string, azs []string) (storeBackend, error) {
				return openGCSObjects(ctx, value, os.Getenv(gcsEndpointEnv), os.Getenv(gcsProjectEnv), azs)
			},
		},
	}
}

// storeBackend is an objectBackend that --store made: it also says where
// the objects are, for the progress header and the report, and removes
// what the run left at the end.
type storeBackend interface {
	objectBackend
	// describe is the progress header's account of where the objects are.
	describe() string
	// cleanup counts the objects the run left and, unless keep, removes
	// them.
	cleanup(ctx context.Context, keep bool) (left int, err error)
	// report says where the objects were, for the report.
	report() *storeReport
	// prices are the store's price list, for the report.
	prices() costmodel.Prices
	// close releases the stores' clients and connections, after
	// cleanup.
	close() error
}

func (s *storeFlag) String() string {
	if s.kind == "" {
		return ""
	}
	return s.kind + "=" + s.value
}

// Get returns the flag as written, for flag.Getter.
func (s *storeFlag) Get() any { return s.String() }

func (s *storeFlag) Set(v string) error {
	kind, value, ok := strings.Cut(v, "=")
	if !ok || kind == "" || value == "" {
		return fmt.Errorf("%q is not KIND=VALUE (want %s)", v, storeKindsHelp())
	}
	if _, found := findStoreKind(kind); !found {
		return fmt.Errorf("unknown store kind %q (want %s)", kind, storeKindsHelp())
	}
	s.kind, s.value = kind, value
	return nil
}

func findStoreKind(name string) (storeKind, bool) {
	for _, k := range storeKinds() {
		if k.name == name {
			return k, true
		}
	}
	return storeKind{}, false
}

// storeKindsUsage is --store's help: each kind as it is written, and what
// it keeps the buckets in.
func storeKindsUsage() string {
	var kinds []string
	for _, k := range storeKinds() {
		kinds = append(kinds, k.name+"="+k.value+" ("+k.help+")")
	}
	return strings.Join(kinds, "; ")
}

// storeKindsHelp lists the kinds as they are written: "dir=PATH, ...".
func storeKindsHelp() string {
	var forms []string
	for _, k := range storeKinds() {
		forms = append(forms, k.name+"="+k.value)
	}
	return strings.Join(forms, ", ")
}

// storeReport is what the report says of a run on a --store backend.
type storeReport struct {
	// Kind and Location are --store's KIND and where the run's objects
	// were in it: for dir, the run's directory below PATH; for gcs, the
	// endpoint and the run's key prefix.
	Kind     string `json:"kind"`
	Location string `json:"location"`
	// Buckets maps each AZ to its bucket.
	Buckets map[string]string `json:"buckets"`
	// ObjectsLeft is how many objects were left at the end, which
	// garbage collection had not deleted; they were then removed, or kept
	// with --keep-objects (ObjectsKept).
	ObjectsLeft int  `json:"objects_left"`
	ObjectsKept bool `json:"objects_kept"`
	// CleanupError says why listing or removing them failed.
	CleanupError string `json:"cleanup_error,omitempty"`
}

// dirObjects keeps the sim's buckets in directories below a path: one
// directory per run (activetier-demo-TIME-TAG), in it one per AZ. Every
// broker gets an fsstore.Store of its own, as a broker process would,
// wrapped to count its calls and to refuse those to a failed AZ's bucket.
type dirObjects struct {
	root, runDir string
	opts         fsstore.Options // LocalAZ is set per store
	admin        *fsstore.Store
	*storeCalls
}

var _ storeBackend = (*dirObjects)(nil)

// openDirObjects creates the run's directory below root, which must be an
// existing directory, and a directory per AZ in it.
func openDirObjects(root string, azs []string) (*dirObjects, error) {
	fi, err := os.Stat(root)
	switch {
	case err != nil:
		return nil, fmt.Errorf("--store dir=%s: %w", root, err)
	case !fi.IsDir():
		return nil, fmt.Errorf("--store dir=%s: not a directory", root)
	}
	prefix, err := runPrefix(time.Now())
	if err != nil {
		return nil, err
	}
	// runPrefix is a key prefix, activetier-demo/TIME-TAG/: one directory
	// name here.
	runDir := filepath.Join(root, strings.ReplaceAll(strings.TrimSuffix(prefix, "/"), "/", "-"))
	if err := os.Mkdir(runDir, 0o777); err != nil {
		return nil, fmt.Errorf("--store dir=%s: %w", root, err)
	}
	d := &dirObjects{root: root, runDir: runDir}
	d.opts.Buckets = make(map[string]fsstore.Bucket, len(azs))
	names := make(map[string]string, len(azs))
	for _, az := range azs {
		dir := filepath.Join(runDir, az)
		if err := os.Mkdir(dir, 0o777); err != nil {
			return nil, errors.Join(err, os.RemoveAll(runDir))
		}
		d.opts.Buckets[az] = fsstore.Bucket{Name: bucketName(az), Dir: dir}
		names[az] = bucketName(az)
	}
	d.storeCalls = newStoreCalls(azs, names, false)
	opts := d.opts
	opts.LocalAZ = azs[0]
	if d.admin, err = fsstore.New(opts); err != nil {
		return nil, errors.Join(err, os.RemoveAll(runDir))
	}
	return d, nil
}

func (d *dirObjects) store(az string) (storage.ObjectStore, error) {
	opts := d.opts
	opts.LocalAZ = az
	st, err := fsstore.New(opts)
	if err != nil {
		return nil, err
	}
	return newCountingStore(st, d.storeCalls), nil
}

func (d *dirObjects) describe() string {
	return fmt.Sprintf("a directory per AZ (%s) in %s", strings.Join(d.azs, ", "), d.runDir)
}

func (d *dirObjects) prices() costmodel.Prices { return costmodel.Filesystem() }

// close has nothing to release: an fsstore.Store holds no open files
// between calls.
func (d *dirObjects) close() error { return nil }

// cleanup counts the objects left in every AZ's directory, the failed
// AZ's included, and removes the run's directory unless keep.
func (d *dirObjects) cleanup(ctx context.Context, keep bool) (int, error) {
	refs, err := objectsLeft(ctx, d.admin, d.azs, d.buckets)
	if err != nil || keep {
		return len(refs), err
	}
	if err := os.RemoveAll(d.runDir); err != nil {
		return len(refs), fmt.Errorf("removing the run's directory %s: %w", d.runDir, err)
	}
	return len(refs), nil
}

// objectsLeft lists, through admin, what the run left in every AZ's
// bucket, the failed AZ's included: garbage collection has deleted every
// object all followers applied, so what remains is the run's last objects
// and a failed AZ's.
func objectsLeft(ctx context.Context, admin storage.ObjectStore, azs []string, buckets map[string]string) ([]metadata.ObjectRef, error) {
	var refs []metadata.ObjectRef
	for _, az := range azs {
		infos, err := admin.List(ctx, buckets[az], "")
		if err != nil {
			return nil, fmt.Errorf("listing what the run left: %w", err)
		}
		for _, info := range infos {
			refs = append(refs, info.Ref)
		}
	}
	return refs, nil
}

// leftRounds and leftSettle bound how long removeLeft waits for objects
// that appear after it listed.
const (
	leftRounds = 4
	leftSettle = 250 * time.Millisecond
)

// removeLeft counts what the run left in every AZ's bucket and, unless
// keep, deletes it through admin. A PUT the run gave up on (a hedge's
// loser, an attempt past its timeout, one the interrupt cut short) may
// still complete on the server after the listing, its body sent before
// the client hung up. So after deleting, removeLeft lists again a moment
// later, until a listing finds nothing, and fails if objects still appear
// after leftRounds rounds. The count includes the late ones.
func removeLeft(ctx context.Context, admin storage.ObjectStore, azs []string, buckets map[string]string, prefix string, keep bool) (int, error) {
	refs, err := objectsLeft(ctx, admin, azs, buckets)
	left := len(refs)
	if err != nil || keep {
		return left, err
	}
	for round := 0; len(refs) > 0; round++ {
		if round == leftRounds {
			return left, fmt.Errorf("%d objects still appeared under %s after %d rounds of deletes", len(refs), prefix, leftRounds)
		}
		if err := admin.Delete(ctx, refs); err != nil {
			return left, fmt.Errorf("deleting the %d objects the run left under %s: %w", len(refs), prefix, err)
		}
		select {
		case <-ctx.Done():
			return left, fmt.Errorf("waiting for objects the run left under %s: %w", prefix, ctx.Err())
		case <-time.After(leftSettle):
		}
		if refs, err = objectsLeft(ctx, admin, azs, buckets); err != nil {
			return left, err
		}
		left += len(refs)
	}
	return left, nil
}

func (d *dirObjects) report() *storeReport {
	buckets := make(map[string]string, len(d.azs))
	for az, b := range d.opts.Buckets {
		buckets[az] = b.Name
	}
	return &storeReport{Kind: "dir", Location: d.runDir, Buckets: buckets}
}

// storeCalls is what the brokers' stores on a --store backend share: the
// calls they made, counted as the requests an object store would bill, and
// the AZ the demo took down. It gives a backend its setOutage and
// requests.
type storeCalls struct {
	azs     []string
	buckets map[string]string // by AZ
	// deletePerObject counts a Delete call as one request per reference
	// (Cloud Storage deletes one object per request) instead of one.
	deletePerObject bool
	counters        requestCounters
	// outage refuses the calls to the bucket of the AZ the demo took
	// down.
	outage *faults.Outage
}

func newStoreCalls(azs []string, buckets map[string]string, deletePerObject bool) *storeCalls {
	return &storeCalls{azs: azs, buckets: buckets, deletePerObject: deletePerObject, outage: faults.NewOutage(errOutage)}
}

func (c *storeCalls) setOutage(az string) error {
	b, ok := c.buckets[az]
	if !ok {
		return fmt.Errorf("no AZ %q (want one of %s)", az, strings.Join(c.azs, ", "))
	}
	c.outage.SetDown(b, true)
	return nil
}

func (c *storeCalls) requests() requestCounts { return c.counters.load() }

// countingStore is a broker's store on a --store backend: it counts each
// call as the request an object store would bill (a Delete call as one
// request, or one per object where the store deletes them one by one; a
// store's own retries are not seen), and how it ended (see
// requestCounters.ended). Below it, the calls' outage refuses those to a
// bucket whose AZ is down, as if the store had become unreachable, with
// storage.ErrUnavailable: they count as failed.
type countingStore struct {
	next storage.ObjectStore
	c    *storeCalls
}

// errOutage is a call refused because its AZ is down in the demo.
var errOutage = fmt.Errorf("AZ down (simulated outage): %w", storage.ErrUnavailable)

func (c *countingStore) Local() metadata.ObjectRef { return c.next.Local() }

func (c *countingStore) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	n := &c.c.counters
	n.puts.Add(1)
	n.bytesUp.Add(int64(len(body)))
	ref, err := c.next.Put(ctx, key, body)
	n.ended(ctx, true, err)
	return ref, err
}

func (c *countingStore) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	var b []byte
	err := c.get(ctx, func() (n int, err error) {
		b, err = c.next.GetRange(ctx, ref, offset, length)
		return len(b), err
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// errReadPanicked is how a GET whose read panicked ended: the engines
// recover such a read as a failed one, and read again.
var errReadPanicked = errors.New("the store's read panicked")

// get counts one GET, which read makes for a caller of ctx.
func (c *countingStore) get(ctx context.Context, read func() (int, error)) error {
	n := &c.c.counters
	n.gets.Add(1)
	var got int
	err := errReadPanicked
	defer func() { n.ended(ctx, false, err) }()
	got, err = read()
	if err != nil {
		return err
	}
	n.bytesDown.Add(int64(got))
	return nil
}

// newCountingStore returns next behind the calls' outage and a
// countingStore: a storage.RangeReader when next is one, so that the
// demo's followers read into pooled buffers as they would from next.
func newCountingStore(next storage.ObjectStore, c *storeCalls) storage.ObjectStore {
	next = faults.WrapStore(next, c.outage)
	s := &countingStore{next: next, c: c}
	if rr, ok := next.(storage.RangeReader); ok {
		return &countingRangeStore{s, rr}
	}
	return s
}

// countingRangeStore is a countingStore over a storage.RangeReader.
type countingRangeStore struct {
	*countingStore
	rr storage.RangeReader
}

func (c *countingRangeStore) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	var n int
	err := c.get(ctx, func() (int, error) {
		var err error
		n, err = c.rr.ReadRange(ctx, ref, offset, dst)
		return n, err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

func (c *countingStore) Delete(ctx context.Context, refs []metadata.ObjectRef) error {
	n := &c.c.counters
	if c.c.deletePerObject {
		n.deletes.Add(int64(len(refs)))
	} else {
		n.deletes.Add(1)
	}
	err := c.next.Delete(ctx, refs)
	n.ended(ctx, false, err)
	return err
}

func (c *countingStore) List(ctx context.Context, bucket, prefix string) ([]storage.ObjectInfo, error) {
	n := &c.c.counters
	n.lists.Add(1)
	infos, err := c.next.List(ctx, bucket, prefix)
	n.ended(ctx, false, err)
	return infos, err
}
