package s3express_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fault is what the fault proxy does to one request.
type fault int

const (
	pass fault = iota
	// refuse500 and slowDown503 answer with an S3 error without
	// forwarding the request: nothing is stored.
	refuse500
	slowDown503
	// The faults below forward the request first, so a PUT is stored.
	//
	// stored500 answers 500 InternalError all the same.
	stored500
	// dropAfterForward closes the client's connection without an answer.
	dropAfterForward
	// truncateBody sends the answer's status and headers, then half its
	// body (the declared length, or 32 bytes more for an empty body, is
	// never reached), then closes the connection.
	truncateBody
	// shortLength declares and sends one byte less than the body, and
	// keeps the connection.
	shortLength
	// longLength declares one byte more than the body, sends the body,
	// and closes the connection.
	longLength
	// delay holds the answer until the client gives up on it.
	delay
)

var faultNames = map[fault]string{
	pass: "pass", refuse500: "500 before forwarding", slowDown503: "503 SlowDown", stored500: "500 after forwarding",
	dropAfterForward: "connection dropped after forwarding", truncateBody: "body cut short",
	shortLength: "Content-Length one short", longLength: "Content-Length one long", delay: "answer delayed past the attempt timeout",
}

func (f fault) String() string { return faultNames[f] }

// stores reports whether the fault lets a PUT reach the server.
func (f fault) stores() bool { return f >= stored500 }

// faultRule picks the fault for a request; n counts the requests the
// proxy received before it, from 0.
type faultRule func(r *http.Request, n int) fault

// faultProxy is an HTTP proxy on a loopback TCP port in front of the S3
// server: requests and answers cross real connections on both sides, and
// the faults happen on the client's connection, as a failing network or
// load balancer would produce them. The rule can be changed at any time.
type faultProxy struct {
	srv      *httptest.Server
	upstream *url.URL
	client   *http.Client

	mu     sync.Mutex
	rule   faultRule
	n      int
	counts map[fault]int
	// release ends delayed answers when the proxy closes.
	release chan struct{}
}

func newFaultProxy(t *testing.T, upstream string, rule faultRule) *faultProxy {
	t.Helper()
	u, err := url.Parse(upstream)
	require.NoError(t, err)
	p := &faultProxy{
		upstream: u,
		client: &http.Client{
			Transport:     &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		rule:    rule,
		counts:  map[fault]int{},
		release: make(chan struct{}),
	}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		close(p.release)
		p.srv.Close()
		p.client.CloseIdleConnections()
	})
	return p
}

// URL is the endpoint clients use instead of the server's.
func (p *faultProxy) URL() string { return p.srv.URL }

func (p *faultProxy) setRule(rule faultRule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rule = rule
}

// injected returns how many requests each fault was applied to.
func (p *faultProxy) injected() map[fault]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[fault]int{}
	for f, n := range p.counts {
		if f != pass {
			out[f] = n
		}
	}
	return out
}

func (p *faultProxy) pick(r *http.Request) fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := pass
	if p.rule != nil {
		f = p.rule(r, p.n)
	}
	p.n++
	p.counts[f]++
	return f
}

func (p *faultProxy) serve(w http.ResponseWriter, r *http.Request) {
	// Reading the body answers Expect: 100-continue, as S3 does.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		hangUp(w)
		return
	}
	f := p.pick(r)
	switch f {
	case refuse500:
		writeS3Error(w, http.StatusInternalServerError, "InternalError")
		return
	case slowDown503:
		writeS3Error(w, http.StatusServiceUnavailable, "SlowDown")
		return
	}

	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream.String(), bytes.NewReader(body))
	if err != nil {
		hangUp(w)
		return
	}
	// The path exactly as the client encoded and signed it.
	out.URL.Opaque, _, _ = strings.Cut(r.RequestURI, "?")
	out.URL.RawQuery = r.URL.RawQuery
	out.Header = r.Header.Clone()
	out.Header.Del("Expect") // the body is already here
	// The signature covers the Host the client addressed: the proxy's.
	out.Host = r.Host
	out.ContentLength = int64(len(body))
	resp, err := p.client.Do(out)
	if err != nil {
		hangUp(w)
		return
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		hangUp(w)
		return
	}

	switch f {
	case stored500:
		writeS3Error(w, http.StatusInternalServerError, "InternalError")
	case dropAfterForward:
		hangUp(w)
	case delay:
		select {
		case <-r.Context().Done():
		case <-p.release:
		}
		hangUp(w)
	case truncateBody:
		declared := len(respBody)
		if declared == 0 {
			declared = 32
		}
		writeRaw(w, resp, declared, respBody[:len(respBody)/2])
	case shortLength:
		if len(respBody) == 0 {
			writeRaw(w, resp, 0, nil)
			return
		}
		writeRaw(w, resp, len(respBody)-1, respBody[:len(respBody)-1])
	case longLength:
		writeRaw(w, resp, len(respBody)+1, respBody)
	default:
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(respBody)))
		w.WriteHeader(resp.StatusCode)
		w.Write(respBody)
	}
}

// writeS3Error answers with an S3 error document.
func writeS3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-amz-request-id", "faultproxy")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message><RequestId>faultproxy</RequestId></Error>`, code)
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		conn.Close()
	}
}

// writeRaw writes resp's status and headers with Content-Length declared,
// then body, on the raw connection, and closes it.
func writeRaw(w http.ResponseWriter, resp *http.Response, declared int, body []byte) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n", resp.StatusCode, http.StatusText(resp.StatusCode))
	h := resp.Header.Clone()
	h.Set("Content-Length", strconv.Itoa(declared))
	h.Set("Connection", "close")
	h.Del("Transfer-Encoding")
	h.Write(buf)
	buf.WriteString("\r\n")
	buf.Write(body)
	buf.Flush()
	// Let the client read what was sent before the connection closes,
	// so that it sees a short body rather than a reset.
	if tc, ok := conn.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		io.Copy(io.Discard, io.LimitReader(bufio.NewReader(conn), 1<<20))
	}
}

// onlyFirst applies f to the first request with method (any method if
// empty) and passes every other.
func onlyFirst(method string, f fault) faultRule {
	done := false
	return func(r *http.Request, _ int) fault {
		if done || method != "" && r.Method != method {
			return pass
		}
		done = true
		return f
	}
}

// always applies f to every request with method (any method if empty).
func always(method string, f fault) faultRule {
	return func(r *http.Request, _ int) fault {
		if method != "" && r.Method != method {
			return pass
		}
		return f
	}
}

// atRate applies one of faults, chosen at random, to a fraction of the
// requests, with a generator seeded by seed so that a run can be replayed.
func atRate(seed uint64, fraction float64, faults ...fault) faultRule {
	rng := rand.New(rand.NewPCG(seed, seed))
	return func(*http.Request, int) fault {
		if rng.Float64() >= fraction {
			return pass
		}
		return faults[rng.IntN(len(faults))]
	}
}

// transientFaults are the faults the conformance run injects: every one
// but delay, whose cost is a whole attempt timeout.
var transientFaults = []fault{refuse500, slowDown503, stored500, dropAfterForward, truncateBody, shortLength, longLength}

// every fault but pass, for the table tests.
var allFaults = append(append([]fault(nil), transientFaults...), delay)
