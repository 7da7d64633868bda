package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// LocalLog is a broker's local log: the storage.LocalLog its Node replicates
// into, the epoch assignment a broker makes when it becomes leader, and its
// batches, which the log comparison reads. memstore.LocalLog is one.
type LocalLog interface {
	storage.LocalLog
	// AssignEpoch starts epoch at offset start in tp's epoch cache.
	AssignEpoch(tp metadata.TopicPartition, epoch int32, start int64) error
	// Batches returns tp's batches in offset order.
	Batches(tp metadata.TopicPartition) []storage.Batch
	// EachBatch calls fn with tp's batches in offset order from the one
	// holding offset from, without copying them, and stops at fn's first
	// error: how Compare reads logs (fn must not modify their Data).
	EachBatch(tp metadata.TopicPartition, from int64, fn func(storage.Batch) error) error
}

// Leadership is the controller's choice for a partition: its leader and
// the leader epoch.
type Leadership struct {
	Broker int32
	Epoch  int32
}

// Cluster is the brokers, the metadata log they share, and the
// controller's state: the replica assignment, each partition's leadership,
// and the partitions without a leader during a failover. Its methods are
// safe for concurrent use.
type Cluster struct {
	// Meta is the metadata log every broker's Node publishes to and reads.
	Meta metadata.Log

	mu       sync.Mutex
	brokers  []*Broker // in the order added
	byID     map[int32]*Broker
	tps      []metadata.TopicPartition // in the order first assigned
	replicas map[metadata.TopicPartition][]int32
	leaders  map[metadata.TopicPartition]Leadership
	offline  map[metadata.TopicPartition]bool

	// errs receives the error of every Node that stopped with one.
	errs chan error
}

// errsBuffer bounds how many Node errors Failed and Close report; a Node
// stops with one only when it cannot go on, so a few are plenty.
const errsBuffer = 64

// New returns a cluster of no brokers on the metadata log meta, which
// Close closes.
func New(meta metadata.Log) *Cluster {
	return &Cluster{
		Meta:     meta,
		byID:     make(map[int32]*Broker),
		replicas: make(map[metadata.TopicPartition][]int32),
		leaders:  make(map[metadata.TopicPartition]Leadership),
		offline:  make(map[metadata.TopicPartition]bool),
		errs:     make(chan error, errsBuffer),
	}
}

// AddBroker adds broker id in az, with its store and local log, in place
// of any broker id before it, whose Node it stops (its error is Failed's
// and Close's): nothing else could, and two Nodes must not run as one
// broker. The new broker's Node starts with Start.
func (c *Cluster) AddBroker(id int32, az string, store storage.ObjectStore, local LocalLog) *Broker {
	b := &Broker{C: c, ID: id, AZ: az, Store: store, Local: local}
	c.mu.Lock()
	old := c.byID[id]
	if i := slices.IndexFunc(c.brokers, func(o *Broker) bool { return o.ID == id }); i >= 0 {
		c.brokers[i] = b
	} else {
		c.brokers = append(c.brokers, b)
	}
	c.byID[id] = b
	c.mu.Unlock()
	if old != nil {
		_ = old.Stop() // its error is in c.errs
	}
	return b
}

// Broker returns broker id, or nil if there is none.
func (c *Cluster) Broker(id int32) *Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID[id]
}

// Brokers returns every broker, in the order they were added.
func (c *Cluster) Brokers() []*Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.brokers)
}

// Partitions returns every partition with a replica set, in the order
// they were first given one.
func (c *Cluster) Partitions() []metadata.TopicPartition {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.tps)
}

// SetReplicas sets tp's replica set, in the order of preference.
func (c *Cluster) SetReplicas(tp metadata.TopicPartition, ids ...int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.replicas[tp]; !ok {
		c.tps = append(c.tps, tp)
	}
	c.replicas[tp] = ids
}

// Replicas returns the brokers of tp's replica set that have been added.
func (c *Cluster) Replicas(tp metadata.TopicPartition) []*Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replicasLocked(tp)
}

