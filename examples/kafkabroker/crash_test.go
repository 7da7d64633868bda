package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/activetier/activetier/examples/kafkabroker/broker"
	"github.com/activetier/activetier/internal/harness/testenv"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// The crash test's environment: ACTIVETIER_CRASH_LONG=1 runs the long
// form, ACTIVETIER_CRASH_SEED=n replays a run's schedule.
const (
	crashLongEnv = "ACTIVETIER_CRASH_LONG"
	crashSeedEnv = "ACTIVETIER_CRASH_SEED"
)

// crashForm is one form of TestCrash.
type crashForm struct {
	name         string
	kills        int           // leaders killed, one after the other
	every        time.Duration // between kills (and from the start to the first)
	detect       time.Duration // from a kill to the controller's BrokerFailed
	restartAfter time.Duration // from a kill to the broker's restart on its data
	rate         int           // records per second, per producer
	catchUp      time.Duration // the bound: a restarted broker is back in every in-sync set within it
	// quick is how soon after a restart the next kill comes when the
	// schedule makes it come while the restarted broker catches up, out
	// of the in-sync sets (half of the kills after the first, by the
	// seed; in the short form, always the second).
	quick time.Duration
}

var (
	crashShort = crashForm{name: "short", kills: 2, every: 12 * time.Second, detect: 300 * time.Millisecond,
		restartAfter: 4 * time.Second, rate: 200, catchUp: 30 * time.Second, quick: 500 * time.Millisecond}
	crashLong = crashForm{name: "long", kills: 6, every: 24 * time.Second, detect: 300 * time.Millisecond,
		restartAfter: 4 * time.Second, rate: 300, catchUp: 30 * time.Second, quick: 500 * time.Millisecond}
)

// ack is a record a producer was told was stored.
type ack struct {
	partition int32
	offset    int64
	value     string
}

// ackLog is a producer's acknowledgements and failures.
type ackLog struct {
	mu      sync.Mutex
	acks    []ack
	failed  map[string]int // why, how many
	last    time.Time      // of the latest acknowledgement
	longest time.Duration  // between two acknowledgements
}

func (l *ackLog) acked(a ack, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acks = append(l.acks, a)
	if !l.last.IsZero() && at.After(l.last) {
		l.longest = max(l.longest, at.Sub(l.last))
	}
	if at.After(l.last) {
		l.last = at
	}
}

func (l *ackLog) fail(why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed == nil {
		l.failed = make(map[string]int)
	}
	l.failed[why]++
}

