package leadcore

import (
	"fmt"
	"time"

	"github.com/activetier/activetier/metadata"
)

// maxBatchMarkers bounds the markers of one marker message, and the
// partitions a marker refresh reads at a time. Markers of many partitions
// share a message, its header and its append: a broker taking up
// thousands of leaderships at once, or refreshing them, sends a few
// messages rather than one per partition. The bound keeps a message far
// below a metadata log's message size limit (Kafka's default is 1 MiB)
// even with a long topic name per marker.
const maxBatchMarkers = 2048

// markerBatch is a task whose markers wait for the next marker message.
type markerBatch struct {
	task    *task
	markers []metadata.EpochStart
}

// queueMarkers adds t's markers to the next marker message. A marker the
// codec rejects fails t alone, not the others the message carries.
func (c *Core) queueMarkers(now time.Time, t *task, markers []metadata.EpochStart) {
	for _, s := range markers {
		if err := s.Validate(); err != nil {
			c.taskFailed(now, t, fmt.Errorf("epoch marker of %s cannot be published: %w", t.tp, err))
			return
		}
	}
	t.queued = true
	c.markerQueue = append(c.markerQueue, markerBatch{task: t, markers: markers})
	c.markersQueued += len(markers)
	c.pumpMarkers(now)
}

// markersWait is when the queued markers go even if they fill no
// message, or zero when nothing waits for the time.
func (c *Core) markersWait() time.Time {
	if c.markerPub != nil || len(c.markerQueue) == 0 || c.markersSent.IsZero() {
		return time.Time{}
	}
	return c.markersSent.Add(c.cfg.Interval)
}

// pumpMarkers starts the next marker message unless one is being
// published. Markers go at once when none went for an Interval (a
// leadership taken up alone is announced without delay); otherwise they
// wait until a message's worth queued or the Interval since the last
// went has passed, so a burst of leaderships shares a few messages
// however fast the metadata log answers.
func (c *Core) pumpMarkers(now time.Time) {
	for c.markerPub == nil && len(c.markerQueue) > 0 {
		if at := c.markersWait(); c.markersQueued < maxBatchMarkers && now.Before(at) {
			return
		}
		m := &message{}
		msg := &metadata.Message{WriterBrokerID: c.cfg.BrokerID}
		n := 0
		for n < len(c.markerQueue) {
			b := c.markerQueue[n]
			if len(msg.Markers) > 0 && len(msg.Markers)+len(b.markers) > maxBatchMarkers {
				break
			}
			n++
			if b.task.stopped {
				continue // its leadership ended while it waited
			}
			m.tasks = append(m.tasks, b.task)
			msg.Markers = append(msg.Markers, b.markers...)
		}
		for _, b := range c.markerQueue[:n] {
			c.markersQueued -= len(b.markers)
		}
		clear(c.markerQueue[:n])
		c.markerQueue = c.markerQueue[n:]
		if len(m.tasks) == 0 {
			continue
		}
		c.markerPub, c.markersSent = m, now
		c.startMessage(now, m, msg)
	}
}

// markersDone ends marker message m: each task it carried takes its next
// step, or its failure's.
func (c *Core) markersDone(now time.Time, m *message, err error) {
	c.markerPub = nil
	if err == nil {
		c.gc.trackMarkers(m.offsets)
	}
	for _, t := range m.tasks {
		t.queued = false
		switch {
		case t.stopped:
		case err != nil:
			c.taskFailed(now, t, err)
		default:
			t.markers = false
			c.choreProgressed(t)
			c.advance(now, t)
		}
	}
	c.pumpMarkers(now)
}
