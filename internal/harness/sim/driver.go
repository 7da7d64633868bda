package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/activetier/activetier/election"
	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// numAZs is how many availability zones every simulated cluster has.
const numAZs = 3

// azName names AZ i (from 0), and bucketName its bucket.
func azName(i int) string     { return "az" + strconv.Itoa(i+1) }
func bucketName(i int) string { return "bucket-" + azName(i) }

// The kinds of step the driver takes.
const (
	stepProduce = iota
	stepZombieProduce
	stepFault
	stepOutage
	stepElection
	stepFollowerCrash
	stepBrokerCrash
	stepReassign
	numSteps
)

// convergeBound is how long, in simulated time, followers have to catch up
// once faults stop. Everything the engines wait for is bounded well below
// it: backoffs (at most 500ms here), marker refreshes (at most 3s), the
// metadata view's last delayed deliveries (at most 3s).
const convergeBound = 60 * time.Second

// epoch is where every run's simulated clock starts.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Run runs one simulation and returns what it found. It runs on the
// caller's goroutine, starts none, and reads no clock but its own: the
// same Config gives the same Result, trace included, byte for byte.
func Run(cfg Config) *Result {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x73696d756c617465))
	w := &world{
		cfg: cfg, p: drawParams(rng, cfg), rng: rng, start: epoch, clock: epoch,
		brokers:  make(map[int32]*broker),
		parts:    make(map[metadata.TopicPartition]*partState),
		registry: make(map[batchKey]batchMeta),
		objects:  make(map[metadata.ObjectRef]*object),
		sections: make(map[metadata.TopicPartition][]storedSection),
	}
	if cfg.TraceWriter != nil {
		w.sink = func(line string) { fmt.Fprintln(cfg.TraceWriter, line) }
	}
	if w.contractOn() {
		w.model = newModel(w)
	}
	if cfg.Attacks {
		w.adv = newAdversary(w)
	}
	w.tracef("seed %d: %s", cfg.Seed, w.p)
	if err := w.setup(); err != nil {
		w.violate(KindHarness, "setup: %v", err)
	} else {
		w.nextStep()
		if w.adv != nil {
			w.adv.next()
		}
		w.at(w.start.Add(w.p.faultyFor), w.quietPhase)
		w.loop()
		if !w.done && !w.failed() {
			w.violate(KindHarness, "nothing left to happen before the run ended")
		}
	}
	w.shutdown()
	return w.result()
}

func (w *world) setup() error {
	buckets := make(map[string]string, numAZs)
	for i := range numAZs {
		buckets[azName(i)] = bucketName(i)
	}
	var err error
	// Latency and faults are chaos's; memstore only stores.
	w.chaos = newChaos(w.cfg.Seed, w.p.profile)
	w.cluster, err = memstore.NewCluster(memstore.ClusterConfig{Buckets: buckets, Seed: w.cfg.Seed, Clock: simClock{w}})
	if err != nil {
		return err
	}
	w.meta, err = memstore.NewLog(w.p.metaPartitions, memstore.WithMaxPollWait(0))
	if err != nil {
		return err
	}
	for i := range w.p.brokers {
		id := int32(i + 1)
		b := &broker{w: w, id: id, az: azName(i % numAZs), log: newBrokerLog(), up: true,
			view: make(map[metadata.TopicPartition]viewEntry), since: make(map[metadata.TopicPartition]uint64), paused: make(map[metadata.TopicPartition]bool)}
		st, err := w.cluster.Store(b.az)
		if err != nil {
			return err
		}
		b.store = newSimStore(st, w, b)
		w.brokers[id] = b
		w.ids = append(w.ids, id)
	}
	ctx := context.Background()
	for i := range w.p.partitions {
		tp := metadata.TopicPartition{Topic: "t", Partition: int32(i)}
		w.tps = append(w.tps, tp)
		perm := w.rng.Perm(len(w.ids))
		ps := &partState{tp: tp, epoch: int32(1 + w.rng.IntN(3)), starts: make(map[int32]int64), zombies: make(map[int32]int32), durChecked: -1}
		for _, j := range perm[:w.p.rf] {
			ps.replicas = append(ps.replicas, w.ids[j])
		}
		ps.leader = ps.replicas[0]
		base := choose[int64](w.rng, 0, 0, 1000)
		l := w.brokers[ps.leader].log
		if err := l.Truncate(ctx, tp, base); err != nil {
			return err
		}
		if err := l.assignEpoch(tp, ps.epoch, base); err != nil {
			return err
		}
		ps.starts[ps.epoch] = base
		w.parts[tp] = ps
		for _, id := range w.ids {
			w.brokers[id].setView(tp, viewEntry{replicas: ps.replicas, leader: ps.leader, epoch: ps.epoch})
		}
		w.tracef("%s: replicas %v, leader b%d at epoch %d from offset %d", tp, ps.replicas, ps.leader, ps.epoch, base)
	}
	for _, id := range w.ids {
		w.brokers[id].start()
	}
	for _, tp := range w.tps {
		ps := w.parts[tp]
		b := w.brokers[ps.leader]
		b.node.becomeLeader(tp, ps.epoch, b.followersOf(tp), -1)
	}
	w.every(time.Duration(300+w.rng.IntN(1700))*time.Millisecond, w.trimMetadata)
	w.startReaders()
	return nil
}