// TestCrash kills partition leaders with SIGKILL while kgo (at its
// defaults: acks=all, idempotent) and librdkafka (confluent-kafka, acks=all,
// idempotent) produce, tells the controller after detect, restarts each
// killed broker on its own data after restartAfter, and lets it rejoin.
// At the end, a Jepsen-style check of every broker's log: no acknowledged
// record lost, none stored twice, none at another offset than it was
// acknowledged at, no offset where two brokers' logs differ (they are
// compared batch for batch, byte for byte), and every restarted broker
// back in every in-sync set within the stated bound, the time it took
// reported. The short form (2 kills, 12 s apart) runs in the suite;
// ACTIVETIER_CRASH_LONG=1 runs 6 kills 24 s apart. Some kills come right
// after a restart, while the restarted broker is still out of the
// in-sync sets (always the short form's second), so that an election
// that took it would truncate acknowledged records. The schedule (when,
// and which leader) comes from a printed seed, replayed with
// ACTIVETIER_CRASH_SEED.
func TestCrash(t *testing.T) {
	t.Parallel() // its own processes, buckets and metadata cluster
	form := crashShort
	if os.Getenv(crashLongEnv) != "" {
		form = crashLong
	}
	seed := rand.Uint64()
	if s := os.Getenv(crashSeedEnv); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "%s", crashSeedEnv)
	}
	t.Logf("%s form: %d kills %v apart, the controller told after %v, restarts after %v, %d records/s per producer; seed %d (replay with %s=%d)",
		form.name, form.kills, form.every, form.detect, form.restartAfter, form.rate, seed, crashSeedEnv, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	python := testenv.Python(t, "confluent_kafka", "python3-confluent-kafka")
	const partitions = 6
	topics := []string{"crash-kgo", "crash-rdkafka"}
	c := startProcCluster(t, map[string]int{topics[0]: partitions, topics[1]: partitions})
	logs := map[string]*ackLog{topics[0]: {}, topics[1]: {}}

	// kgo at its defaults.
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	require.NoError(t, err)
	defer prod.Close()
	stopKgo := make(chan struct{})
	var producing sync.WaitGroup
	producing.Go(func() {
		tick := time.NewTicker(time.Second / time.Duration(form.rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopKgo:
				return
			case <-tick.C:
			}
			prod.Produce(t.Context(), &kgo.Record{Topic: topics[0], Value: fmt.Appendf(nil, "kgo-%d", i)}, func(r *kgo.Record, err error) {
				if err != nil {
					logs[topics[0]].fail(err.Error())
					return
				}
				logs[topics[0]].acked(ack{r.Partition, r.Offset, string(r.Value)}, time.Now())
			})
		}
	})
	// librdkafka, through confluent-kafka.
	rd := startCrashProducer(t, python, strings.Join(c.seeds(), ","), topics[1], partitions, form.rate, logs[topics[1]])

	// The schedule.
	began := time.Now()
	type restart struct {
		broker      int
		killed, ran time.Time
		back        time.Duration // 0 while not back in every in-sync set
		slowest     string        // the partition it rejoined last
	}
	var restarts []*restart
	var watching sync.WaitGroup // each sets its restart's back; read after Wait
	next := began.Add(form.every)
	for k := range form.kills {
		time.Sleep(time.Until(next))
		view := c.ctl.View()
		var leaders []int
		for _, bi := range view.Brokers {
			if leadsAny(view, bi.ID) {
				leaders = append(leaders, int(bi.ID))
			}
		}
		require.NotEmpty(t, leaders, "no live broker leads a partition")
		victim := leaders[rng.IntN(len(leaders))]
		r := &restart{broker: victim, killed: time.Now()}
		c.brokers[victim].kill()
		t.Logf("kill %d at %v: broker %d, which led %d partitions (live leaders %v)", k+1, time.Since(began).Round(time.Millisecond),
			victim, countLed(view, int32(victim)), leaders)
		time.Sleep(form.detect)
		if err := c.ctl.BrokerFailed(t.Context(), int32(victim)); err != nil {
			t.Logf("BrokerFailed(%d): %v", victim, err)
		}
		time.Sleep(time.Until(r.killed.Add(form.restartAfter)))
		c.restart(victim)
		r.ran = time.Now()
		restarts = append(restarts, r)
		jitter := time.Duration(rng.Int64N(int64(form.every/4))) - form.every/8
		next = began.Add(time.Duration(k+2)*form.every + jitter)
		if quick := rng.IntN(2) == 0 || form.kills == 2 && k == 0; quick && k+1 < form.kills {
			next = r.ran.Add(form.quick)
			t.Logf("the next kill comes %v after broker %d's restart, while it catches up", form.quick, victim)
		}
		watching.Go(func() {
			for deadline := r.ran.Add(form.catchUp); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				out := outOfSync(c.ctl.View(), int32(r.broker))
				if len(out) == 0 {
					r.back = time.Since(r.ran)
					return
				}
				r.slowest = out[0]
			}
		})
	}
	time.Sleep(form.every / 2)

	// Production ends; every record gets its answer.
	close(stopKgo)
	producing.Wait()
	flushCtx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	flushErr := prod.Flush(flushCtx)
	cancel()
	rdDone := rd.finish(t)
	t.Logf("production ended after %v (kgo flush: %v; librdkafka: %s)", time.Since(began).Round(time.Millisecond), flushErr, rdDone)
	watching.Wait()

	// Every restarted broker back in every in-sync set within the bound.
	caughtUp := true
	for _, r := range restarts {
		if r.back > 0 {
			t.Logf("broker %d, killed at %v and restarted %v later: back in every in-sync set %v after its restart (the last: %s)",
				r.broker, r.killed.Sub(began).Round(time.Millisecond), r.ran.Sub(r.killed).Round(time.Millisecond), r.back.Round(time.Millisecond), r.slowest)
			continue
		}
		caughtUp = false
		t.Errorf("broker %d, restarted at %v, not back in every in-sync set within %v:\n%s",
			r.broker, r.ran.Sub(began).Round(time.Millisecond), form.catchUp, c.lagReport(int32(r.broker)))
	}

	// Followers apply the last records; then the logs are read.
	settled := waitSettled(c, 30*time.Second)
	if !settled {
		t.Logf("the brokers' log ends still differ 30s after production ended:\n%s", c.endsReport())
	}
	c.stopAll()
	held := make([]map[metadata.TopicPartition][]storage.Batch, 3)
	for id := range 3 {
		held[id] = make(map[metadata.TopicPartition][]storage.Batch)
		for _, topic := range topics {
			for p := range int32(partitions) {
				tp := metadata.TopicPartition{Topic: topic, Partition: p}
				held[id][tp] = c.readLog(id, tp)
			}
		}
	}

	// The check, per broker.
	for _, topic := range topics {
		l := logs[topic]
		t.Logf("%s: %d acknowledged, %d failed %v, longest time without an acknowledgement %v",
			topic, len(l.acks), sumCounts(l.failed), l.failed, l.longest.Round(time.Millisecond))
	}
	for id := range 3 {
		var report []string
		for _, topic := range topics {
			v := verify(t, held[id], topic, logs[topic].acks)
			report = append(report, fmt.Sprintf("%s %d lost, %d duplicated, %d at another offset", topic, v.lost, v.dups, v.moved))
			assert.Zero(t, v.lost, "broker %d lost acknowledged %s records, e.g. %v", id, topic, v.examples)
			assert.Zero(t, v.dups, "broker %d holds acknowledged %s records twice, e.g. %v", id, topic, v.examples)
			assert.Zero(t, v.moved, "broker %d holds acknowledged %s records at other offsets, e.g. %v", id, topic, v.examples)
		}
		differ, where := diverging(held[0], held[id])
		report = append(report, fmt.Sprintf("%d offsets where its log differs from broker 0's", differ))
		t.Logf("broker %d: %s", id, strings.Join(report, "; "))
		assert.Zero(t, differ, "broker %d's log differs from broker 0's: %s", id, where)
	}
	require.True(t, caughtUp, "a restarted broker did not catch up (above)")
	require.True(t, settled, "the brokers' logs did not converge")
}

