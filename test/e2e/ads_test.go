package e2e

import (
	"context"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/meshnames/meshnames/internal/xds"
)

// adsTypes are the types a proxy subscribes to, clusters first.
var adsTypes = []string{xds.ClusterURL, xds.EndpointURL, xds.ListenerURL}

// adsWatch is a delta ADS stream held open as a proxy. A goroutine only
// receives, stamping each response with its arrival; the test goroutine
// applies them (next, settle, until) and ACKs, so the state needs no lock.
type adsWatch struct {
	t      *testing.T
	addr   string
	stream grpc.BidiStreamingClient[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]
	got    chan arrival
	errc   chan error
	// res holds what the proxy has: type URL -> name -> resource.
	res map[string]map[string]*discovery.Resource
	// n counts the resources received.
	n int
}

// arrival is a response and when the receiving goroutine got it.
type arrival struct {
	r  *discovery.DeltaDiscoveryResponse
	at time.Time
}

// watchADS opens a delta stream to addr as node, subscribed to adsTypes
// with initial versions (name -> version per type URL, may be nil). The
// stream ends with ctx.
func watchADS(t *testing.T, ctx context.Context, addr string, node *corev3.Node, initial map[string]map[string]string) *adsWatch {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	// The connection ends with ctx, or with the test.
	context.AfterFunc(ctx, func() { cc.Close() })
	t.Cleanup(func() { cc.Close() })
	s, err := discovery.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := &adsWatch{t: t, addr: addr, stream: s, got: make(chan arrival, 64), errc: make(chan error, 1), res: map[string]map[string]*discovery.Resource{}}
	for _, url := range adsTypes {
		w.res[url] = map[string]*discovery.Resource{}
		for name, v := range initial[url] {
			w.res[url][name] = &discovery.Resource{Name: name, Version: v}
		}
		if err := s.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: url, InitialResourceVersions: initial[url]}); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		for {
			r, err := s.Recv()
			if err != nil {
				w.errc <- err
				return
			}
			select {
			case w.got <- arrival{r: r, at: time.Now()}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return w
}

// next applies and ACKs the next response, returning when it arrived;
// ok is false when none came within timeout.
func (w *adsWatch) next(timeout time.Duration) (at time.Time, ok bool) {
	w.t.Helper()
	select {
	case a := <-w.got:
		url := a.r.GetTypeUrl()
		for _, res := range a.r.GetResources() {
			w.res[url][res.GetName()] = res
			w.n++
		}
		for _, name := range a.r.GetRemovedResources() {
			delete(w.res[url], name)
		}
		if err := w.stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: url, ResponseNonce: a.r.GetNonce()}); err != nil {
			w.t.Fatalf("ACK on the delta stream to %s: %v", w.addr, err)
		}
		return a.at, true
	case err := <-w.errc:
		w.t.Fatalf("delta stream to %s: %v", w.addr, err)
	case <-time.After(timeout):
	}
	return time.Time{}, false
}

// settle applies responses until the stream has been quiet for quiet.
func (w *adsWatch) settle(quiet time.Duration) {
	w.t.Helper()
	for {
		if _, ok := w.next(quiet); !ok {
			return
		}
	}
}

// until applies responses until cond holds of the state, and returns the
// arrival of the response that made it hold (now, if it already did).
func (w *adsWatch) until(what string, timeout time.Duration, cond func() bool) time.Time {
	w.t.Helper()
	if cond() {
		return time.Now()
	}
	deadline := time.Now().Add(timeout)
	for {
		at, ok := w.next(time.Until(deadline))
		if ok && cond() {
			return at
		}
		if !ok {
			w.t.Fatalf("not within %s on the stream to %s: %s", timeout, w.addr, what)
		}
	}
}

// versions is the state as name -> version per type URL.
func (w *adsWatch) versions() map[string]map[string]string {
	out := map[string]map[string]string{}
	for url, rs := range w.res {
		out[url] = map[string]string{}
		for name, r := range rs {
			out[url][name] = r.GetVersion()
		}
	}
	return out
}

// get decodes the resource name of type url into m, reporting whether
// the proxy has it.
func (w *adsWatch) get(url, name string, m proto.Message) bool {
	w.t.Helper()
	r, ok := w.res[url][name]
	if !ok || r.GetResource() == nil {
		return false
	}
	if err := r.GetResource().UnmarshalTo(m); err != nil {
		w.t.Fatalf("%s %s: %v", url, name, err)
	}
	return true
}

// deltaState opens a delta stream to addr as node, with initial versions,
// applies what comes until the stream has been quiet for quiet, and
// returns the state (type -> name -> version) and how many resources
// came.
func deltaState(t *testing.T, addr, node string, initial map[string]map[string]string, quiet time.Duration) (map[string]map[string]string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := watchADS(t, ctx, addr, &corev3.Node{Id: node}, initial)
	w.settle(quiet)
	return w.versions(), w.n
}
