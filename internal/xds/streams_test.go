package xds

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestStreams_AsInspectReportsThem: the streams without the config are
// those Inspect reports, and none once the proxy has left.
func TestStreams_AsInspectReportsThem(t *testing.T) {
	e := newEnv(t, nil)
	e.dataplane("client", "client", 9999)
	p := Proxy{Mesh: "default", Name: "client"}
	if got := e.srv.Streams(p); len(got) != 0 {
		t.Fatalf("streams before any connection: %+v", got)
	}
	c := newDeltaClient(t, e, "default.client", nil)
	c.settle()
	in, err := e.srv.Inspect(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Streams) != 1 {
		t.Fatalf("Inspect reports %d streams, want 1", len(in.Streams))
	}
	if d := cmp.Diff(in.Streams, e.srv.Streams(p)); d != "" {
		t.Errorf("Streams (-Inspect +Streams):\n%s", d)
	}
	c.stream.CloseSend()
	deadline := time.Now().Add(10 * time.Second)
	for len(e.srv.Streams(p)) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stream is still reported 10s after the proxy closed it")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
