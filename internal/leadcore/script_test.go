package leadcore

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/internal/harness/scripttest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// TestScripts plays every script in testdata: the interaction tests, in
// the style of etcd-io/raft's. Run with -rewrite to write the output the
// core gives now below each command.
func TestScripts(t *testing.T) {
	scripttest.Run(t, func() func(*testing.T, *datadriven.TestData) string { return (&scriptEnv{}).handle })
}

// scriptEnv is what a script acts on: a harness around a core, the names
// the script gave requests, and what garbage collection offered last. In a
// world (new world), a logWorld performs the core's requests at drain.
type scriptEnv struct {
	h         *harness
	w         *logWorld
	names     map[string]uint64
	collected []metadata.ObjectRef
}

// codes names each Code in scripts.
var codes = map[Code]string{NotLeader: "NotLeader", InvalidBatch: "InvalidBatch", BufferFull: "BufferFull", TooLarge: "TooLarge", StaleEpoch: "StaleEpoch"}

// kinds names each Kind in scripts.
var kinds = map[string]Kind{"other": Other, "permanent": Permanent, "unavailable": Unavailable, "closed": Closed}

// handle runs one command and returns its output. Events print nothing
// but a refusal; ready prints the Ready, as DescribeReady renders it, with
// the health after "health changed". Durations are Go's (100ms, 1h).
//
//	new [max-inflight=N] [retain-for=D] [wait-cut-delay=D] [hedge] [world]
//	become-leader p= epoch= [followers=(F, ...)] [republish-from=-1] leo=
//	resign p=
//	append p= epoch= first= last= size=
//	advance by=D                  time passes: a Tick
//	wait p= offset=               a caller waits for the offset: prints
//	                              the wait's id (0: it asks for no cut)
//	unwait id=                    the caller stops waiting
//	ready [encode=X] [upload=X] [publish=X] [delete=X]
//	                              names the first request of each kind X
//	encode id=                    performs the Encode
//	stored id= [key=K]            the upload stored, as K or k<n>
//	upload-failed id= kind=       kinds: other permanent unavailable closed
//	hedge-stored id= key=
//	hedge-failed id=
//	published id= offset=
//	publish-failed id= kind= [err=closed]
//	read-lineage id= [epochs=(E@S, ...)] [end=] [fail]
//	read-end id= end=
//	read-batches id= [batches=(E:F-L, ...)]
//	progress p= follower= end= last-epoch=
//	set-in-sync p= [followers=(F, ...)]
//	republish p= from=
//	collect [after=D]             what may be deleted, kept for forget
//	forget
//	sweepable bucket=             one listed object a line: KEY at=D
//	collect-garbage call= [after=D]
//	                              the broker's CollectGarbage, named call
//	sweep call= bucket=           the broker's Sweep of the listing below,
//	                              as sweepable's; the cutoff is now
//	deleted id= [fail]            the Delete answered
//	durable p= | hw p= | leadership p= | replicas p= | need-lineage p= epoch=
//	stats | lowmarks
//
// In a world: produce epoch= first= last= (the local log and the core);
// local epoch= first= last= (the local log alone); lineage epochs=(E@S,
// ...); hold on|off; drain; release; report follower= end= last-epoch=
// [p=]; republished; gc-applied p=.
//
// An id is the number the output above shows, or a name ready gave it.
func (e *scriptEnv) handle(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd == "new" {
		mod := func(c *Config) {
			d.MaybeScanArgs(t, "max-inflight", &c.MaxInflight)
			if arg, ok := d.Arg("retain-for"); ok {
				c.RetainFor = duration(t, d, arg.SingleVal(t))
			}
			if arg, ok := d.Arg("wait-cut-delay"); ok {
				c.WaitCutDelay = duration(t, d, arg.SingleVal(t))
			}
			if d.HasArg("hedge") {
				hedging(c)
			}
		}
		if d.HasArg("world") {
			e.w = newLogWorldWith(t, mod)
			e.h = e.w.h
		} else {
			e.w, e.h = nil, newHarness(t, mod)
		}
		e.names, e.collected = map[string]uint64{}, nil
		return ""
	}
	require.NotNil(t, e.h, "%s: no core: begin with new", d.Pos)
	h, c := e.h, e.h.c
	switch d.Cmd {
	case "become-leader":
		var epoch int
		var leo int64
		republishFrom := int64(-1)
		d.ScanArgs(t, "epoch", &epoch)
		d.ScanArgs(t, "leo", &leo)
		d.MaybeScanArgs(t, "republish-from", &republishFrom)
		return refusal(c.BecomeLeader(h.now, e.partition(t, d), int32(epoch), brokers(t, d, "followers"), republishFrom, leo, digest.Chain{}))
	case "resign":
		c.Resign(h.now, e.partition(t, d))
	case "append":
		var epoch, size int
		var first, last int64
		d.ScanArgs(t, "epoch", &epoch)
		d.ScanArgs(t, "first", &first)
		d.ScanArgs(t, "last", &last)
		d.ScanArgs(t, "size", &size)
		return refusal(c.Append(h.now, e.partition(t, d), storage.Batch{Epoch: int32(epoch), FirstOffset: first, LastOffset: last, Data: make([]byte, size)}))
	case "wait":
		var offset int64
		d.ScanArgs(t, "offset", &offset)
		return fmt.Sprintf("wait %d\n", c.Wait(h.now, e.partition(t, d), offset))
	case "unwait":
		c.Unwait(h.now, e.id(t, d))
	case "advance":
		var by string
		d.ScanArgs(t, "by", &by)
		h.advance(duration(t, d, by))
	case "ready":
		rd := c.Ready()
		c.Advance()
		for _, arg := range d.CmdArgs {
			var ids []uint64
			switch arg.Key {
			case "encode":
				for _, r := range rd.Encodes {
					ids = append(ids, r.ID)
				}
			case "upload":
				for _, r := range rd.Uploads {
					ids = append(ids, r.ID)
				}
			case "publish":
				for _, r := range rd.Publishes {
					ids = append(ids, r.ID)
				}
			case "delete":
				for _, r := range rd.Deletes {
					ids = append(ids, r.ID)
				}
			default:
				d.Fatalf(t, "ready names encode, upload, publish or delete requests, not %q", arg.Key)
			}
			if len(ids) == 0 {
				d.Fatalf(t, "no %s request to name %s", arg.Key, arg.SingleVal(t))
			}
			e.names[arg.SingleVal(t)] = ids[0]
		}
		return h.describe(rd)
	case "encode":
		h.encode(e.id(t, d))
	case "stored":
		id := e.id(t, d)
		if arg, ok := d.Arg("key"); ok {
			c.Uploaded(h.now, id, metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: arg.SingleVal(t)}, nil, Other)
		} else {
			h.stored(id)
		}
	case "upload-failed":
		c.Uploaded(h.now, e.id(t, d), metadata.ObjectRef{}, errDown, kind(t, d))
	case "hedge-stored":
		var key string
		d.ScanArgs(t, "key", &key)
		h.hedgeStored(e.id(t, d), key)
	case "hedge-failed":
		c.HedgeUploaded(h.now, e.id(t, d), metadata.ObjectRef{}, errDown)
	case "published":
		var off int64
		d.ScanArgs(t, "offset", &off)
		h.published(e.id(t, d), off)
	case "publish-failed":
		err := errDown
		if arg, ok := d.Arg("err"); ok && arg.SingleVal(t) == "closed" {
			err = metadata.ErrClosed
		}
		c.Published(h.now, e.id(t, d), 0, err, kind(t, d))
	case "read-lineage":
		res := LocalResult{Epochs: epochs(t, d)}
		d.MaybeScanArgs(t, "end", &res.End)
		if d.HasArg("fail") {
			res = LocalResult{EpochsErr: errDown}
		}
		c.Read(h.now, e.id(t, d), ReadLineage, res)
	case "read-end":
		var res LocalResult
		d.ScanArgs(t, "end", &res.End)
		c.Read(h.now, e.id(t, d), ReadEnd, res)
	case "read-batches":
		var res LocalResult
		if arg, ok := d.Arg("batches"); ok {
			for _, v := range arg.Vals {
				var b storage.Batch
				_, err := fmt.Sscanf(v, "%d:%d-%d", &b.Epoch, &b.FirstOffset, &b.LastOffset)
				require.NoError(t, err, "%s: batch %q is not E:F-L", d.Pos, v)
				b.Data = []byte{byte(len(res.Batches))}
				res.Batches = append(res.Batches, b)
			}
		}
		c.Read(h.now, e.id(t, d), ReadBatches, res)
	case "progress":
		var follower, lastEpoch int
		var end int64
		d.ScanArgs(t, "follower", &follower)
		d.ScanArgs(t, "end", &end)
		d.ScanArgs(t, "last-epoch", &lastEpoch)
		var lineage []storage.EpochEntry
		if e.w != nil {
			lineage = e.w.epochs
		}
		c.Progress(h.now, e.partition(t, d), int32(follower), end, int32(lastEpoch), lineage, nil)
	case "set-in-sync":
		return refusal(c.SetInSync(h.now, e.partition(t, d), brokers(t, d, "followers")))
	case "republish":
		var from int64
		d.ScanArgs(t, "from", &from)
		id, err := c.Republish(h.now, e.partition(t, d), from)
		if err != nil {
			return refusal(err)
		}
		return fmt.Sprintf("task %d\n", id)
	case "collect":
		at := h.now
		if arg, ok := d.Arg("after"); ok {
			at = at.Add(duration(t, d, arg.SingleVal(t)))
		}
		e.collected = c.collect(at)
		return refs(e.collected)
	case "forget":
		c.forget(e.collected, true)
		e.collected = nil
	case "sweepable":
		var bucket string
		d.ScanArgs(t, "bucket", &bucket)
		rs, foreign := c.sweepable(listing(t, d), h.now, bucket, "")
		return refs(rs) + fmt.Sprintf("%d foreign\n", foreign)
	case "collect-garbage":
		var call uint64
		d.ScanArgs(t, "call", &call)
		at := h.now
		if arg, ok := d.Arg("after"); ok {
			at = at.Add(duration(t, d, arg.SingleVal(t)))
		}
		c.CollectGarbage(at, call)
	case "sweep":
		var call uint64
		var bucket string
		d.ScanArgs(t, "call", &call)
		d.ScanArgs(t, "bucket", &bucket)
		c.Sweep(h.now, call, listing(t, d), h.now, bucket, "")
	case "deleted":
		var err error
		if d.HasArg("fail") {
			err = errDown
		}
		c.Deleted(h.now, e.id(t, d), err)
	case "durable":
		return fmt.Sprintf("%d\n", h.durable(e.partition(t, d)))
	case "hw":
		hw, _, ok := c.HighWatermark(e.partition(t, d))
		return fmt.Sprintf("%d ok=%v\n", hw, ok)
	case "leadership":
		_, durable, failed, ok := c.Leadership(e.partition(t, d))
		return fmt.Sprintf("durable %d failed %v ok=%v\n", durable, failed, ok)
	case "replicas":
		rs, ok := c.Replicas(e.partition(t, d))
		if !ok {
			return "not led\n"
		}
		var b strings.Builder
		for _, r := range rs {
			fmt.Fprintf(&b, "broker %d end %d in-sync=%v caught-up=%v", r.Broker, r.EndOffset, r.InSync, r.CaughtUp)
			if !r.LastCaughtUp.IsZero() {
				fmt.Fprintf(&b, " last-caught-up %s", relTime(r.LastCaughtUp, t0))
			}
			b.WriteByte('\n')
		}
		return b.String()
	case "need-lineage":
		var epoch int
		d.ScanArgs(t, "epoch", &epoch)
		return fmt.Sprintf("%v\n", c.NeedLineage(e.partition(t, d), int32(epoch)))
	case "stats":
		return strings.ReplaceAll(strings.Trim(fmt.Sprintf("%+v", c.Stats()), "{}"), " ", "\n") + "\n"
	case "lowmarks":
		return fmt.Sprintf("%v\n", c.LowMarks())
	default:
		if e.w == nil {
			d.Fatalf(t, "unknown command %q", d.Cmd)
		}
		return e.world(t, d)
	}
	return ""
}

