package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/activetier/activetier/metadata"
)

// ProgressReport is one follower's progress on one partition: what
// Kafka's fetch request carries (the fetch offset and last fetched epoch).
type ProgressReport struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Follower  int32  `json:"follower"`
	// Incarnation is the follower's run (see BrokerInfo): a leader adds
	// a follower to the in-sync set only on reports of its current run.
	Incarnation string `json:"incarnation"`
	Epoch       int32  `json:"epoch"` // the leader epoch the follower follows
	EndOffset   int64  `json:"end"`
	LastEpoch   int32  `json:"lastEpoch"`
}

// ProgressAnswer is the leader's answer for one partition: its high
// watermark, as Kafka's fetch response carries it, or why it has none.
type ProgressAnswer struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	HW        int64  `json:"hw"`
	Error     string `json:"error,omitempty"`
}

// PartitionStatus is one partition as a broker sees it (GET /v1/status).
type PartitionStatus struct {
	Topic          string  `json:"topic"`
	Partition      int32   `json:"partition"`
	Role           string  `json:"role"`
	Leader         int32   `json:"leader"`
	Epoch          int32   `json:"epoch"`
	PartitionEpoch int32   `json:"partitionEpoch"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	HW             int64   `json:"hw"`
	End            int64   `json:"end"`
}

// Status is a broker's answer to GET /v1/status.
type Status struct {
	ID          int32  `json:"id"`
	AZ          string `json:"az"`
	Incarnation string `json:"incarnation"`
	// Registered says whether the last view the broker applied lists
	// this run of it.
	Registered bool              `json:"registered"`
	Partitions []PartitionStatus `json:"partitions"`
	Applied    uint64            `json:"applied"`    // entries its follower side applied
	Objects    uint64            `json:"objects"`    // objects its leader side stored
	Degraded   bool              `json:"degraded"`   // the leader side's health
	LagP50Ms   float64           `json:"lagP50Ms"`   // follower apply lag, from the batch's newest timestamp
	LagP99Ms   float64           `json:"lagP99Ms"`   //
	UploadP50  float64           `json:"uploadP50"`  // leader upload latency, ms
	UploadP99  float64           `json:"uploadP99"`  //
	PublishP50 float64           `json:"publishP50"` // leader: from a batch's append to its entry's publication, ms
	PublishP99 float64           `json:"publishP99"` //
	// Record bytes served to consumers as a partition's leader and as a
	// follower (a preferred read replica).
	ServedLeader   int64 `json:"servedLeader"`
	ServedFollower int64 `json:"servedFollower"`
	// DigestChecks counts the follower side's comparisons of its log's
	// rolling digest with the one a leader published, DigestMismatches
	// those that differed; Mismatches are the latest of them, oldest
	// first (walstore.FollowerStats).
	DigestChecks     uint64           `json:"digestChecks"`
	DigestMismatches uint64           `json:"digestMismatches"`
	Mismatches       []DigestMismatch `json:"mismatches"`
}

func (b *Broker) serveControl(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.Handle("/v1/cluster", applyJSON(b.applyCluster))
	mux.Handle("/v1/progress", answerJSON(b.answerProgress))
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(b.Status())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: nil}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(b.cfg.Control) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-errc
		return nil
	case err := <-errc:
		return fmt.Errorf("broker: control listener: %w", err)
	}
}

// answerProgress records each of followers' reports and answers it with
// the partition's high watermark, or why it has none.
func (b *Broker) answerProgress(_ context.Context, reports []ProgressReport) []ProgressAnswer {
	answers := make([]ProgressAnswer, 0, len(reports))
	for _, rep := range reports {
		a := ProgressAnswer{Topic: rep.Topic, Partition: rep.Partition}
		hw, err := b.recordProgress(rep)
		if err != nil {
			a.Error = err.Error()
		}
		a.HW = hw
		answers = append(answers, a)
	}
	return answers
}

// Status returns the broker's view of its partitions and its Node's
// counters.
func (b *Broker) Status() Status {
	parts := b.partitions()
	st := b.node.Stats()
	b.mu.Lock()
	registered := b.isRegistered
	b.mu.Unlock()
	out := Status{
		ID: b.cfg.ID, AZ: b.cfg.AZ, Incarnation: b.incarnation, Registered: registered,
		Applied: st.Follower.Applied, Objects: st.Leader.Objects, Degraded: st.Leader.Health.Degraded,
		LagP50Ms:   ms(st.Follower.ApplyLag.Quantile(0.5)),
		LagP99Ms:   ms(st.Follower.ApplyLag.Quantile(0.99)),
		UploadP50:  ms(st.Leader.UploadLatency.Quantile(0.5)),
		UploadP99:  ms(st.Leader.UploadLatency.Quantile(0.99)),
		PublishP50: ms(st.Leader.PublishLatency.Quantile(0.5)),
		PublishP99: ms(st.Leader.PublishLatency.Quantile(0.99)),

		ServedLeader: b.servedLeader.Load(), ServedFollower: b.servedFollower.Load(),

		DigestChecks: st.Follower.DigestChecks, DigestMismatches: st.Follower.DigestMismatches,
		Mismatches: digestMismatches(st.Follower.Mismatches),
	}
	for _, p := range parts {
		s := p.snapshot()
		end, _ := b.log.EndOffset(p.tp)
		out.Partitions = append(out.Partitions, PartitionStatus{
			Topic: p.tp.Topic, Partition: p.tp.Partition, Role: s.role.String(),
			Leader: s.leader, Epoch: s.epoch, PartitionEpoch: s.partitionEpoch, Replicas: s.replicas, ISR: s.isr,
			HW: min(b.highWatermark(p.tp, s), end), End: end,
		})
	}
	slices.SortFunc(out.Partitions, func(a, b PartitionStatus) int {
		return metadata.TopicPartition{Topic: a.Topic, Partition: a.Partition}.Compare(metadata.TopicPartition{Topic: b.Topic, Partition: b.Partition})
	})
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// reporter sends this broker's follower progress to each partition's
// leader and takes the high watermark it answers with. It reports a
// partition whenever the Node's OnProgress names it (after each append,
// and again every NodeConfig.ProgressInterval while its log does not
// change, as Kafka's follower fetches even when nothing is new: the
// leader takes a follower it has not heard from for ReplicaLagTime out of
// the in-sync set), after a role change, and every ProgressInterval
// while the leader's answer is below the log end, since another
// follower's report may since have moved the high watermark.
type reporter struct {
	b      *Broker
	client *http.Client
	wakeCh waker

	mu    sync.Mutex
	sent  map[metadata.TopicPartition]sentReport
	named map[metadata.TopicPartition]bool // by OnProgress since the last round
}

// sentReport is the last report the leader answered for a partition.
type sentReport struct {
	leader, epoch int32
	end           int64
	hw            int64
}

func newReporter(b *Broker) *reporter {
	return &reporter{
		b:      b,
		client: &http.Client{Timeout: 5 * time.Second},
		wakeCh: newWaker(),
		sent:   make(map[metadata.TopicPartition]sentReport),
		named:  make(map[metadata.TopicPartition]bool),
	}
}

// due asks for a report of tp in the next round; it never blocks.
func (r *reporter) due(tp metadata.TopicPartition) {
	r.mu.Lock()
	r.named[tp] = true
	r.mu.Unlock()
	r.wake()
}

// wake asks for a round of reports; it never blocks.
func (r *reporter) wake() { r.wakeCh.wake() }

func (r *reporter) run(ctx context.Context) {
	defer r.client.CloseIdleConnections()
	r.wakeCh.every(ctx, r.b.cfg.ProgressInterval, r.round)
}

// round sends every report that is due, one request per leader.
func (r *reporter) round(ctx context.Context) {
	b := r.b
	parts := b.partitions()
	b.mu.Lock()
	brokers := make(map[int32]BrokerInfo, len(b.brokers))
	for id, bi := range b.brokers {
		brokers[id] = bi
	}
	b.mu.Unlock()
	r.mu.Lock()
	named := r.named
	r.named = make(map[metadata.TopicPartition]bool)
	r.mu.Unlock()

	due := make(map[int32][]ProgressReport)
	for _, p := range parts {
		s := p.snapshot()
		if s.role != roleFollower {
			continue
		}
		end, err := b.log.EndOffset(p.tp)
		if err != nil {
			continue
		}
		last := sentReport{leader: s.leader, epoch: s.epoch, end: end}
		r.mu.Lock()
		prev, ok := r.sent[p.tp]
		r.mu.Unlock()
		if ok && !named[p.tp] && prev.leader == last.leader && prev.epoch == last.epoch && prev.end == end && prev.hw >= end {
			continue
		}
		// The epoch of the last record, not of an entry assigned after
		// it (a broker that led the partition before).
		lastEpoch := int32(-1)
		if entries, err := b.log.Epochs(p.tp); err == nil {
			for _, e := range entries {
				if e.StartOffset < end {
					lastEpoch = e.Epoch
				}
			}
		}
		due[s.leader] = append(due[s.leader], ProgressReport{
			Topic: p.tp.Topic, Partition: p.tp.Partition, Follower: b.cfg.ID, Incarnation: b.incarnation,
			Epoch: s.epoch, EndOffset: end, LastEpoch: lastEpoch,
		})
	}
	for leader, reports := range due {
		bi, ok := brokers[leader]
		if !ok {
			continue
		}
		answers, err := r.send(ctx, bi.Control, reports)
		if err != nil {
			if ctx.Err() == nil {
				b.lg.Debug("reporting progress", "leader", leader, "err", err)
			}
			continue
		}
		for i, a := range answers {
			if i >= len(reports) || a.Topic != reports[i].Topic || a.Partition != reports[i].Partition || a.Error != "" {
				continue
			}
			rep := reports[i]
			tp := metadata.TopicPartition{Topic: rep.Topic, Partition: rep.Partition}
			r.mu.Lock()
			r.sent[tp] = sentReport{leader: leader, epoch: rep.Epoch, end: rep.EndOffset, hw: a.HW}
			r.mu.Unlock()
			b.followerHW(tp, leader, rep.Epoch, a.HW)
		}
	}
}

func (r *reporter) send(ctx context.Context, addr string, reports []ProgressReport) ([]ProgressAnswer, error) {
	body, err := json.Marshal(reports)
	if err != nil {
		return nil, err
	}
	var answers []ProgressAnswer
	if err := postJSON(ctx, r.client, addr, "/v1/progress", body, &answers); err != nil {
		return nil, err
	}
	return answers, nil
}

var errStaleEpoch = errors.New("broker: progress for another leader epoch")
