package broker

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveReq is the request type of TestServeJSON's handlers.
type serveReq struct {
	N int    `json:"n"`
	S string `json:"s"`
}

// TestServeJSON: the control API's handlers take one JSON value by POST,
// bounded and strictly decoded, hand only that to what they serve, and
// answer its outcome with one status each.
func TestServeJSON(t *testing.T) {
	errRefused := errors.New("refused for the test")
	oversized := `{"n": 1, "s": "` + strings.Repeat("x", maxControlBody) + `"}`
	for _, c := range []struct {
		name     string
		method   string
		body     string
		refuse   bool // the apply function returns errRefused
		answer   bool // answerJSON, not applyJSON
		status   int
		calledN  int    // the N the function was given; 0 if it must not be called
		contains string // in the answer's body
	}{
		{name: "applied", method: http.MethodPost, body: `{"n": 7, "s": "a"}`, status: http.StatusNoContent, calledN: 7},
		{name: "answered", method: http.MethodPost, body: `{"n": 7}`, answer: true, status: http.StatusOK, calledN: 7, contains: `{"n":8,"s":"answer"}`},
		{name: "trailing white space", method: http.MethodPost, body: "{\"n\": 7}\n \t\n", status: http.StatusNoContent, calledN: 7},
		{name: "refused", method: http.MethodPost, body: `{"n": 7}`, refuse: true, status: http.StatusConflict, calledN: 7, contains: errRefused.Error()},
		{name: "wrong method", method: http.MethodGet, status: http.StatusMethodNotAllowed, contains: "only POST"},
		{name: "wrong method with a body", method: http.MethodPut, body: `{"n": 7}`, answer: true, status: http.StatusMethodNotAllowed},
		{name: "oversized body", method: http.MethodPost, body: oversized, status: http.StatusRequestEntityTooLarge},
		{name: "oversized body answered", method: http.MethodPost, body: oversized, answer: true, status: http.StatusRequestEntityTooLarge},
		{name: "empty body", method: http.MethodPost, status: http.StatusBadRequest},
		{name: "malformed JSON", method: http.MethodPost, body: `{"n": 7,`, status: http.StatusBadRequest},
		{name: "wrong type", method: http.MethodPost, body: `{"n": "seven"}`, status: http.StatusBadRequest},
		{name: "unknown field", method: http.MethodPost, body: `{"n": 7, "extra": true}`, status: http.StatusBadRequest, contains: "extra"},
		{name: "a second value", method: http.MethodPost, body: `{"n": 7} {"n": 8}`, status: http.StatusBadRequest, contains: "more than one"},
		{name: "trailing garbage", method: http.MethodPost, body: `{"n": 7} x`, answer: true, status: http.StatusBadRequest},
		{name: "trailing close", method: http.MethodPost, body: `{"n": 7}}`, status: http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			called := 0
			var h http.HandlerFunc
			if c.answer {
				h = answerJSON(func(_ context.Context, r serveReq) serveReq {
					called = r.N
					return serveReq{N: r.N + 1, S: "answer"}
				})
			} else {
				h = applyJSON(func(_ context.Context, r serveReq) error {
					called = r.N
					if c.refuse {
						return errRefused
					}
					return nil
				})
			}
			w := httptest.NewRecorder()
			h(w, httptest.NewRequestWithContext(t.Context(), c.method, "/v1/test", strings.NewReader(c.body)))
			require.Equal(t, c.status, w.Code, "%s", w.Body)
			assert.Equal(t, c.calledN, called, "what the handler handed on")
			assert.Contains(t, w.Body.String(), c.contains)
			switch c.status {
			case http.StatusMethodNotAllowed:
				assert.Equal(t, http.MethodPost, w.Header().Get("Allow"))
			case http.StatusOK:
				assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			case http.StatusNoContent:
				assert.Empty(t, w.Body.String())
			}
		})
	}
}
