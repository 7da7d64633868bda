package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// noCoordinator is why FindCoordinator fails: the message clients print.
const noCoordinator = "this broker has no group or transaction coordinator: consumer groups, committed offsets " +
	"and transactions are not supported; assign partitions and keep offsets in the application"

// findCoordinator answers FindCoordinator, which the broker serves only to
// refuse: there is no coordinator. COORDINATOR_NOT_AVAILABLE would be
// retried for ever (librdkafka's group consumer waits without a word), so
// every key gets INVALID_REQUEST, which Kafka documents for a request sent
// to a broker that cannot serve it and which kgo, librdkafka and its
// bindings report to the application at once.
func findCoordinator(req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := kmsg.NewPtrFindCoordinatorResponse()
	resp.Version = req.Version
	msg := noCoordinator
	if req.Version < 4 {
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID = kerr.InvalidRequest.Code, &msg, -1
		return resp
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.ErrorCode, c.ErrorMessage = key, -1, kerr.InvalidRequest.Code, &msg
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}

// initProducerID answers an idempotent producer with a new producer id at
// epoch 0, as Kafka does for a producer without a transactional id (which
// also ignores the id and epoch a v3+ request may carry); a transactional
// producer is refused, there being no transaction coordinator.
func (b *Broker) initProducerID(req *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.Version = req.Version
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp
	}
	id, err := b.pids.allocate()
	if err != nil {
		b.lg.Error("InitProducerId", "err", err)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}