// leadsAny reports whether broker id leads a partition of view.
func leadsAny(view broker.Cluster, id int32) bool { return countLed(view, id) > 0 }

func countLed(view broker.Cluster, id int32) int {
	n := 0
	for _, t := range view.Topics {
		for _, pl := range t.Partitions {
			if pl.Leader == id {
				n++
			}
		}
	}
	return n
}

// outOfSync returns the partitions broker id is a replica of but not in
// the in-sync set of.
func outOfSync(view broker.Cluster, id int32) []string {
	var out []string
	for _, t := range view.Topics {
		for _, pl := range t.Partitions {
			if slices.Contains(pl.Replicas, id) && !slices.Contains(pl.ISR, id) {
				out = append(out, fmt.Sprintf("%s-%d", t.Name, pl.Partition))
			}
		}
	}
	return out
}

// lagReport says, for every partition whose in-sync set lacks broker id,
// its leader, the leader's log end and high watermark, and the broker's
// log end.
func (c *procCluster) lagReport(id int32) string {
	view := c.ctl.View()
	ends := make(map[int32]map[string]broker.PartitionStatus)
	for _, bi := range view.Brokers {
		st, err := c.tryStatus(int(bi.ID))
		if err != nil {
			continue
		}
		ends[bi.ID] = make(map[string]broker.PartitionStatus)
		for _, ps := range st.Partitions {
			ends[bi.ID][fmt.Sprintf("%s-%d", ps.Topic, ps.Partition)] = ps
		}
	}
	var b strings.Builder
	for _, t := range view.Topics {
		for _, pl := range t.Partitions {
			if !slices.Contains(pl.Replicas, id) || slices.Contains(pl.ISR, id) {
				continue
			}
			name := fmt.Sprintf("%s-%d", t.Name, pl.Partition)
			lead, mine := ends[pl.Leader][name], ends[id][name]
			fmt.Fprintf(&b, "  %s: leader %d at epoch %d, in-sync %v; the leader's log ends at %d (high watermark %d), broker %d's at %d (%s, epoch %d)\n",
				name, pl.Leader, pl.Epoch, pl.ISR, lead.End, lead.HW, id, mine.End, mine.Role, mine.Epoch)
		}
	}
	return b.String()
}

