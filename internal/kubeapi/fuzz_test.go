package kubeapi

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzWatch reads arbitrary watch streams and error bodies: no panic, a
// stream ends with an error, and an ERROR event is a StatusError.
func FuzzWatch(f *testing.F) {
	f.Add([]byte(`{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}}
{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}}`))
	f.Add([]byte(`{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}{"type":"DELETED","object":{}}`))
	f.Add([]byte(`{"kind":"Status","code":422,"reason":"Invalid","details":{"causes":[{"field":"spec.ports[0].port","message":"Required value"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = statusError(422, data).Error()
		w := &Watcher{body: io.NopCloser(bytes.NewReader(data))}
		w.dec = newDecoder(w.body)
		for range 1000 {
			ev, err := w.Next()
			if err != nil {
				var se *StatusError
				if bytes.Contains(data, []byte(`"ERROR"`)) && errors.As(err, &se) && se.Code == 0 {
					t.Fatalf("an ERROR event without a code: %v", err)
				}
				return
			}
			if ev.Type == Error {
				t.Fatal("an ERROR event handed out as an event")
			}
		}
	})
}
