package leadcore

import (
	"fmt"
	"slices"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

type taskKind int

const (
	// chore: what a new leadership owes its followers: its epoch markers,
	// then republishing the log from an offset; retried until done or the
	// leadership ends.
	chore taskKind = iota
	// call: a Republish call; a failure ends it.
	call
	// refresh: publishing the markers of one led partition again; a
	// failure is logged and the next partition's turn comes.
	refresh
	// catchup: republishing for followers that no entry continues (see
	// catchup.go): the markers, then the log from the lowest of them up
	// to where they are reached; retried until done or the leadership
	// ends.
	catchup
)

// task is a sequence of steps, one request at a time: read the lineage →
// publish markers; read the end offset; then, until the end: read the
// local log from an offset → copy it into an object → publish its entries.
type task struct {
	kind  taskKind
	id    uint64 // a call's id
	tp    metadata.TopicPartition
	gen   uint64
	epoch int32
	// collectedTo: what a republish publishes below it may be gone, its
	// own copies collected while it ran (see Core.reached).
	collectedTo int64
	// markers: the markers are still to publish; queued: they wait in,
	// or are being published with, a marker message.
	markers, queued bool
	// from: republish from here; -1 for none. Advanced as it goes.
	from int64
	// republish: from was set; unlike from, never advanced. start is
	// where the republish began.
	republish bool
	start     int64
	// to bounds a catch-up's republish; logEnd is the end offset read at
	// the start of an attempt, end where the republish ends: logEnd, or
	// to if lower.
	to, logEnd, end int64
	haveEnd         bool
	// audience are the followers its entries are routed to, all along;
	// published: it has published some.
	audience  []int32
	published bool
	next      int64                  // the offset after the chunk being copied
	infos     []combiner.SectionInfo // of the chunk being copied
	entries   []metadata.Entry       // of the chunk being published
	req       uint64                 // the request in flight, or 0
	attempt   int
	wakeAt    time.Time // a chore's next attempt
	stopped   bool
}

// newChore starts the chore of tp's leadership at its current epoch,
// replacing the one under way.
func (c *Core) newChore(now time.Time, tp metadata.TopicPartition, ld *leadership, republishFrom, leo int64) {
	from := int64(-1)
	if republishFrom >= 0 {
		from = min(republishFrom, leo)
	}
	if old := ld.chore; old != nil {
		c.stopTask(old)
		if old.republish && (from < 0 || ld.durable < from) {
			// The republish it replaces is unfinished: it has published
			// up to the durable offset (it fills the lowest hole), and
			// the rest must still be, or the followers that lacked the
			// log never get it and the durable offset never moves on.
			from = ld.durable
		}
	}
	ld.chore = &task{kind: chore, tp: tp, gen: ld.gen, epoch: ld.epoch, markers: true, from: from, start: from, republish: from >= 0,
		audience: slices.Clone(c.followers[tp])}
	c.advance(now, ld.chore)
	if t := ld.catchup; t != nil && t.epoch != ld.epoch {
		// Its entries would name the old epoch as publisher: it starts
		// again at the new one once the chore allows (BecomeLeader asks).
		c.caughtUpDone(now, ld, true)
	}
}

// startChores starts the chores of leaderships begun before Start.
func (c *Core) startChores(now time.Time) {
	for _, tp := range c.ledPartitions() {
		for _, t := range c.leading[tp].duties() {
			if t != nil && t.req == 0 {
				c.advance(now, t)
			}
		}
	}
	for _, id := range c.sortedTasks() {
		if t := c.tasks[id]; t.req == 0 {
			c.advance(now, t)
		}
	}
}

// Republish starts a Republish call of tp from offset from and returns its
// id; its end comes as a TaskDone.
func (c *Core) Republish(now time.Time, tp metadata.TopicPartition, from int64) (uint64, error) {
	ld := c.leading[tp]
	if ld == nil {
		return 0, refuse(NotLeader, "republish %s: not the leader", tp)
	}
	if from < 0 {
		return 0, fmt.Errorf("republish %s: negative offset %d", tp, from)
	}
	c.nextID++
	t := &task{kind: call, id: c.nextID, tp: tp, gen: ld.gen, epoch: ld.epoch, from: from, start: from, republish: true,
		audience: slices.Clone(c.followers[tp])}
	c.tasks[t.id] = t
	c.advance(now, t)
	return t.id, nil
}

// CancelTask stops Republish call id (its caller gave up).
func (c *Core) CancelTask(id uint64) {
	if t := c.tasks[id]; t != nil {
		c.stopTask(t)
		delete(c.tasks, id)
	}
}

// advance takes t's next step.
func (c *Core) advance(now time.Time, t *task) {
	if t.stopped || t.queued || !c.started || !t.wakeAt.IsZero() {
		return
	}
	switch {
	case t.markers:
		c.read(now, t, LocalRead{What: ReadLineage})
	case t.from < 0:
		c.finishTask(now, t, nil)
	case !t.haveEnd:
		c.read(now, t, LocalRead{What: ReadEnd})
	case t.from >= t.end:
		c.finishTask(now, t, nil)
	default:
		c.read(now, t, LocalRead{What: ReadBatches, From: t.from, MaxBytes: c.cfg.ObjectBytes})
	}
}

func (c *Core) read(now time.Time, t *task, rd LocalRead) {
	r := c.newRequest(now, whatLocalRead)
	r.task, t.req = t, r.id
	rd.ID, rd.Partition = r.id, t.tp
	c.rd.Reads = append(c.rd.Reads, rd)
}

// Read is the answer to LocalRead id.
func (c *Core) Read(now time.Time, id uint64, what ReadWhat, res LocalResult) {
	r := c.take(id)
	if r == nil {
		return
	}
	t := r.task
	t.req = 0
	switch what {
	case ReadLineage:
		markers, err := c.markersFor(t.tp, t.epoch, res)
		if err != nil {
			c.taskFailed(now, t, err)
			return
		}
		c.queueMarkers(now, t, markers)
	case ReadEnd:
		if res.EndErr != nil {
			c.taskFailed(now, t, fmt.Errorf("republish %s: %w", t.tp, res.EndErr))
			return
		}
		t.logEnd, t.end, t.haveEnd = res.End, res.End, true
		if t.kind == catchup {
			t.end = min(t.end, t.to)
		}
		c.advance(now, t)
	case ReadBatches:
		c.readBatches(now, t, res)
	}
}

// readBatches copies what the local log returned into an object.
func (c *Core) readBatches(now time.Time, t *task, res LocalResult) {
	fail := func(err error) { c.taskFailed(now, t, fmt.Errorf("republish %s from %d: %w", t.tp, t.from, err)) }
	if res.ReadErr != nil {
		fail(res.ReadErr)
		return
	}
	batches := res.Batches
	if err := c.checkRead(batches, t.from, t.end); err != nil {
		fail(err)
		return
	}
	// What was appended after the republish began is published the
	// ordinary way.
	batches = slices.DeleteFunc(batches, func(b storage.Batch) bool { return b.FirstOffset >= t.end })
	if len(batches) == 0 {
		c.finishTask(now, t, nil)
		return
	}
	var inputs []combiner.SectionInput
	for _, b := range batches {
		if n := len(inputs); n > 0 && inputs[n-1].Batches[0].Epoch == b.Epoch {
			inputs[n-1].Batches = append(inputs[n-1].Batches, b)
			continue
		}
		inputs = append(inputs, combiner.SectionInput{Partition: t.tp, Batches: []storage.Batch{b}})
	}
	data, infos, err := c.enc.Encode(nil, inputs)
	if err != nil {
		fail(fmt.Errorf("copy: %w", err))
		return
	}
	t.next, t.infos = batches[len(batches)-1].LastOffset+1, infos
	r := c.newRequest(now, WhatCopy)
	r.task, t.req, r.tried = t, r.id, now
	c.rd.Uploads = append(c.rd.Uploads, Upload{ID: r.id, What: WhatCopy, Data: data})
	c.judgeHealth(now)
}

// copied publishes the entries of the chunk t stored as ref.
func (c *Core) copied(now time.Time, t *task, ref metadata.ObjectRef) {
	t.req = 0
	if ld := c.leading[t.tp]; ld == nil || ld.gen != t.gen {
		c.taskFailed(now, t, refuse(NotLeader, "republish %s: not the leader", t.tp))
		return
	}
	t.entries = make([]metadata.Entry, len(t.infos))
	for i, info := range t.infos {
		t.entries[i] = info.Entry(ref, t.epoch, c.cfg.BrokerID)
	}
	c.startMessage(now, &message{task: t}, &metadata.Message{Object: ref, WriterBrokerID: c.cfg.BrokerID, Entries: t.entries})
}

func (c *Core) copyFailed(now time.Time, t *task, err error) {
	t.req = 0
	c.taskFailed(now, t, fmt.Errorf("republish %s from %d: %w", t.tp, t.from, err))
}

// taskPublished takes the next step after t's entries are published at
// offsets.
func (c *Core) taskPublished(now time.Time, t *task, offsets map[int32]int64) {
	t.req = 0
	sections := make([]combiner.SectionInfo, len(t.entries))
	followers := make([][]int32, len(t.entries))
	gens := make([]uint64, len(t.entries))
	for i, e := range t.entries {
		sections[i] = combiner.SectionOf(e)
		followers[i] = c.followers[t.tp]
		gens[i] = t.gen
	}
	c.gc.track(now, t.entries[0].Object, sections, followers, gens, offsets)
	c.stats.Republished += uint64(len(t.entries))
	t.published = true
	c.choreProgressed(t)
	if ld := c.leading[t.tp]; ld != nil && ld.gen == t.gen && ld.published(t.from, t.next) {
		c.rd.DurableChanged = true
		c.queueCommit(now, t.tp, ld)
	}
	t.from, t.entries = t.next, nil
	c.advance(now, t)
}

// taskFailed ends a call with err, moves a refresh on to the next
// partition, or sets a chore to try again after a backoff.
func (c *Core) taskFailed(now time.Time, t *task, err error) {
	t.req, t.entries, t.haveEnd = 0, nil, false
	switch t.kind {
	case call:
		c.finishTask(now, t, err)
	case refresh:
		c.cfg.Logger.Warn("activetier: refreshing epoch markers failed", "partition", t.tp.String(), "err", err)
		c.finishTask(now, t, nil)
	default:
		what := "taking up leadership"
		if t.kind == catchup {
			what = "republishing for lagging followers"
		}
		c.cfg.Logger.Warn("activetier: "+what+" failed; retrying", "partition", t.tp.String(), "epoch", t.epoch, "err", err)
		c.failChore(now, t, err)
		t.wakeAt = now.Add(c.delay(t.attempt))
		t.attempt++
		c.sleeping++
	}
}

// stopTask stops t and cancels its request in flight.
func (c *Core) stopTask(t *task) {
	if !t.wakeAt.IsZero() {
		c.sleeping--
	}
	t.stopped, t.wakeAt = true, time.Time{}
	if t.req != 0 {
		c.cancel(t.req)
		t.req = 0
	}
}

// finishTask ends t, with err for a call.
func (c *Core) finishTask(now time.Time, t *task, err error) {
	c.stopTask(t)
	switch t.kind {
	case call:
		delete(c.tasks, t.id)
		c.rd.Done = append(c.rd.Done, TaskDone{ID: t.id, Err: err})
		if ld := c.leading[t.tp]; err == nil && ld != nil && ld.gen == t.gen {
			c.reached(t, ld)
		}
	case refresh:
		c.refreshing--
		c.nextRefresh(now)
	default:
		if err == nil {
			c.choreProgressed(t)
		}
		ld := c.leading[t.tp]
		if ld == nil || ld.gen != t.gen {
			return
		}
		switch {
		case ld.chore == t:
			ld.chore = nil
		case ld.catchup == t:
			c.caughtUpDone(now, ld, false)
		default:
			return
		}
		if t.republish {
			c.reached(t, ld)
			if t.kind == catchup && t.end < t.to {
				// The local log ends below what the laggards need: asking
				// again at once would read the same end. Their next
				// reports ask again.
				c.cfg.Logger.Warn("activetier: the local log ends below what lagging followers need", "partition", t.tp.String(), "end", t.end, "need", t.to)
				return
			}
		}
		c.catchUp(now, t.tp, ld)
	}
}

// duties returns ld's chore and catch-up, nil where none is under way:
// an array, so that looking at every leadership's allocates nothing.
func (ld *leadership) duties() [2]*task { return [2]*task{ld.chore, ld.catchup} }

// wakeTasks takes the next attempt of the chores and catch-ups whose
// backoff is over.
func (c *Core) wakeTasks(now time.Time) {
	if c.sleeping == 0 {
		return
	}
	for _, tp := range c.ledPartitions() {
		for _, t := range c.leading[tp].duties() {
			if t != nil && !t.wakeAt.IsZero() && !now.Before(t.wakeAt) {
				t.wakeAt = time.Time{}
				c.sleeping--
				c.advance(now, t)
			}
		}
	}
}

// startRefresh begins publishing the markers of every led partition again,
// maxBatchMarkers partitions at a time so that they share messages,
// unless the last round is still under way. A partition with a chore under
// way publishes them there.
func (c *Core) startRefresh(now time.Time) {
	if c.refreshing > 0 || len(c.refresh) > 0 {
		return
	}
	c.refresh = c.ledPartitions()
	c.nextRefresh(now)
}

// nextRefresh starts the next group of the round once the last is done.
func (c *Core) nextRefresh(now time.Time) {
	if c.refreshing > 0 {
		return
	}
	var group []*task
	for len(group) < maxBatchMarkers && len(c.refresh) > 0 {
		tp := c.refresh[0]
		c.refresh = c.refresh[1:]
		if ld := c.leading[tp]; ld != nil && ld.chore == nil {
			group = append(group, &task{kind: refresh, tp: tp, gen: ld.gen, epoch: ld.epoch, markers: true, from: -1})
		}
	}
	// Counted before any starts: one may finish at once.
	c.refreshing, c.refreshGroup = len(group), group
	for _, t := range group {
		c.advance(now, t)
	}
}

// stopRefresh ends the refresh of tp under way, if any: its lineage read
// is cancelled, or its markers, queued for the next marker message, are
// left out of it. The markers it read are of a leadership that has ended;
// published later, they would reach followers with, or after, those of
// the next leadership of tp, whose lineage may differ.
func (c *Core) stopRefresh(now time.Time, tp metadata.TopicPartition) {
	for _, t := range c.refreshGroup {
		if t.tp == tp && !t.stopped {
			c.finishTask(now, t, nil)
		}
	}
}

// markersFor returns tp's lineage as markers, from the local log's epoch
// cache, ensuring the current epoch is among them.
func (c *Core) markersFor(tp metadata.TopicPartition, epoch int32, res LocalResult) ([]metadata.EpochStart, error) {
	if res.EpochsErr != nil {
		return nil, fmt.Errorf("epochs of %s: %w", tp, res.EpochsErr)
	}
	lin, err := fencing.NewLineage(res.Epochs...)
	if err != nil || len(lin.Entries()) != len(res.Epochs) {
		return nil, fmt.Errorf("epochs of %s: %w", tp, c.cfg.Violation("LocalLog.Epochs",
			fmt.Sprintf("%v is not an ascending epoch lineage (%v)", res.Epochs, err)))
	}
	markers := make([]metadata.EpochStart, 0, len(res.Epochs)+1)
	for _, e := range res.Epochs {
		if e.Epoch > epoch {
			break // a later epoch is not this leadership's to announce
		}
		markers = append(markers, metadata.EpochStart{Partition: tp, Epoch: e.Epoch, StartOffset: e.StartOffset, LeaderBrokerID: c.cfg.BrokerID})
	}
	if n := len(markers); n == 0 || markers[n-1].Epoch < epoch {
		if res.EndErr != nil {
			return nil, fmt.Errorf("end offset of %s: %w", tp, res.EndErr)
		}
		leo := res.End
		if n > 0 && markers[n-1].StartOffset > leo {
			return nil, fmt.Errorf("epochs of %s: %w", tp, c.cfg.Violation("LocalLog",
				fmt.Sprintf("epoch %d starts at %d, past the end offset %d", markers[n-1].Epoch, markers[n-1].StartOffset, leo)))
		}
		if n > 0 && markers[n-1].StartOffset == leo {
			markers = markers[:n-1] // an epoch with no records is superseded at once
		}
		markers = append(markers, metadata.EpochStart{Partition: tp, Epoch: epoch, StartOffset: leo, LeaderBrokerID: c.cfg.BrokerID})
	}
	return markers, nil
}

// checkRead checks what LocalLog.Read returned for offset from of a log
// ending at end: whole batches in offset order, the first holding from or
// starting above it (records below the log start are gone). Batches past
// end are records appended since; the caller leaves them out.
func (c *Core) checkRead(batches []storage.Batch, from, end int64) error {
	bad := func(format string, args ...any) error {
		return c.cfg.Violation("LocalLog.Read", fmt.Sprintf(format, args...))
	}
	if len(batches) == 0 {
		return bad("nothing at %d below the end offset %d", from, end)
	}
	if batches[0].LastOffset < from {
		return bad("first batch %d-%d ends below %d", batches[0].FirstOffset, batches[0].LastOffset, from)
	}
	for i, b := range batches {
		switch {
		case b.FirstOffset < 0 || b.LastOffset < b.FirstOffset || b.Epoch < 0 || len(b.Data) == 0:
			return bad("invalid batch (epoch %d, offsets %d-%d, %d bytes)", b.Epoch, b.FirstOffset, b.LastOffset, len(b.Data))
		case i > 0 && (b.FirstOffset != batches[i-1].LastOffset+1 || b.Epoch < batches[i-1].Epoch):
			return bad("batch %d-%d (epoch %d) does not continue %d-%d (epoch %d)", b.FirstOffset, b.LastOffset, b.Epoch,
				batches[i-1].FirstOffset, batches[i-1].LastOffset, batches[i-1].Epoch)
		}
	}
	return nil
}

// ledPartitions returns the partitions the engine leads, in order, so that
// work over many partitions happens in the same order on every run.
func (c *Core) ledPartitions() []metadata.TopicPartition {
	tps := make([]metadata.TopicPartition, 0, len(c.leading))
	for tp := range c.leading {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, metadata.TopicPartition.Compare)
	return tps
}

// sortedTasks returns the ids of the Republish calls under way, in order.
func (c *Core) sortedTasks() []uint64 {
	ids := make([]uint64, 0, len(c.tasks))
	for id := range c.tasks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