// simClock is the simulated clock, for memstore's object timestamps.
type simClock struct{ w *world }

func (c simClock) Now() time.Time { return c.w.clock }

// After is never called: the simulation's stores and log do not wait.
func (c simClock) After(time.Duration) <-chan time.Time {
	panic("sim: nothing waits on the simulated clock")
}

// nextStep schedules the driver's next step of the faulty phase, after an
// exponentially distributed pause. Before each, the invariants that need
// a consistent state are checked: between two events, every state is.
func (w *world) nextStep() {
	w.after(time.Duration(w.rng.ExpFloat64()*float64(w.p.stepMean)), func() {
		if w.quiet {
			return
		}
		w.checkQuiescent()
		if w.failed() {
			return
		}
		w.stats.Steps++
		w.takeStep()
		w.nextStep()
	})
}

func (w *world) takeStep() {
	kind := w.pickStep()
	sr := rand.New(rand.NewPCG(w.rng.Uint64(), uint64(w.stats.Steps)))
	switch kind {
	case stepProduce:
		tp := w.tps[sr.IntN(len(w.tps))]
		ps := w.parts[tp]
		if b := w.brokers[ps.leader]; b.up && b.node != nil {
			w.produce(b, tp, ps.epoch, sr)
		}
	case stepZombieProduce:
		w.zombieProduce(sr)
	case stepFault:
		w.addFault(sr)
	case stepOutage:
		w.outage(sr)
	case stepElection:
		tp := w.tps[sr.IntN(len(w.tps))]
		old := w.brokers[w.parts[tp].leader]
		w.elect(tp, sr, old.up && old.node != nil && sr.Float64() < 0.4, false, false)
	case stepFollowerCrash:
		w.followerCrash(sr)
	case stepBrokerCrash:
		w.brokerCrash(sr)
	case stepReassign:
		w.reassign(sr)
	}
}

func (w *world) pickStep() int {
	weights := w.p.weights
	if w.zombieCount() == 0 {
		weights[stepZombieProduce] = 0
	}
	var total float64
	for _, x := range weights {
		total += x
	}
	r := w.rng.Float64() * total
	for k, x := range weights {
		if r < x {
			return k
		}
		r -= x
	}
	return stepProduce
}

func (w *world) zombieCount() int {
	n := 0
	for _, tp := range w.tps {
		n += len(w.parts[tp].zombies)
	}
	return n
}

