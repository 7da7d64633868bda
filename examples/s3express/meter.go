package main

import (
	"context"
	"maps"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
)

// opCount is what the stores did with one S3 operation.
type opCount struct {
	// Requests counts calls; Attempts the HTTP requests they made,
	// retries included: what S3 bills.
	Requests, Attempts int64
	// BytesUp and BytesDown are object bytes sent (PutObject) and
	// received (GetObject).
	BytesUp, BytesDown int64
}

// meter counts the S3 requests of every store it is installed in, through
// the SDK's middleware stack, so that everything the SDK sends is seen:
// retries, the read-back of an ambiguous upload, S3 Express CreateSession
// calls.
type meter struct {
	mu  sync.Mutex
	ops map[string]opCount
}

func newMeter() *meter { return &meter{ops: make(map[string]opCount)} }

// clientOption installs the meter in an S3 client; pass it in
// s3express.Options.ClientOptions.
func (m *meter) clientOption(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, m.register)
}

func (m *meter) register(st *middleware.Stack) error {
	// Once per call, with the typed input and output at hand.
	calls := middleware.InitializeMiddlewareFunc("activetierExampleMeterCalls",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			var up, down int64
			if put, ok := in.Parameters.(*s3.PutObjectInput); ok {
				up = aws.ToInt64(put.ContentLength)
			}
			if get, ok := out.Result.(*s3.GetObjectOutput); ok && err == nil {
				down = aws.ToInt64(get.ContentLength)
			}
			m.add(awsmiddleware.GetOperationName(ctx), func(c *opCount) {
				c.Requests++
				c.BytesUp += up
				c.BytesDown += down
			})
			return out, md, err
		})
	if err := st.Initialize.Add(calls, middleware.After); err != nil {
		return err
	}
	// After the retry middleware: once per HTTP attempt.
	attempts := middleware.FinalizeMiddlewareFunc("activetierExampleMeterAttempts",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			m.add(awsmiddleware.GetOperationName(ctx), func(c *opCount) { c.Attempts++ })
			return next.HandleFinalize(ctx, in)
		})
	return st.Finalize.Add(attempts, middleware.After)
}

func (m *meter) add(op string, fn func(*opCount)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.ops[op]
	fn(&c)
	m.ops[op] = c
}

func (m *meter) snapshot() map[string]opCount {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.ops)
}
