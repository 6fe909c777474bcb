package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Watch event types.
const (
	Added    = "ADDED"
	Modified = "MODIFIED"
	Deleted  = "DELETED"
	Bookmark = "BOOKMARK"
	Error    = "ERROR"
)

// Event is one entry of a watch: the type and the object's raw JSON (for
// Deleted, its last state).
type Event struct {
	Type   string
	Object json.RawMessage
}

// Watcher reads a watch stream.
type Watcher struct {
	body io.ReadCloser
	dec  *json.Decoder
}

// WatchOptions start a watch.
type WatchOptions struct {
	ListOptions
	// ResourceVersion is where the watch starts: changes after it.
	ResourceVersion string
	// TimeoutSeconds asks the server to end the watch after that long, so
	// that a stream silently cut by the network is noticed (300 when 0).
	TimeoutSeconds int
}

// Watch starts a watch of r in ns (every namespace when empty). It
// returns ErrGone when the resourceVersion is too old. The watch ends when
// ctx ends, the server closes it, or Close is called.
func (c *Client) Watch(ctx context.Context, r Resource, ns string, o WatchOptions) (*Watcher, error) {
	q := o.query()
	q.Set("watch", "1")
	q.Set("allowWatchBookmarks", "true")
	if o.ResourceVersion != "" {
		q.Set("resourceVersion", o.ResourceVersion)
	}
	t := o.TimeoutSeconds
	if t <= 0 {
		t = 300
	}
	q.Set("timeoutSeconds", strconv.Itoa(t))
	resp, err := c.do(ctx, request{method: http.MethodGet, path: r.path(ns, "", ""), query: q})
	if err != nil {
		return nil, err
	}
	return &Watcher{body: resp.Body, dec: newDecoder(resp.Body)}, nil
}

func newDecoder(r io.Reader) *json.Decoder { return json.NewDecoder(r) }

// Next returns the next event. It returns io.EOF when the server ended the
// watch, ErrGone when the server reports that the watch fell behind what
// it keeps, and other errors when the stream broke.
func (w *Watcher) Next() (Event, error) {
	var ev struct {
		Type   string          `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := w.dec.Decode(&ev); err != nil {
		if errors.Is(err, io.EOF) {
			return Event{}, io.EOF
		}
		return Event{}, fmt.Errorf("%w: watch stream: %w", ErrUnavailable, err)
	}
	if ev.Type == Error {
		var s status
		_ = json.Unmarshal(ev.Object, &s)
		code := s.Code
		if code == 0 {
			code = http.StatusInternalServerError
		}
		return Event{}, &StatusError{Code: code, Reason: s.Reason, Message: s.Message}
	}
	return Event{Type: ev.Type, Object: ev.Object}, nil
}

// Close ends the watch.
func (w *Watcher) Close() error { return w.body.Close() }