func (c *Cluster) replicasLocked(tp metadata.TopicPartition) []*Broker {
	var out []*Broker
	for _, id := range c.replicas[tp] {
		if b := c.byID[id]; b != nil {
			out = append(out, b)
		}
	}
	return out
}

// SetLeader records the controller's choice of leader and epoch for tp.
func (c *Cluster) SetLeader(tp metadata.TopicPartition, id, epoch int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leaders[tp] = Leadership{id, epoch}
}

// Leadership returns the controller's latest choice for tp, even while tp
// is offline, and whether it made one.
func (c *Cluster) Leadership(tp metadata.TopicPartition) (Leadership, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.leaders[tp]
	return l, ok
}

// Leader returns tp's leader to produce to and its epoch, or nil while tp
// is offline (its leader crashed and no successor is elected yet) or has
// no leader.
func (c *Cluster) Leader(tp metadata.TopicPartition) (*Broker, int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.offline[tp] {
		return nil, 0
	}
	l, ok := c.leaders[tp]
	if !ok {
		return nil, 0
	}
	return c.byID[l.Broker], l.Epoch
}

// Followers is the placement a leader publishes by: tp's replicas other
// than its current leader. A crashed replica stays in it, as in Kafka's
// assignment: it is out of sync, not unassigned.
func (c *Cluster) Followers(tp metadata.TopicPartition) []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int32
	for _, id := range c.replicas[tp] {
		if l, ok := c.leaders[tp]; !ok || l.Broker != id {
			out = append(out, id)
		}
	}
	return out
}

// StartPartition makes tp's leader publish its epoch from offset 0 and
// its other replicas follow it, as brokers do when a topic is
// created. Every replica's Node must be running.
func (c *Cluster) StartPartition(ctx context.Context, tp metadata.TopicPartition) error {
	l, ok := c.Leadership(tp)
	leader := c.Broker(l.Broker)
	if !ok || leader == nil {
		return fmt.Errorf("cluster: %s has no leader", tp)
	}
	replicas := c.Replicas(tp)
	nodes := make([]*walstore.Node, len(replicas))
	for i, r := range replicas {
		n, err := r.node()
		if err != nil {
			return fmt.Errorf("starting %s: %w", tp, err)
		}
		nodes[i] = n
	}
	ln, err := leader.node()
	if err != nil {
		return fmt.Errorf("starting %s: %w", tp, err)
	}
	if err := leader.Local.AssignEpoch(tp, l.Epoch, 0); err != nil {
		return fmt.Errorf("broker %d assigning epoch %d of %s: %w", leader.ID, l.Epoch, tp, err)
	}
	if err := ln.BecomeLeader(ctx, tp, l.Epoch, c.Followers(tp), -1); err != nil {
		return fmt.Errorf("broker %d leading %s: %w", leader.ID, tp, err)
	}
	for i, r := range replicas {
		if r != leader {
			if err := nodes[i].BecomeFollower(ctx, tp, l.Epoch, leader.ID); err != nil {
				return fmt.Errorf("broker %d following %s: %w", r.ID, tp, err)
			}
		}
	}
	return nil
}

// Failed returns an error a Node stopped with, if any, and forgets it.
func (c *Cluster) Failed() error {
	select {
	case err := <-c.errs:
		return err
	default:
		return nil
	}
}

// Close stops every broker still running and closes the metadata log, and
// returns the errors Nodes stopped with that Failed did not.
func (c *Cluster) Close() error {
	for _, b := range c.Brokers() {
		_ = b.Stop() // its error is in c.errs
	}
	errs := []error{c.Meta.Close()}
	for {
		select {
		case err := <-c.errs:
			errs = append(errs, err)
		default:
			return errors.Join(errs...)
		}
	}
}

// Broker is one broker of a Cluster.
type Broker struct {
	C     *Cluster
	ID    int32
	AZ    string
	Store storage.ObjectStore
	Local LocalLog
	// Node is the broker's running Node or, once stopped, the last one
	// that ran, whose stats stay readable; nil before the first Start.
	Node *walstore.Node

	running bool // under C.mu
	down    bool // under C.mu: crashed by Crash, never to run again
	stop    context.CancelFunc
	done    chan error
	// exited is closed once the last Node's Run has returned: a Stop that
	// finds another one stopping it waits for it.
	exited chan struct{}
}

