// Package s3express is the storage.ObjectStore that production runs on:
// Amazon S3 Express One Zone through aws-sdk-go-v2, one directory bucket
// per availability zone. A leader writes combined objects to its own AZ's
// bucket, where uploads cost no cross-AZ transfer and land in
// single-digit milliseconds; followers read their byte ranges from
// whichever bucket a metadata entry names. Standard S3 buckets and
// S3-compatible servers work too, so a region without S3 Express still
// saves the cross-AZ replication fee.
//
// # Guarantees
//
//   - Put never overwrites. Every upload carries If-None-Match: *, and a
//     taken key is storage.ErrAlreadyExists. Put's outcome is exact even
//     when an answer is lost, whatever the loss looked like: if any
//     attempt reached the server and did not come back refused (a 4xx
//     other than 408, 409 or 429) — no answer, a 5xx, a timeout, a
//     success whose body was cut short or could not be decoded — and Put
//     did not succeed, Put reads the key back (a GET, with the bucket's
//     retries, compared byte for byte): holding exactly the body sent, it
//     is this Put's object and Put succeeds (a retry that found the key
//     taken by its own first attempt included); holding anything else,
//     ErrAlreadyExists; missing or unreadable, storage.ErrUnavailable.
//     So ErrUnavailable from Put means the object is not known to be
//     stored, and an object that landed is never reported as failed while
//     the bucket can be read. Two writers of identical bytes to one key
//     may both succeed, only ever in that lost-answer case. When the
//     caller's context ends, Put returns at once with its error and
//     cannot tell.
//   - ReadRange (storage.RangeReader) is GetRange reading the body into
//     the caller's buffer instead of a new slice, with the same checks,
//     retries and errors; every attempt reads within the call, so nothing
//     writes to the buffer once ReadRange has returned.
//   - GetRange returns exactly the bytes asked for, from a ranged GET, or
//     an error: a range not wholly inside the object is
//     storage.ErrInvalidRange even though S3 answers a range that runs
//     past the end with fewer bytes. The body is read and checked within
//     each attempt, so a body cut short, or an answer whose Content-Length
//     or Content-Range disagrees with the range asked for, is retried like
//     a 503 and, once retries run out, storage.ErrUnavailable: never a
//     short result and never an untyped error.
//   - Nothing is sent for a request that cannot be valid: a reference to a
//     bucket the store was not configured with (or to a configured bucket
//     under another AZ's name) is storage.ErrUnknownBucket, a malformed
//     range storage.ErrInvalidRange, a key S3 cannot store ErrInvalidKey,
//     and a context already done its own error. Delete checks every
//     reference's bucket before deleting anything; a key S3 cannot take
//     (a control character, which the DeleteObjects XML cannot carry, or
//     an all-whitespace key in a directory bucket) is reported while the
//     other keys are still deleted.
//   - Delete is idempotent and batched: up to 1000 keys per DeleteObjects
//     request, grouped per bucket; missing keys are not errors, keys S3
//     could not delete are reported by name.
//   - List is complete and unordered: it follows continuation tokens to
//     the end and promises no order, because S3 Express directory buckets
//     do not sort their listings.
//
// # Configuration on AWS
//
// Load the configuration the usual way, so credentials come from the
// environment, the shared config files or the instance role; the store
// never reads credentials itself:
//
//	cfg, err := config.LoadDefaultConfig(ctx) // region from AWS_REGION or the profile
//	store, err := s3express.New(cfg, s3express.Options{
//		Buckets: map[string]string{
//			"use1-az4": "wal--use1-az4--x-s3",
//			"use1-az5": "wal--use1-az5--x-s3",
//			"use1-az6": "wal--use1-az6--x-s3",
//		},
//		LocalAZ:   "use1-az4", // this broker's AZ id (EC2 metadata: placement/availability-zone-id)
//		KeyPrefix: "cluster-a/",
//	})
//
// Create one directory bucket in each AZ the brokers run in (CreateBucket
// with a location of type AvailabilityZone and data redundancy
// SingleAvailabilityZone); its name embeds the AZ id, which New checks
// against the map key, so a bucket cannot be mapped to the wrong AZ. Use
// AZ ids (use1-az4), not AZ names (us-east-1a): names differ between
// accounts, ids do not. Every broker of a deployment uses the same bucket
// map and key prefix.
//
// The SDK authenticates to directory buckets with S3 Express sessions
// (CreateSession), which it creates, caches and refreshes by itself. The
// brokers' IAM role needs:
//
//   - directory buckets: s3express:CreateSession on each bucket,
//     arn:aws:s3express:REGION:ACCOUNT:bucket/NAME; the session (read-write,
//     the default) then authorizes PutObject, GetObject, DeleteObjects and
//     ListObjectsV2;
//   - standard buckets: s3:PutObject, s3:GetObject and s3:DeleteObject on
//     arn:aws:s3:::NAME/*, s3:ListBucket on arn:aws:s3:::NAME;
//   - with SSEKMS: kms:GenerateDataKey and kms:Decrypt on the key.
//
// # Standard S3 and S3-compatible servers
//
// Standard bucket names ("wal-use1-az4") may be mapped from any AZ name;
// the store treats each as that AZ's bucket. Standard S3 buckets are
// regional, so what is saved is the broker-to-broker replication traffic,
// at S3 Standard's request prices and latency.
//
// For an S3-compatible server (versitygw, MinIO) set aws.Config.BaseEndpoint
// and Options.S3Compatible, which selects path-style addressing and, for
// directory-style bucket names, turns off S3 Express session auth and signs
// as service "s3". The tests run this way against versitygw and MinIO
// (scripts/test.sh runs them against each), with both naming styles; both
// keep directory-style names as ordinary buckets. MinIO without a KMS
// answers every PUT that carries an encryption header with 501
// NotImplemented, which the store reports as storage.ErrPermanent; leave
// Options.SSE at its default there. S3Compatible is never right for AWS
// itself.
//
// # Checksums, encryption and performance
//
// Uploads carry a CRC32 checksum (Options.Checksum; CRC32C is the
// alternative), which S3 verifies before storing; CRC32 is S3 Express's
// default and both are hardware-accelerated. S3 keeps no checksum of a byte
// range, so downloads are verified by the combined-object format's own
// per-section xxhash64 instead.
//
// Put sends no encryption header by default (SSEBucketDefault), so the
// bucket's default encryption applies: a directory bucket refuses every PUT
// whose encryption headers differ from its default, and AWS buckets always
// encrypt. SSES3 asks for SSE-S3 explicitly; SSEKMS uses a KMS key with S3
// Bucket Keys (fewer KMS calls).
//
// At single-digit-millisecond latency the HTTP client matters. The store
// builds its own from the aws.Config's: idle connections per host sized to
// Options.Concurrency (the SDK default keeps 10, so a burst of fetches would
// dial, and on AWS handshake TLS, again), 64 KiB socket buffers, and a
// per-attempt timeout that covers reading the body, so a stalled attempt
// is retried instead of hanging: by default two seconds plus the body at
// 8 MiB/s (DefaultFirstByteTimeout, DefaultMinThroughput), or a flat
// Options.RequestTimeout. Latency below that is the engines' to hedge. Bodies are
// streamed from the caller's buffer without a copy. Every PUT sends
// Expect: 100-continue, one extra round trip inside the AZ, so that a
// refused upload (a taken key) is answered before its body is sent rather
// than by a connection reset, which Go's transport reports without the
// answer. Call CloseIdleConnections when done with a store.
//
// # Errors
//
// Every error is an *Error naming the operation, bucket and key, carrying
// the S3 error code and request id, and matching under errors.Is the
// sentinel it was classified as, in one place (classify):
//
//	S3 answer                                         sentinel
//	NoSuchKey, NotFound, 404 without a body           storage.ErrNotFound
//	412 PreconditionFailed (Put only)                 storage.ErrAlreadyExists
//	416 InvalidRange; range cut short by object end    storage.ErrInvalidRange
//	409 ConditionalRequestConflict                    retried by the SDK, then storage.ErrUnavailable
//	503 SlowDown, 500, other 5xx, 429, throttling     storage.ErrUnavailable (after the SDK's retries)
//	timeouts, DNS failures, refused or reset          storage.ErrUnavailable (after the SDK's retries;
//	connections, a body cut short                     NXDOMAIN is not retried)
//	a 2xx whose body ends early or does not decode,   storage.ErrUnavailable (retried by the SDK, which
//	a range answer that disagrees with the request    does not retry these by itself)
//	501 NotImplemented, AccessDenied, NoSuchBucket,   storage.ErrPermanent: an operator must act
//	other 4xx (and 412 to anything but Put)           (one attempt: the SDK does not retry them)
//	the caller's context cancelled or expired         none: errors.Is(err, context.Canceled / DeadlineExceeded)
//
// An attempt that outlasts Options.RequestTimeout is the store's failure,
// storage.ErrUnavailable, and its error never matches
// context.DeadlineExceeded, so that a caller can tell it from its own
// deadline; the caller's context ending gives an error that wraps
// ctx.Err() whatever the last attempt reported.
//
// Retries are the SDK's: aws.Config's retryer (standard mode, three
// attempts, unless configured otherwise) with ConditionalRequestConflict
// added to its retryable codes, since S3 answers it while another
// conditional write of the same key is in flight and a retry then sees the
// key settled. errors.As still reaches the SDK's errors
// (*awshttp.ResponseError, smithy.APIError) through *Error.
//
// Each bucket has its own S3 client, and so its own retryer and retry
// quota: the standard retryer's token bucket (500 tokens, a retry costing
// 14) that failing requests drain and that stops retries once empty. An
// outage of one AZ drains only that AZ's bucket's quota, whose requests
// then fail after one attempt, and leaves the retries of requests to the
// other AZs alone. (A retryer instance set through ClientOptions is shared
// by every client, and so is its quota.)
//
// An unreachable AZ shows in one of two ways. Where its endpoint refuses
// connections, each request fails within the retryer's backoff. Where
// packets are dropped, each attempt lasts until its timeout, so a request
// fails only after the retryer's attempts times the timeout plus backoff
// (about 8s for a 4 MiB object with the defaults), unless the caller's
// context ends first; a Put that timed out then reads its key back, with
// retries of its own, which can double that. A flat RequestTimeout must
// be chosen from the longest transfer an attempt makes, body included,
// not from S3's latency; the default grows with each request's body.
// The tests take an AZ down both ways, against the S3 server, under the
// replication engines.
package s3express