// world runs the commands of a logWorld.
func (e *scriptEnv) world(t *testing.T, d *datadriven.TestData) string {
	w := e.w
	scanBatch := func() (int32, int64, int64) {
		var epoch int
		var first, last int64
		d.ScanArgs(t, "epoch", &epoch)
		d.ScanArgs(t, "first", &first)
		d.ScanArgs(t, "last", &last)
		return int32(epoch), first, last
	}
	switch d.Cmd {
	case "produce":
		w.produce(scanBatch())
	case "local":
		epoch, first, last := scanBatch()
		w.batches = append(w.batches, storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, Data: make([]byte, 400)})
	case "lineage":
		w.epochs = epochs(t, d)
	case "hold":
		require.Len(t, d.CmdArgs, 1, "%s: hold on or off", d.Pos)
		w.hold = d.CmdArgs[0].Key == "on"
	case "drain":
		w.drain()
	case "release":
		w.release()
	case "held":
		return fmt.Sprintf("%d held\n", len(w.held))
	case "deletes":
		require.Len(t, d.CmdArgs, 1, "%s: deletes ok or fail-after-deleting", d.Pos)
		w.deleteErr = nil
		if d.CmdArgs[0].Key == "fail-after-deleting" {
			w.deleteErr = storage.ErrUnavailable
		}
	case "report":
		var follower, lastEpoch int
		var end int64
		d.ScanArgs(t, "follower", &follower)
		d.ScanArgs(t, "end", &end)
		d.ScanArgs(t, "last-epoch", &lastEpoch)
		tp := tpA
		if d.HasArg("p") {
			tp = e.partition(t, d)
		}
		w.h.c.Progress(w.h.now, tp, int32(follower), end, int32(lastEpoch), w.epochs, nil)
	case "republished":
		var b strings.Builder
		for i, r := range w.republished {
			fmt.Fprintf(&b, "%s at epoch %d\n", r, w.publishers[i])
		}
		return b.String()
	case "gc-applied":
		var brokers []int32
		if g := w.h.c.gc.applied[e.partition(t, d)]; g != nil {
			for b := range g.applied {
				brokers = append(brokers, b)
			}
		}
		slices.Sort(brokers)
		return fmt.Sprintf("%v\n", brokers)
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return ""
}