// endsReport lists the partitions whose log ends differ between brokers.
func (c *procCluster) endsReport() string {
	var b strings.Builder
	ends := c.ends()
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range ends {
			if !yield(n) {
				return
			}
		}
	}) {
		if e := ends[name]; len(slices.Compact(slices.Clone(e))) > 1 {
			fmt.Fprintf(&b, "  %s: log ends by broker %v\n", name, e)
		}
	}
	return b.String()
}

// ends returns every partition's log end on each broker, by broker id.
func (c *procCluster) ends() map[string][]int64 {
	out := make(map[string][]int64)
	for id := range 3 {
		st, err := c.tryStatus(id)
		for _, ps := range st.Partitions {
			name := fmt.Sprintf("%s-%d", ps.Topic, ps.Partition)
			if out[name] == nil {
				out[name] = []int64{-1, -1, -1}
			}
			if err == nil {
				out[name][id] = ps.End
			}
		}
	}
	return out
}

// waitSettled waits up to bound for every partition's log to end at the
// same offset on every broker, the high watermark there too.
func waitSettled(c *procCluster, bound time.Duration) bool {
	for deadline := time.Now().Add(bound); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ok := true
		for id := range 3 {
			st, err := c.tryStatus(id)
			if err != nil || len(st.Partitions) == 0 {
				ok = false
				break
			}
			for _, ps := range st.Partitions {
				ok = ok && ps.HW == ps.End
			}
		}
		for _, e := range c.ends() {
			ok = ok && len(slices.Compact(slices.Clone(e))) == 1
		}
		if ok {
			return true
		}
	}
	return false
}

