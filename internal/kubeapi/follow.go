package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"time"
)

// Handler receives what Follow sees of a collection.
type Handler interface {
	// Replace is called after each list with every object of the
	// collection and the list's resourceVersion: the handler forgets what
	// the list does not hold.
	Replace(items []json.RawMessage, rv string)
	// Event is called for every watch event, bookmarks included.
	Event(ev Event)
}

// A Watching handler is also told how following goes: nil each time a
// watch starts, the error each time a list or a watch fails (Follow then
// retries). Until a watch starts again the handler hears of no change.
type Watching interface {
	Watching(err error)
}

// Follow keeps h informed of collection r in namespace ns (every namespace
// when empty) until ctx ends: a list (unless rv, the resourceVersion of a
// list the caller made, is given), then a watch from it, again after the
// server ends it, and a new list when the watch falls behind what the
// server keeps (410 Gone). Failures are retried with a backoff up to 5 s,
// and logged.
func (c *Client) Follow(ctx context.Context, r Resource, ns string, o ListOptions, rv string, h Handler, log *slog.Logger) {
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		var err error
		if rv == "" {
			var items []json.RawMessage
			rv, err = c.List(ctx, r, ns, o, func(raw json.RawMessage) error {
				items = append(items, raw)
				return nil
			})
			if err == nil {
				h.Replace(items, rv)
			}
		} else {
			var w *Watcher
			w, err = c.Watch(ctx, r, ns, WatchOptions{ListOptions: o, ResourceVersion: rv})
			if wh, ok := h.(Watching); ok && err == nil {
				wh.Watching(nil)
			}
			if err == nil {
				rv, err = follow(w, rv, h)
				w.Close()
			}
		}
		switch {
		case ctx.Err() != nil:
			return
		case err == nil || errors.Is(err, io.EOF):
			delay = 100 * time.Millisecond
			continue
		}
		if wh, ok := h.(Watching); ok {
			wh.Watching(err)
		}
		if errors.Is(err, ErrGone) {
			log.Info("kubernetes: the watch fell behind the API server; listing again", "resource", r.String())
			rv = ""
			continue
		}
		log.Warn("kubernetes: watch failed; will retry", "resource", r.String(), "err", err, "retry", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// follow hands the events of w to h and returns the resourceVersion to
// watch from next.
func follow(w *Watcher, rv string, h Handler) (string, error) {
	for {
		ev, err := w.Next()
		if err != nil {
			return rv, err
		}
		m, err := MetaOf(ev.Object)
		if err != nil {
			return rv, err
		}
		h.Event(ev)
		if m.ResourceVersion != "" {
			rv = m.ResourceVersion
		}
	}
}
