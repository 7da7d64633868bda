package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// maxControlBody bounds a control request's body and answer: a cluster
// view of many topics is the largest.
const maxControlBody = 16 << 20

// applyJSON serves a control request that changes something and has no
// answer but its status (see serveJSON): 204 once apply has taken the
// request, 409 with the error it refused it with.
func applyJSON[T any](apply func(context.Context, T) error) http.HandlerFunc {
	return serveJSON(func(ctx context.Context, req T) (any, error) { return nil, apply(ctx, req) })
}

// answerJSON serves a control request that is answered, as JSON with
// status 200, by what answer returns (see serveJSON).
func answerJSON[T, A any](answer func(context.Context, T) A) http.HandlerFunc {
	return serveJSON(func(ctx context.Context, req T) (any, error) { return answer(ctx, req), nil })
}

// serveJSON serves the control API's requests, each a POST whose body is
// one JSON value of type T. It answers 405 to another method, 413 to a
// body over maxControlBody, and 400 to one that is not exactly one T (not
// JSON, a field T does not have, or more after the value), without
// calling do; then 409 with do's error, 204 when do has no answer (nil),
// and do's answer as JSON otherwise.
func serveJSON[T any](do func(context.Context, T) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, fmt.Sprintf("%s %s: only POST is served", r.Method, r.URL.Path), http.StatusMethodNotAllowed)
			return
		}
		var req T
		if err := decodeOne(http.MaxBytesReader(w, r.Body, maxControlBody), &req); err != nil {
			status := http.StatusBadRequest
			if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
				status = http.StatusRequestEntityTooLarge
			}
			http.Error(w, err.Error(), status)
			return
		}
		answer, err := do(r.Context(), req)
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusConflict)
		case answer == nil:
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(answer)
		}
	}
}

// decodeOne decodes the single JSON value r holds into v, refusing
// fields v does not have and anything but white space after the value.
func decodeOne(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decoding the body: %w", err)
	}
	switch _, err := dec.Token(); {
	case err == io.EOF:
		return nil
	case err != nil:
		return fmt.Errorf("after the body's JSON value: %w", err)
	default:
		return errors.New("more than one JSON value in the body")
	}
}
