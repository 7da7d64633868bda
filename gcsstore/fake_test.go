package gcsstore_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/activetier/activetier/gcsstore"
)

// Buckets of the canned-response tests: three zones.
const (
	bucketA = "walrus-us-central1-a"
	bucketB = "walrus-us-central1-b"
	bucketC = "walrus-us-central1-c"
)

func threeBuckets() map[string]string {
	return map[string]string{zoneA: bucketA, zoneB: bucketB, zoneC: bucketC}
}

// canned is an answer the fake server gives.
type canned struct {
	status int
	header map[string]string
	body   string
	// hangUp closes the connection without answering.
	hangUp bool
	// short declares Content-Length len(body)+short but sends only body.
	short int
}

// gcsError is a JSON API error document.
func gcsError(status int, reason string) canned {
	return canned{
		status: status,
		header: map[string]string{"Content-Type": "application/json"},
		body:   fmt.Sprintf(`{"error":{"code":%d,"message":"canned %s","errors":[{"reason":%q,"message":"canned"}]}}`, status, reason, reason),
	}
}

// uploaded is the JSON API's answer to a successful upload.
func uploaded(name string, size int) canned {
	return canned{status: 200, header: map[string]string{"Content-Type": "application/json"},
		body: fmt.Sprintf(`{"kind":"storage#object","bucket":%q,"name":%q,"size":"%d","generation":"1"}`, bucketA, name, size)}
}

// object is an XML API answer holding the whole object.
func object(body string) canned {
	return canned{status: 200, header: map[string]string{"Content-Length": strconv.Itoa(len(body)), "X-Goog-Generation": "1"}, body: body}
}

// partial is an XML API answer to a ranged read.
func partial(contentRange, body string, short int) canned {
	return canned{status: 206, header: map[string]string{"Content-Range": contentRange, "X-Goog-Generation": "1"}, body: body, short: short}
}

// seenRequest is what the fake server recorded of one request.
type seenRequest struct {
	method, path, rawQuery string
	header                 http.Header
}

// fakeGCS answers requests with a script of canned answers, the last one
// repeated, or with handler when set, and records what it was sent.
type fakeGCS struct {
	*httptest.Server
	mu      sync.Mutex
	script  []canned
	handler func(w http.ResponseWriter, r *http.Request)
	seen    []seenRequest
}

func newFakeGCS(t *testing.T, script ...canned) *fakeGCS {
	f := &fakeGCS{script: script}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeGCS) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, seenRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone()})
	handler := f.handler
	var c canned
	if len(f.script) > 0 {
		c = f.script[0]
		if len(f.script) > 1 {
			f.script = f.script[1:]
		}
	}
	f.mu.Unlock()
	if handler != nil {
		handler(w, r)
		return
	}
	if c.hangUp {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range c.header {
		w.Header().Set(k, v)
	}
	if c.short > 0 {
		w.Header().Set("Content-Length", strconv.Itoa(len(c.body)+c.short))
	}
	w.WriteHeader(c.status)
	_, _ = io.WriteString(w, c.body)
}

func (f *fakeGCS) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

// newFakeStore returns a store in zoneA over the fake server, with
// near-zero backoff so that retries of canned failures are quick.
func newFakeStore(t *testing.T, f *fakeGCS, mod func(*gcsstore.Options)) *gcsstore.Store {
	t.Helper()
	return newStore(t, f.URL, threeBuckets(), zoneA, func(o *gcsstore.Options) {
		o.MaxBackoff = time.Millisecond
		o.RequestTimeout = 5 * time.Second
		if mod != nil {
			mod(o)
		}
	})
}

// isUpload, isRead, isDelete and isList tell the store's requests apart.
func isUpload(r seenRequest) bool { return strings.HasPrefix(r.path, "/upload/storage/v1/b/") }
func isRead(r seenRequest) bool {
	return r.method == http.MethodGet && !strings.HasPrefix(r.path, "/storage/v1/")
}