// tryStatus is status without failing the test: a broker may be down.
func (c *procCluster) tryStatus(id int) (broker.Status, error) {
	var st broker.Status
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + c.infos[id].Control + "/v1/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// verdict is what one broker's log makes of a producer's acknowledgements.
type verdict struct {
	lost, dups, moved int
	examples          []string // a few of each
}

// verify checks every acknowledged record of topic against a broker's
// log: present, once, at the offset it was acknowledged at.
func verify(t *testing.T, held map[metadata.TopicPartition][]storage.Batch, topic string, acks []ack) verdict {
	t.Helper()
	at := make(map[int32]map[string][]int64) // partition, value: offsets
	for tp, batches := range held {
		if tp.Topic != topic {
			continue
		}
		at[tp.Partition] = make(map[string][]int64)
		for _, b := range batches {
			recs, err := batchRecords(b.Data)
			require.NoError(t, err, "%s: the batch at offset %d", tp, b.FirstOffset)
			for _, r := range recs {
				at[tp.Partition][r.value] = append(at[tp.Partition][r.value], b.FirstOffset+r.delta)
			}
		}
	}
	var v verdict
	example := func(format string, args ...any) {
		if len(v.examples) < 5 {
			v.examples = append(v.examples, fmt.Sprintf(format, args...))
		}
	}
	for _, a := range acks {
		offs := at[a.partition][a.value]
		switch {
		case len(offs) == 0:
			v.lost++
			example("%s lost (acknowledged at %d-%d)", a.value, a.partition, a.offset)
		case len(offs) > 1:
			v.dups++
			example("%s at %d-%v", a.value, a.partition, offs)
		case offs[0] != a.offset:
			v.moved++
			example("%s at %d-%d, acknowledged at %d", a.value, a.partition, offs[0], a.offset)
		}
	}
	return v
}

// record is one record of a batch: its offset delta and value.
type record struct {
	delta int64
	value string
}

// batchRecords decodes a Kafka record batch's records.
func batchRecords(data []byte) ([]record, error) {
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(data); err != nil {
		return nil, err
	}
	raw := rb.Records
	if codec := kgo.CompressionCodecType(rb.Attributes & 0x7); codec != kgo.CodecNone {
		var err error
		if raw, err = kgo.DefaultDecompressor().Decompress(raw, codec); err != nil {
			return nil, err
		}
	}
	out := make([]record, 0, rb.NumRecords)
	for range rb.NumRecords {
		var r kmsg.Record
		if err := r.ReadFrom(raw); err != nil {
			return nil, err
		}
		n := kbin.VarintLen(r.Length) + int(r.Length)
		if n > len(raw) {
			return nil, fmt.Errorf("a record of %d bytes in %d", n, len(raw))
		}
		raw = raw[n:]
		out = append(out, record{int64(r.OffsetDelta), string(r.Value)})
	}
	return out, nil
}

// diverging counts the offsets at which b's log differs from a's: those
// of every batch one holds and the other does not hold the same, byte for
// byte, at the same offset and epoch; where names the partitions.
func diverging(a, b map[metadata.TopicPartition][]storage.Batch) (int64, string) {
	var n int64
	var where []string
	count := func(x, y []storage.Batch) int64 {
		same := make(map[int64]storage.Batch, len(y))
		for _, bt := range y {
			same[bt.FirstOffset] = bt
		}
		var d int64
		for _, bt := range x {
			if o, ok := same[bt.FirstOffset]; !ok || o.LastOffset != bt.LastOffset || o.Epoch != bt.Epoch || string(o.Data) != string(bt.Data) {
				d += bt.LastOffset - bt.FirstOffset + 1
			}
		}
		return d
	}
	for tp, x := range a {
		y := b[tp]
		if d := max(count(x, y), count(y, x)); d > 0 {
			n += d
			where = append(where, fmt.Sprintf("%s: %d offsets (log ends %d and %d)", tp, d, end(x), end(y)))
		}
	}
	slices.Sort(where)
	return n, strings.Join(where, "; ")
}

func end(bs []storage.Batch) int64 {
	if len(bs) == 0 {
		return 0
	}
	return bs[len(bs)-1].LastOffset + 1
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// crashProducer is testdata/crash_producer.py, running.
type crashProducer struct {
	cmd     *exec.Cmd
	stdin   interface{ Close() error }
	done    chan struct{}
	last    string // its closing line
	fatal   string // what stopped it early
	logPath string // its standard error
}

// startCrashProducer runs the librdkafka producer, its acknowledgements
// into l, until finish.
func startCrashProducer(t *testing.T, python, bootstrap, topic string, partitions, rate int, l *ackLog) *crashProducer {
	t.Helper()
	cmd := exec.Command(python, filepath.Join("testdata", "crash_producer.py"), bootstrap, topic, fmt.Sprint(partitions), fmt.Sprint(rate), "120")
	logPath := filepath.Join(t.TempDir(), "crash_producer.log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	cmd.Stderr = logf
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &crashProducer{cmd: cmd, stdin: stdin, done: make(chan struct{}), logPath: logPath}
	go func() {
		defer close(p.done)
		defer logf.Close()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var line struct {
				P     *int32  `json:"p"`
				O     int64   `json:"o"`
				V     string  `json:"v"`
				T     float64 `json:"t"`
				Err   string  `json:"err"`
				Done  bool    `json:"done"`
				Fatal string  `json:"fatal"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch {
			case line.Done:
				p.last, p.fatal = sc.Text(), line.Fatal
			case line.Err != "":
				l.fail(line.Err)
			case line.P != nil:
				l.acked(ack{*line.P, line.O, line.V}, time.Unix(0, int64(line.T*1e9)))
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-p.done:
		case <-time.After(150 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// finish closes the producer's input, so that it stops producing and
// flushes, and waits for it; it returns its closing line.
func (p *crashProducer) finish(t *testing.T) string {
	t.Helper()
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(150 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("the librdkafka producer did not finish flushing in time")
	}
	if p.last == "" || p.fatal != "" {
		stderr, _ := os.ReadFile(p.logPath)
		t.Errorf("the librdkafka producer stopped early (%s); its standard error:\n%s", p.fatal, tail(stderr, 3000))
	}
	return p.last
}