// produce appends one batch of tp at epoch to b, a leader or a zombie:
// first to its leader core, then, if the core took it, to its log. A
// batch the engine refuses (full buffer, not leading yet) is a failed
// produce request: it is in no log.
func (w *world) produce(b *broker, tp metadata.TopicPartition, epoch int32, sr *rand.Rand) bool {
	n := int64(1 + sr.IntN(w.p.maxRecords))
	size := 40 + sr.IntN(960)
	if sr.Float64() < w.p.largeP {
		size = 4<<10 + sr.IntN(60<<10)
	}
	return w.produceBatch(b, tp, epoch, n, size, sr)
}

// produceBatch appends a batch of n records and about size bytes; see
// produce.
func (w *world) produceBatch(b *broker, tp metadata.TopicPartition, epoch int32, n int64, size int, sr *rand.Rand) bool {
	first := b.log.end(tp)
	batch := makeBatch(tp, epoch, first, first+n-1, size, sr.Uint64(), w.clock)
	key := batchKey{tp, epoch, first}
	m := metaOf(batch)
	if old, ok := w.registry[key]; ok {
		w.violate(KindHarness, "b%d produced %s of %s twice (before: %v)", b.id, m, tp, old)
	}
	w.registry[key] = m
	if err := b.node.append(tp, batch); err != nil {
		delete(w.registry, key)
		w.stats.Rejected++
		w.tracef("b%d produce %s %s rejected: %v", b.id, tp, m, err)
		return false
	}
	if err := b.log.Append(context.Background(), tp, []storage.Batch{batch}); err != nil {
		w.violate(KindHarness, "b%d: appending its own produce %s of %s: %v", b.id, m, tp, err)
		return false
	}
	w.stats.Produced++
	w.tracef("b%d produces %s %s (%d bytes)", b.id, tp, m, len(batch.Data))
	if w.adv != nil {
		w.adv.accepted(b, tp, m)
	}
	if sr.Float64() < w.p.ackP {
		b.node.awaitDurable(tp, m)
	}
	return true
}

// makeBatch returns a batch whose bytes depend on everything that names
// it, compressible or not as the seed says.
func makeBatch(tp metadata.TopicPartition, epoch int32, first, last int64, size int, seed uint64, now time.Time) storage.Batch {
	head := fmt.Sprintf("%s e%d [%d,%d] ", tp, epoch, first, last)
	data := make([]byte, max(size, len(head)))
	copy(data, head)
	r := rand.New(rand.NewPCG(seed, uint64(first)))
	random := r.IntN(2) == 0
	for i := len(head); i < len(data); i++ {
		if random {
			data[i] = byte(r.Uint32())
		} else {
			data[i] = "abcdefghijklmnop"[(i+int(first))%16]
		}
	}
	return storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, MaxTimestamp: now.UnixMilli(), Data: data}
}

func (w *world) zombieProduce(sr *rand.Rand) {
	type z struct {
		tp    metadata.TopicPartition
		b     *broker
		epoch int32
	}
	var zs []z
	for _, tp := range w.tps {
		ps := w.parts[tp]
		for _, id := range sortedKeys(ps.zombies) {
			if b := w.brokers[id]; b.up && b.node != nil {
				zs = append(zs, z{tp, b, ps.zombies[id]})
			}
		}
	}
	if len(zs) == 0 {
		return
	}
	c := zs[sr.IntN(len(zs))]
	if w.produce(c.b, c.tp, c.epoch, sr) {
		w.stats.ZombieProduced++
	}
}