// id is the request the command's id names: a number, or a name ready
// gave.
func (e *scriptEnv) id(t *testing.T, d *datadriven.TestData) uint64 {
	var s string
	d.ScanArgs(t, "id", &s)
	if id, ok := e.names[s]; ok {
		return id
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		d.Fatalf(t, "id %q is neither a number nor a name ready gave", s)
	}
	return id
}

func (e *scriptEnv) partition(t *testing.T, d *datadriven.TestData) metadata.TopicPartition {
	var p int
	d.ScanArgs(t, "p", &p)
	return tpN(p)
}

func brokers(t *testing.T, d *datadriven.TestData, key string) []int32 {
	arg, ok := d.Arg(key)
	if !ok {
		return nil
	}
	var out []int32
	for _, v := range arg.Vals {
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 32)
		require.NoError(t, err, "%s: broker %q", d.Pos, v)
		out = append(out, int32(n))
	}
	return out
}

func epochs(t *testing.T, d *datadriven.TestData) []storage.EpochEntry {
	arg, ok := d.Arg("epochs")
	if !ok {
		return nil
	}
	var out []storage.EpochEntry
	for _, v := range arg.Vals {
		var ee storage.EpochEntry
		_, err := fmt.Sscanf(v, "%d@%d", &ee.Epoch, &ee.StartOffset)
		require.NoError(t, err, "%s: epoch %q is not E@S", d.Pos, v)
		out = append(out, ee)
	}
	return out
}

