// Package gcsstore is a storage.ObjectStore on Google Cloud Storage through
// cloud.google.com/go/storage (imported as gcs), one bucket per zone. Its
// zonal buckets ("Rapid Bucket", the Rapid storage class) are Cloud
// Storage's analogue of S3 Express One Zone: a bucket placed in one zone,
// next to the brokers there, with low-latency reads and writes. A leader
// writes combined objects to its own zone's bucket; followers read their
// byte ranges from whichever bucket a metadata entry names. Regional
// buckets work too (one per zone, or any bucket standing for a zone), at
// Standard storage's prices and latency.
//
// # Guarantees
//
//   - Put never overwrites. Every upload carries ifGenerationMatch=0
//     (gcs.Conditions{DoesNotExist: true}), and a taken key (412) is
//     storage.ErrAlreadyExists. Put's outcome is exact even when an
//     answer is lost: if an attempt reached the server and did not come
//     back refused (a 4xx other than 408, 409 or 429) and Put did not
//     succeed, Put reads the key back and compares it byte for byte:
//     holding exactly the body sent, it is this Put's object (a retry that
//     found the key taken by its own first attempt included); holding
//     anything else, ErrAlreadyExists; missing or unreadable,
//     storage.ErrUnavailable. Each upload is one request carrying the
//     body's CRC32C, which Cloud Storage checks before storing.
//   - ReadRange (storage.RangeReader) is GetRange reading the answer into
//     the caller's buffer instead of a new slice, with the same checks,
//     retries and errors; every attempt reads within the call, so nothing
//     writes to the buffer once ReadRange has returned.
//   - GetRange returns exactly the bytes asked for, from one ranged read,
//     or an error. A range not wholly inside the object is
//     storage.ErrInvalidRange, though Cloud Storage answers a range that
//     runs past the end with fewer bytes: the store compares the range
//     with the object size the answer reports. An answer that disagrees
//     with the request (another start, another length, a body cut short)
//     is retried and then storage.ErrUnavailable, never a short result.
//   - Nothing is sent for a request that cannot be valid: a reference to a
//     bucket the store was not configured with (or to a configured bucket
//     under another zone's name) is storage.ErrUnknownBucket, a malformed
//     range storage.ErrInvalidRange, a key Cloud Storage cannot store
//     ErrInvalidKey, and a context already done its own error. Delete
//     checks every reference's bucket before deleting anything; a key
//     Cloud Storage cannot take is reported while the other keys are still
//     deleted.
//   - Delete is idempotent: Cloud Storage has no multi-object delete in
//     its JSON API, so each object is one DELETE, up to
//     Options.DeleteConcurrency at once; a missing object (404) is not an
//     error. A bucket that fails (unavailable, or refusing) stops the
//     deletes of that bucket only.
//   - List is complete and unordered: it reads every page and promises no
//     order (Cloud Storage sorts, other backends need not).
//
// # Zones and buckets
//
// Options.Buckets maps each zone of the deployment to its bucket, and
// Options.LocalAZ names this broker's zone; the zone is what
// metadata.ObjectRef.AZ carries. Use Compute Engine zone names
// ("us-central1-a"): unlike AWS AZ names they are the same in every
// project, so they need no separate id. A broker learns its zone from the
// metadata server (instance/zone). Every broker of a deployment uses the
// same map and key prefix:
//
//	store, err := gcsstore.New(ctx, gcsstore.Options{
//		Buckets: map[string]string{
//			"us-central1-a": "wal-us-central1-a",
//			"us-central1-b": "wal-us-central1-b",
//			"us-central1-c": "wal-us-central1-c",
//		},
//		LocalAZ:   "us-central1-a",
//		KeyPrefix: "cluster-a/",
//		GRPC:      true, // zonal buckets are served over gRPC
//	})
//
// Create one zonal bucket in each zone the brokers run in (gcloud storage
// buckets create with --location set to the region, --placement to the
// zone and --default-storage-class=RAPID; zonal buckets need hierarchical
// namespace and uniform bucket-level access). Bucket names do not embed the
// zone, so unlike s3express the store cannot check the map against the
// buckets' placement offline: name buckets after their zone. New makes no
// request.
//
// # Credentials and emulators
//
// The store never reads credentials itself. By default the client library
// uses Application Default Credentials: GOOGLE_APPLICATION_CREDENTIALS,
// the gcloud user's credentials, or the instance's service account. The
// brokers' service account needs roles/storage.objectUser on each bucket
// (storage.objects.create, get, delete and list).
//
// For an emulator, set Options.Endpoint to its URL, which turns
// authentication off, or set STORAGE_EMULATOR_HOST, which the client
// library reads by itself. The tests run this way against fake-gcs-server,
// which scripts/test.sh starts and names in ACTIVETIER_GCS_ENDPOINT. The
// emulator keeps ifGenerationMatch=0 (412 for a taken key), answers ranged
// reads as Cloud Storage does (a range running past the end comes back
// shorter, one starting at or past the end is 416), and verifies an
// upload's CRC32C. Where it differs: it serves the XML API, which the
// library reads objects through, only under the host name given by its
// -public-host flag, so the script sets that to the emulator's own address;
// and it speaks only HTTP, so the GRPC option is not exercised by the
// tests.
//
// # Attempts and timeouts
//
// The library's own retries are turned off (it would retry until the
// context ends). The store makes up to Options.MaxAttempts attempts per
// operation while the failure is transient, with jittered exponential
// backoff between them (capped by Options.MaxBackoff), each attempt bounded
// by Options.RequestTimeout, reading the answer included. An attempt that
// times out is the store's failure, storage.ErrUnavailable, and its error
// never matches context.DeadlineExceeded, so a caller can tell it from its
// own deadline; the caller's context ending gives an error that wraps
// ctx.Err() and matches no walstore sentinel.
//
// # Errors
//
// Every error is an *Error naming the operation, bucket and key, carrying
// the HTTP status and Cloud Storage's reason, the number of attempts, and
// matching under errors.Is the sentinel it was classified as, in one place
// (classify):
//
//	Cloud Storage answer                               sentinel
//	404 reading or deleting                            storage.ErrNotFound (Delete: success)
//	404 writing or listing (no such bucket)            storage.ErrPermanent
//	412 conditionNotMet (Put only)                     storage.ErrAlreadyExists
//	416; range cut short by the object's end           storage.ErrInvalidRange
//	408, 409, 429, 5xx other than 501                  storage.ErrUnavailable (after the attempts)
//	timeouts, refused or reset connections, a body     storage.ErrUnavailable (after the attempts)
//	cut short, an answer that disagrees
//	501, 400, 401, 403 and other 4xx                   storage.ErrPermanent: an operator must act
//	the caller's context cancelled or expired          none: errors.Is(err, context.Canceled / DeadlineExceeded)
//
// The gRPC client's status codes map the same way: NotFound like 404,
// FailedPrecondition like 412, OutOfRange like 416, PermissionDenied,
// Unauthenticated, InvalidArgument and Unimplemented to ErrPermanent, the
// rest to ErrUnavailable. errors.As still reaches *googleapi.Error through
// *Error.
package gcsstore