// ErrRunning is Start's error for a broker whose Node runs: a second
// Node would run beside it, never to be stopped.
var ErrRunning = errors.New("cluster: broker already runs")

// ErrCrashed is Start's error for a broker Crash took down: it never runs
// again.
var ErrCrashed = errors.New("cluster: broker crashed")

// ErrNotStarted is the error of a call that needs a broker's Node before
// Start gave it one.
var ErrNotStarted = errors.New("cluster: broker never started")

// node returns b's Node, or ErrNotStarted naming b.
func (b *Broker) node() (*walstore.Node, error) {
	b.C.mu.Lock()
	defer b.C.mu.Unlock()
	if b.Node == nil {
		return nil, fmt.Errorf("broker %d: %w", b.ID, ErrNotStarted)
	}
	return b.Node, nil
}

// Start starts a Node for b with cfg's tuning: its wiring (broker ID,
// store, metadata log, local log) is b's, and its followers' progress is
// relayed to the leaders' Nodes, as a broker's fetch path carries it, so
// that a leader's collector can delete what every follower applied. It
// fails with ErrRunning while b runs and ErrCrashed once it crashed.
func (b *Broker) Start(cfg walstore.NodeConfig) (*walstore.Node, error) {
	cfg.BrokerID, cfg.Store, cfg.Log, cfg.Local = b.ID, b.Store, b.C.Meta, b.Local
	cfg.OnProgress = b.C.relayProgress
	// The check and the start are one step: two Starts must not both run.
	b.C.mu.Lock()
	defer b.C.mu.Unlock()
	switch {
	case b.down:
		return nil, fmt.Errorf("broker %d: %w", b.ID, ErrCrashed)
	case b.running:
		return nil, fmt.Errorf("broker %d: %w", b.ID, ErrRunning)
	}
	n, err := walstore.NewNode(cfg)
	if err != nil {
		return nil, fmt.Errorf("broker %d: %w", b.ID, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, exited := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(exited)
		err := n.Run(ctx)
		if err != nil {
			err = fmt.Errorf("broker %d: %w", b.ID, err)
			select {
			case b.C.errs <- err:
			default: // Failed and Close report the first errsBuffer
			}
		}
		done <- err
	}()
	b.Node, b.running, b.stop, b.done, b.exited = n, true, cancel, done, exited
	return n, nil
}

// relayProgress hands a follower's progress to its leader's Node, if it
// runs.
func (c *Cluster) relayProgress(p walstore.Progress) {
	c.mu.Lock()
	l := c.byID[p.Leader]
	var n *walstore.Node
	if l != nil && l.running {
		n = l.Node
	}
	c.mu.Unlock()
	if n != nil {
		n.RecordProgress(p)
	}
}

// CurrentNode returns b's Node, read under the cluster's lock: what a
// goroutine other than the one that may restart b (Stop, then Start) reads
// instead of the Node field.
func (b *Broker) CurrentNode() *walstore.Node {
	b.C.mu.Lock()
	defer b.C.mu.Unlock()
	return b.Node
}

// Running reports whether b's Node runs.
func (b *Broker) Running() bool {
	b.C.mu.Lock()
	defer b.C.mu.Unlock()
	return b.running
}

// Live reports whether b is up: Crash has not taken it down.
func (b *Broker) Live() bool {
	b.C.mu.Lock()
	defer b.C.mu.Unlock()
	return !b.down
}

// Stop stops b's Node, as a shutdown or a crash does, and returns the
// error it stopped with; b's local log remains, and Start may start a new
// Node on it. Stopping a broker that does not run does nothing but wait
// for a Stop under way: every Stop returns once the Node has stopped, and
// only the one that stopped it returns its error.
func (b *Broker) Stop() error {
	b.C.mu.Lock()
	stop, done, exited := b.stop, b.done, b.exited
	b.stop, b.done, b.running = nil, nil, false
	b.C.mu.Unlock()
	if stop == nil {
		if exited != nil {
			<-exited
		}
		return nil
	}
	stop()
	return <-done
}