func kind(t *testing.T, d *datadriven.TestData) Kind {
	var s string
	d.ScanArgs(t, "kind", &s)
	k, ok := kinds[s]
	if !ok {
		d.Fatalf(t, "unknown kind %q", s)
	}
	return k
}

func duration(t *testing.T, d *datadriven.TestData, s string) time.Duration {
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	return dur
}

// listing is the command's input as a store's listing: one object a
// line, KEY at=D, D its last modification after the start.
func listing(t *testing.T, d *datadriven.TestData) []Listed {
	var listed []Listed
	for _, l := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		_, args := parseLine(t, d, l)
		key := args[0].Key
		var at time.Duration
		for _, a := range args[1:] {
			require.Equal(t, "at", a.Key, "%s: a listed object is KEY at=D", d.Pos)
			at = duration(t, d, a.SingleVal(t))
		}
		listed = append(listed, Listed{Ref: metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: key}, LastModified: t0.Add(at)})
	}
	return listed
}

func parseLine(t *testing.T, d *datadriven.TestData, line string) (string, []datadriven.CmdArg) {
	cmd, args, err := datadriven.ParseLine("listed " + line)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	return cmd, args
}

// refusal renders an event's error: nothing, or its Code and text.
func refusal(err error) string {
	if err == nil {
		return ""
	}
	if name, ok := codes[CodeOf(err)]; ok {
		return fmt.Sprintf("refused %s: %v\n", name, err)
	}
	return fmt.Sprintf("error: %v\n", err)
}

func refs(rs []metadata.ObjectRef) string {
	if len(rs) == 0 {
		return "none\n"
	}
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%s\n", r.Key)
	}
	return b.String()
}
