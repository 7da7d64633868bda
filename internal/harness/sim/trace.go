package sim

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// traceHandler writes an engine's log records into the run's trace, so a
// replay shows what the engines did between the driver's steps.
type traceHandler struct {
	w      *world
	prefix string
	attrs  []slog.Attr
	group  string
}

func (h *traceHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *traceHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "  [%s] %s: %s", h.prefix, r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		if h.group != "" {
			a.Key = h.group + "." + a.Key
		}
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.w.tracef("%s", b.String())
	return nil
}

func (h *traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &c
}

func (h *traceHandler) WithGroup(name string) slog.Handler {
	c := *h
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	return &c
}