func sortedKeys[V any](m map[int32]V) []int32 {
	keys := make([]int32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// addFault injects a store fault for a while: failed or slow uploads, GETs
// or deletes, responses lost after the request took effect, corrupted GETs.
func (w *world) addFault(sr *rand.Rand) {
	f := &fault{rate: choose(sr, 0.05, 0.3, 0.8, 1)}
	if sr.IntN(2) == 0 {
		f.bucket = bucketName(sr.IntN(numAZs))
	}
	switch sr.IntN(6) {
	case 0:
		f.op, f.err, f.afterApply = faults.OpPut, true, sr.IntN(3) == 0
	case 1:
		f.op, f.err = faults.OpGetRange, true
	case 2:
		f.op, f.delay = faults.OpGetRange, time.Duration(10+sr.IntN(1000))*time.Millisecond
	case 3:
		f.op, f.delay = faults.OpPut, time.Duration(10+sr.IntN(2000))*time.Millisecond
	case 4:
		f.op, f.corrupt = faults.OpGetRange, true
		f.rate = choose(sr, 0.05, 0.3, 1)
	case 5:
		f.op, f.err, f.afterApply = faults.OpDelete, true, sr.IntN(2) == 0
	}
	d := time.Duration(100+sr.IntN(4000)) * time.Millisecond
	desc := fmt.Sprintf("%s fault on %q: rate %.2f, error %v (after it took effect %v), delay %v, corrupt %v, for %v",
		f.op, f.bucket, f.rate, f.err, f.afterApply, f.delay, f.corrupt, d)
	remove := w.chaos.add(f)
	w.tracef("fault: %s", desc)
	w.stats.Faults++
	w.step(d, func() {
		remove()
		w.tracef("fault over: %s", desc)
	})
}

// outage takes an AZ's bucket away for a while; sometimes the AZ's brokers
// go down with it, and leadership moves away from them.
func (w *world) outage(sr *rand.Rand) {
	az := azName(sr.IntN(numAZs))
	crash := sr.IntN(2) == 0
	elect := sr.Float64() < 0.8
	d := time.Duration(300+sr.IntN(6000)) * time.Millisecond
	if err := w.cluster.SetOutage(az, true); err != nil {
		w.violate(KindHarness, "SetOutage: %v", err)
		return
	}
	w.stats.Outages++
	w.tracef("outage: %s's bucket goes down for %v (brokers crash: %v)", az, d, crash)
	var crashed []*broker
	if crash {
		for _, id := range w.ids {
			if b := w.brokers[id]; b.az == az && b.up {
				w.crashBroker(b)
				crashed = append(crashed, b)
			}
		}
		if elect {
			for _, b := range crashed {
				w.electAwayFrom(b, sr)
			}
		}
	}
	w.step(d, func() {
		if err := w.cluster.SetOutage(az, false); err != nil {
			w.violate(KindHarness, "SetOutage: %v", err)
		}
		w.tracef("outage over: %s's bucket is back", az)
		for _, b := range crashed {
			if !b.up {
				w.restartBroker(b, sr)
			}
		}
	})
}

// electAwayFrom elects new leaders for the partitions b led.
func (w *world) electAwayFrom(b *broker, sr *rand.Rand) {
	for _, tp := range w.tps {
		if w.parts[tp].leader == b.id {
			w.elect(tp, sr, false, false, false)
		}
	}
}

// elect makes the controller choose a new leader for tp by package
// election's rule, with a newer epoch, among the replicas that are up, not
// zombies, and in sync: their log is a prefix of the true log (the current
// leader's) that reaches the committed offset. Within the rule it draws
// which eligible replica leads, whether the longest log does, and how many
// epochs it skips, so that every choice the rule allows is explored. The
// old leader resigns, or, if zombie is set, is not told and keeps leading
// in its own view: the adversary the rule knows nothing of. allowSame lets
// the current leader be chosen again (after a restart); keep makes it the
// choice, republishing its whole log (a reassignment).
func (w *world) elect(tp metadata.TopicPartition, sr *rand.Rand, zombie, allowSame, keep bool) bool {
	ps := w.parts[tp]
	old := w.brokers[ps.leader]
	truthStart, truth := old.log.snapshot(tp)
	part := election.Partition{Leader: ps.leader, Epoch: ps.epoch}
	for _, id := range ps.replicas {
		b := w.brokers[id]
		_, z := ps.zombies[id]
		r := election.Replica{ID: id, Live: b.up && b.node != nil && !z}
		if r.Live {
			// In sync, as far as a prefix can be: its log reaches the
			// true log's start at least (a new replica that has not
			// bootstrapped yet does not), so the partition's log never
			// moves backwards, and it holds every record a leader
			// committed (the in-sync replicas do), so a direct reader's
			// records are never lost.
			s, l := b.log.snapshot(tp)
			r.End = end(s, l)
			r.InSync = isPrefix(s, l, truthStart, truth) && r.End >= max(truthStart, ps.committed)
		}
		part.Replicas = append(part.Replicas, r)
	}
	var opts election.Options
	if !allowSame {
		opts.Exclude = []int32{ps.leader}
	}
	cands, err := election.Eligible(part, opts)
	if err != nil {
		w.violate(KindHarness, "%s: %v", tp, err)
		return false
	}
	pickLongest := sr.Float64() < 0.7
	pick := sr.IntN(max(len(cands), 1))
	bump := int32(1 + sr.IntN(2))
	if len(cands) == 0 {
		w.tracef("%s: no replica can take over from b%d", tp, old.id)
		return false
	}
	chosen := cands[pick].ID
	if keep {
		if !slices.ContainsFunc(cands, func(c election.Replica) bool { return c.ID == old.id }) {
			w.tracef("%s: leader b%d cannot take a new epoch", tp, old.id)
			return false
		}
		chosen, pickLongest = old.id, false
	}
	// The drawn replica goes first: the rule elects it, or, preferring
	// the longest log, it wins the ties.
	i := slices.IndexFunc(part.Replicas, func(r election.Replica) bool { return r.ID == chosen })
	first := part.Replicas[i]
	part.Replicas = slices.Insert(slices.Delete(part.Replicas, i, i+1), 0, first)
	opts.Longest, opts.Skip = pickLongest, bump-1
	d, err := election.Elect(part, opts)
	if err != nil {
		w.violate(KindHarness, "%s: %v", tp, err)
		return false
	}
	n, epoch := w.brokers[d.Leader], d.Epoch
	if n != old {
		// The candidate's follower side stops before its log is judged
		// again and its end read (where the new epoch starts): until
		// StopReplica returns it may append, and a batch it appends in
		// between, of an epoch a marker it has not read yet fences, would
		// make a log that is not a prefix of the true log the leader's.
		n.node.stopReplica(tp)
		wasPaused := n.pause(tp) // the reference follower's StopReplica
		if s, l := n.log.snapshot(tp); !isPrefix(s, l, truthStart, truth) || end(s, l) < truthStart {
			w.tracef("%s: b%d's log changed before its follower side stopped; no election", tp, n.id)
			if !wasPaused {
				w.resume(n, tp)
			}
			return false
		}
	}
	if old.up && old.node != nil && old != n && zombie {
		ps.zombies[old.id] = ps.epoch
		w.stats.Zombies++
		w.tracef("%s: b%d becomes a zombie, still leading epoch %d in its own view", tp, old.id, ps.epoch)
		oldEpoch := ps.epoch
		w.step(time.Duration(200+sr.IntN(4000))*time.Millisecond, func() { w.heal(tp, old, oldEpoch) })
	}
	start := n.log.end(tp)
	if err := n.log.assignEpoch(tp, epoch, start); err != nil {
		w.violate(KindHarness, "b%d: epoch %d of %s at %d: %v", n.id, epoch, tp, start, err)
		return false
	}
	// Republish from the lowest offset up to which every replica agrees
	// with the new leader (the marker contract's F).
	nStart, nLog := n.log.snapshot(tp)
	from := start
	for _, id := range ps.replicas {
		if id != n.id {
			s, l := w.brokers[id].log.snapshot(tp)
			from = min(from, commonEnd(s, l, nLog))
		}
	}
	from = max(from, nStart)
	if keep {
		from = nStart
	}
	if from >= start {
		from = -1
	}
	ps.leader, ps.epoch, ps.durChecked = n.id, epoch, -1
	ps.starts[epoch] = start
	w.stats.Elections++
	w.tracef("%s: b%d elected at epoch %d from offset %d (was b%d), republishing from %d", tp, n.id, epoch, start, old.id, from)
	// The replicas learn of the new epoch before its leader publishes
	// anything: a follower holds markers of an epoch its broker has not
	// been told, and the fence checks count only what it acts on.
	w.updateViews(tp, n.id, epoch)
	n.node.becomeLeader(tp, epoch, n.followersOf(tp), from)
	w.checkReadersAfterElection(tp)
	return true
}

// updateViews tells every broker that is up and not a zombie of tp that
// leader leads tp at epoch.
func (w *world) updateViews(tp metadata.TopicPartition, leader, epoch int32) {
	ps := w.parts[tp]
	for _, id := range w.ids {
		if _, z := ps.zombies[id]; z || !w.brokers[id].up {
			continue
		}
		w.brokers[id].setView(tp, viewEntry{replicas: ps.replicas, leader: leader, epoch: epoch})
	}
}

// heal lets a zombie learn it was deposed: it resigns and follows.
func (w *world) heal(tp metadata.TopicPartition, b *broker, epoch int32) {
	ps := w.parts[tp]
	if e, ok := ps.zombies[b.id]; !ok || e != epoch || !b.up {
		return
	}
	delete(ps.zombies, b.id)
	w.tracef("%s: zombie b%d learns it was deposed and follows", tp, b.id)
	w.updateViews(tp, ps.leader, ps.epoch)
}

// crashBroker stops b's engines; its log survives.
func (w *world) crashBroker(b *broker) {
	b.halt()
	b.up = false
	for _, tp := range w.tps {
		delete(w.parts[tp].zombies, b.id)
	}
	w.stats.Crashes++
	w.tracef("b%d crashes", b.id)
}

// restartBroker brings b back with new engines and the controller's
// current view; partitions it still leads get a new epoch.
func (w *world) restartBroker(b *broker, sr *rand.Rand) {
	b.up = true
	for _, tp := range w.tps {
		ps := w.parts[tp]
		b.setView(tp, viewEntry{replicas: ps.replicas, leader: ps.leader, epoch: ps.epoch})
	}
	b.start()
	w.tracef("b%d restarts", b.id)
	for _, tp := range w.tps {
		if w.parts[tp].leader == b.id {
			w.elect(tp, sr, false, true, false)
		}
	}
}

// followerCrash makes a broker stop replicating a partition it follows
// for a while, and follow it again: a replica taken offline and back, the
// role flap the engines must survive without stale state.
func (w *world) followerCrash(sr *rand.Rand) {
	id := w.ids[sr.IntN(len(w.ids))]
	tp := w.tps[sr.IntN(len(w.tps))]
	b := w.brokers[id]
	d := time.Duration(50+sr.IntN(3000)) * time.Millisecond
	if !b.up || b.node == nil || !b.follows(tp) {
		return
	}
	b.pause(tp)
	b.node.stopReplica(tp)
	w.stats.FollowerRestarts++
	w.tracef("b%d stops following %s for %v", b.id, tp, d)
	w.step(d, func() { w.resume(b, tp) })
}

// resume ends b's pause of tp, if any: b follows tp again.
func (w *world) resume(b *broker, tp metadata.TopicPartition) {
	if b.ref != nil {
		b.stopRef()
		defer b.startRef()
	}
	paused := b.paused[tp]
	delete(b.paused, tp)
	b.since[tp]++
	if paused && b.up && b.node != nil && b.follows(tp) {
		w.tracef("b%d follows %s again", b.id, tp)
		b.follow(tp)
	}
}

func (w *world) brokerCrash(sr *rand.Rand) {
	id := w.ids[sr.IntN(len(w.ids))]
	b := w.brokers[id]
	d := time.Duration(300+sr.IntN(5000)) * time.Millisecond
	elect := sr.Float64() < 0.6
	if !b.up {
		return
	}
	w.crashBroker(b)
	if elect {
		w.electAwayFrom(b, sr)
	}
	w.step(d, func() {
		if !b.up {
			w.restartBroker(b, sr)
		}
	})
}

// reassign moves one follower replica of a partition to a broker that does
// not hold it: the new replica starts with an empty log and epoch cache,
// the old one deletes its copy, and the leader republishes its whole log
// for the newcomer.
func (w *world) reassign(sr *rand.Rand) {
	tp := w.tps[sr.IntN(len(w.tps))]
	ps := w.parts[tp]
	l := w.brokers[ps.leader]
	var outs, ins []*broker
	for _, id := range w.ids {
		b := w.brokers[id]
		_, z := ps.zombies[id]
		switch {
		case id == ps.leader || z:
		case slices.Contains(ps.replicas, id):
			outs = append(outs, b)
		case b.up:
			ins = append(ins, b)
		}
	}
	i, j := sr.IntN(max(len(outs), 1)), sr.IntN(max(len(ins), 1))
	if !l.up || l.node == nil || len(outs) == 0 || len(ins) == 0 {
		return
	}
	out, in := outs[i], ins[j]
	// Both logs of tp are deleted: the old replica's, and whatever the
	// new one held from an earlier assignment. Their nodes stop
	// replicating tp first (StopReplica returns once no append is in
	// flight); the new replica then follows with an empty log.
	for _, b := range []*broker{out, in} {
		if b.node != nil {
			b.node.stopReplica(tp)
		}
		b.log.remove(tp)
	}
	ps.replicas = slices.Clone(ps.replicas)
	ps.replicas[slices.Index(ps.replicas, out.id)] = in.id
	w.stats.Reassignments++
	w.updateViews(tp, ps.leader, ps.epoch)
	w.tracef("%s: replica moves from b%d to b%d", tp, out.id, in.id)
	// As Kafka's controller does when a reassignment changes the replica
	// set, the leader takes a new epoch; it republishes its whole log for
	// the newcomer.
	w.elect(tp, sr, false, true, true)
}

// trimMetadata trims the metadata log behind what every running leader
// engine still needs.
func (w *world) trimMetadata() {
	var marks []map[int32]int64
	for _, id := range w.ids {
		if b := w.brokers[id]; b.up && b.node != nil {
			marks = append(marks, b.node.lc.LowMarks())
		}
	}
	if len(marks) == 0 {
		return
	}
	if err := walstore.TrimMetadata(context.Background(), w.meta, marks...); err != nil {
		w.violate(KindEngineError, "TrimMetadata: %v", err)
		return
	}
	w.stats.Trims++
}

// quietPhase ends every fault: faults and outages end, zombies learn,
// brokers and engines come back, metadata arrives in order. Then each
// partition gets one more batch, so every leader has data to make durable,
// and every follower must catch up.
func (w *world) quietPhase() {
	w.tracef("faults stop")
	w.quiet = true // the driver's pending steps lapse
	sr := rand.New(rand.NewPCG(w.rng.Uint64(), 0))
	w.chaos.clear()
	for i := range numAZs {
		if err := w.cluster.SetOutage(azName(i), false); err != nil {
			w.violate(KindHarness, "SetOutage: %v", err)
		}
	}
	for _, id := range w.ids {
		if b := w.brokers[id]; !b.up {
			w.restartBroker(b, sr)
		}
	}
	for _, tp := range w.tps {
		ps := w.parts[tp]
		for _, id := range sortedKeys(ps.zombies) {
			w.heal(tp, w.brokers[id], ps.zombies[id])
		}
		for _, id := range w.ids {
			w.resume(w.brokers[id], tp)
		}
	}
	w.lastBatches(sr, 0, 0)
}

// lastBatches produces one more batch to every partition from the i-th,
// retrying one its leader refuses every 10ms, for 10s at most; then it
// waits for convergence.
func (w *world) lastBatches(sr *rand.Rand, i, attempt int) {
	for ; i < len(w.tps); i++ {
		tp := w.tps[i]
		ps := w.parts[tp]
		b := w.brokers[ps.leader]
		if b.node != nil && w.produce(b, tp, ps.epoch, sr) {
			attempt = 0
			continue
		}
		if attempt == 1000 {
			w.violate(KindNoProgress, "%s: leader b%d refuses produce for 10s after faults stopped", tp, ps.leader)
			return
		}
		w.after(10*time.Millisecond, func() { w.lastBatches(sr, i, attempt+1) })
		return
	}
	w.converge(w.clock)
}

// converge checks every 50ms whether every replica's log is its leader's,
// byte for byte, and every leader's data is durable; it ends the run when
// they are, or reports what is stuck after convergeBound.
func (w *world) converge(from time.Time) {
	w.after(50*time.Millisecond, func() {
		w.checkQuiescent()
		if w.failed() {
			return
		}
		if len(w.unconverged())+len(w.readersBehind()) == 0 {
			w.stats.Converged = w.clock.Sub(from)
			w.tracef("converged after %v", w.stats.Converged)
			w.compareBytes()
			w.checkReadersFinal()
			if w.model != nil {
				w.model.finalAcks()
			}
			w.done = true
			return
		}
		if w.clock.Sub(from) >= convergeBound {
			kind := KindNoProgress
			if w.cfg.Attacks {
				kind = KindFollowerStuck
			}
			w.violate(kind, "%v after faults stopped:\n%s", convergeBound, strings.Join(append(w.unconverged(), w.readersBehind()...), "\n"))
			return
		}
		w.converge(from)
	})
}

// unconverged describes every partition whose replicas or durable offset
// have not caught up with its leader.
func (w *world) unconverged() []string {
	var out []string
	for _, tp := range w.tps {
		ps := w.parts[tp]
		l := w.brokers[ps.leader]
		start, truth := l.log.snapshot(tp)
		d := int64(-1)
		if l.node != nil {
			d = l.node.durableOffset(tp)
		}
		if d != end(start, truth) {
			out = append(out, fmt.Sprintf("  %s: leader b%d (epoch %d) has durable offset %d, log end %d", tp, l.id, ps.epoch, d, end(start, truth)))
		}
		for _, id := range ps.replicas {
			if id == l.id {
				continue
			}
			s, log := w.brokers[id].log.snapshot(tp)
			// History below the leader's log start may differ: it is
			// no longer the partition's, and no follower fetches it.
			if i := covering(log, start); len(truth) > 0 && i >= 0 {
				log = log[i:]
			}
			if !slices.Equal(log, truth) {
				held, lag := -1, int64(-1)
				if n := w.brokers[id].node; n != nil && n.fc != nil {
					held, lag = n.fc.Held, n.lag[tp]
				}
				out = append(out, fmt.Sprintf("  %s: b%d has [%d, %d) %s, leader b%d has [%d, %d) %s (follower: held %d, lag %d)",
					tp, id, s, end(s, log), tail(log), l.id, start, end(start, truth), tail(truth), held, lag))
			}
		}
	}
	return out
}

func tail(m []batchMeta) string {
	if len(m) > 3 {
		return fmt.Sprintf("...%v", m[len(m)-3:])
	}
	return fmt.Sprint(m)
}

// compareBytes compares every replica's log with its leader's, byte for
// byte, after they converged by batch hashes.
func (w *world) compareBytes() {
	for _, tp := range w.tps {
		ps := w.parts[tp]
		want := w.brokers[ps.leader].log.batches(tp)
		for _, id := range ps.replicas {
			got := w.brokers[id].log.batches(tp)
			for len(want) > 0 && len(got) > 0 && got[0].FirstOffset < want[0].FirstOffset {
				got = got[1:]
			}
			if len(got) != len(want) {
				w.violate(KindCorruptAppend, "%s: b%d has %d batches, its leader b%d %d", tp, id, len(got), ps.leader, len(want))
				continue
			}
			for i := range want {
				if got[i].Epoch != want[i].Epoch || got[i].FirstOffset != want[i].FirstOffset || string(got[i].Data) != string(want[i].Data) {
					w.violate(KindCorruptAppend, "%s: b%d's batch %d differs from its leader b%d's", tp, id, i, ps.leader)
					break
				}
			}
		}
	}
}

func (w *world) shutdown() {
	for _, id := range w.ids {
		w.brokers[id].halt()
	}
	for _, r := range w.readers {
		r.close()
	}
	if w.meta != nil {
		w.meta.Close()
	}
}
