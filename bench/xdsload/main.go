// Command xdsload simulates Envoy proxies on delta ADS streams for
// BenchmarkXDS (bench/xds_test.go) and the hostile proxies of
// TestHostileProxies (test/faults), in a process of its own so that the
// clients' work is not the control plane's. xdsloadtest drives it.
//
//	xdsload -addr 127.0.0.1:5678 -mesh default -prefix proxy- -n 1000
//
// It opens one gRPC connection and one delta ADS stream per proxy, as the
// Dataplane <prefix><index> (node id <mesh>.<prefix><index>, no token:
// the benchmark runs on loopback), subscribes CDS, EDS and LDS with a
// wildcard, and answers every response as soon as it arrives. It keeps no
// resources, only what the benchmark asks for. What a proxy does is its
// -role:
//
//	ack     ACKs every response (Envoy)
//	nack    NACKs every response (an Envoy that rejects its config)
//	silent  subscribes and never reads its stream again, with gRPC's
//	        default 64 KiB windows: the control plane's sends to it block
//	churn   connects and disconnects: -churn times in all, at -rate a
//	        second, -concurrency at once, as the proxies <prefix><k mod n>,
//	        each on a new connection; every other one leaves as soon as it
//	        subscribed, the others once their first response arrived
//
// Standard output, one line each, times in Unix nanoseconds of the wall
// clock (the benchmark runs on the same host):
//
//	config <i> <start> <done> <clusters> <assignments> <listeners>
//	        proxy i's first complete config: every type answered;
//	        start is before it dialed
//	subscribed <i>        (silent) proxy i sent its subscriptions
//	connected <n>         every proxy has its first config (silent: has
//	                      subscribed)
//	churned <k> <failed> <seconds>
//	        (churn) k connections made and closed, failed of them refused
//	        or broken before their end, in seconds
//	watching <name>       the watch asked for on standard input is set
//	seen <name> <i> <t> <version> <responses>
//	        proxy i received <name> (first time since the watch) and
//	        answered it at t; responses is how many responses it had
//	        received then, that one included
//	done <name>           every proxy has seen <name>
//	status <name> <k>     k proxies have seen <name> so far
//	error <i> <message>   proxy i's stream failed (it is not reopened)
//
// Standard input, one command a line: `watch <name>`, `status <name>`.
// It exits when standard input closes.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshnames/meshnames/internal/xds"
)

var typeURLs = [...]string{xds.ClusterURL, xds.EndpointURL, xds.ListenerURL}

const deltaMethod = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"

func main() {
	addr := flag.String("addr", "", "the control plane's ADS address (host:port)")
	mesh := flag.String("mesh", "default", "the proxies' mesh")
	prefix := flag.String("prefix", "proxy-", "Dataplane names are this and an index")
	n := flag.Int("n", 1, "how many proxies")
	concurrency := flag.Int("concurrency", 1, "how many proxies connect at once; the next waits for one's first config")
	role := flag.String("role", "ack", "what the proxies do: ack, nack, silent or churn")
	churns := flag.Int("churn", 0, "(churn) how many connections to make and close")
	rate := flag.Float64("rate", 0, "(churn) connections a second (0: as many as -concurrency allows)")
	flag.Parse()
	if *addr == "" || *n < 1 || *concurrency < 1 {
		fmt.Fprintln(os.Stderr, "xdsload: -addr is required, -n and -concurrency at least 1")
		os.Exit(2)
	}
	l := &load{out: bufio.NewWriter(os.Stdout), n: *n, nack: *role == "nack"}
	l.watches.Store(&map[string]*watch{})
	switch *role {
	case "ack", "nack":
		go l.connect(*addr, *mesh, *prefix, *concurrency)
	case "silent":
		go l.silent(*addr, *mesh, *prefix)
	case "churn":
		if *churns < 1 || *rate < 0 {
			fmt.Fprintln(os.Stderr, "xdsload: -role churn needs -churn at least 1 and -rate at least 0")
			os.Exit(2)
		}
		go l.churn(*addr, *mesh, *prefix, *churns, *concurrency, *rate)
	default:
		fmt.Fprintf(os.Stderr, "xdsload: -role is ack, nack, silent or churn, not %q\n", *role)
		os.Exit(2)
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, name, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		switch cmd {
		case "watch":
			l.watch(name)
		case "status":
			k := 0
			if w := (*l.watches.Load())[name]; w != nil {
				k = l.n - int(w.left.Load())
			}
			l.printf("status %s %d\n", name, k)
		case "":
		default:
			fmt.Fprintf(os.Stderr, "xdsload: unknown command %q\n", cmd)
		}
	}
}

// load is the proxies and the watches the benchmark set.
type load struct {
	n       int
	nack    bool       // NACK every response
	mu      sync.Mutex // guards out
	out     *bufio.Writer
	watches atomic.Pointer[map[string]*watch] // copied on write
}

// watch is one name the benchmark waits for: when each proxy first
// received it.
type watch struct {
	name      string
	at        []atomic.Int64
	version   []string // written once per proxy, before its at
	responses []int    // the same
	left      atomic.Int64
}

func (l *load) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, format, args...)
	l.out.Flush()
}

func (l *load) watch(name string) {
	old := *l.watches.Load()
	if old[name] == nil {
		w := &watch{name: name, at: make([]atomic.Int64, l.n), version: make([]string, l.n), responses: make([]int, l.n)}
		w.left.Store(int64(l.n))
		m := make(map[string]*watch, len(old)+1)
		for k, v := range old {
			m[k] = v
		}
		m[name] = w
		l.watches.Store(&m)
	}
	l.printf("watching %s\n", name)
}

// seen records proxy i's receipt of w's name at t, in its response
// number responses; the last proxy to see it prints every receipt.
func (l *load) seen(w *watch, i int, t int64, version string, responses int) {
	if w.at[i].Load() != 0 {
		return
	}
	w.version[i], w.responses[i] = version, responses
	w.at[i].Store(t)
	if w.left.Add(-1) != 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for j := range w.at {
		fmt.Fprintf(l.out, "seen %s %d %d %s %d\n", w.name, j, w.at[j].Load(), w.version[j], w.responses[j])
	}
	fmt.Fprintf(l.out, "done %s\n", w.name)
	l.out.Flush()
}

// connect starts the proxies, concurrency at a time.
func (l *load) connect(addr, mesh, prefix string, concurrency int) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				ready := make(chan struct{})
				go l.run(i, addr, mesh+"."+fmt.Sprint(prefix, i), ready)
				<-ready
			}
		})
	}
	for i := range l.n {
		next <- i
	}
	close(next)
	wg.Wait()
	l.printf("connected %d\n", l.n)
}

// dialOptions are a proxy's: Envoy's HTTP/2 windows are 256 MiB, so a
// proxy does not throttle its control plane; grpc-go's 64 KiB would.
var dialOptions = []grpc.DialOption{
	grpc.WithTransportCredentials(insecure.NewCredentials()),
	grpc.WithInitialWindowSize(16 << 20), grpc.WithInitialConnWindowSize(16 << 20),
	grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1 << 30)),
}

// subscribe opens a delta ADS stream on cc as node and subscribes every
// type with a wildcard.
func subscribe(ctx context.Context, cc *grpc.ClientConn, node string) (grpc.ClientStream, error) {
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, deltaMethod, grpc.ForceCodecV2(codec{}))
	if err != nil {
		return nil, err
	}
	for j, url := range typeURLs {
		req := &discovery.DeltaDiscoveryRequest{TypeUrl: url}
		if j == 0 {
			req.Node = &corev3.Node{Id: node}
		}
		if err := st.SendMsg(req); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// rejected is a NACK's error detail.
var rejected = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: "xdsload: rejected (-role nack)"}

// run is proxy i: it closes ready once it has its first config (or its
// stream failed).
func (l *load) run(i int, addr, node string, ready chan struct{}) {
	start := time.Now().UnixNano()
	readyOnce := sync.OnceFunc(func() { close(ready) })
	defer readyOnce()
	fail := func(err error) { l.printf("error %d %s\n", i, strings.ReplaceAll(err.Error(), "\n", " ")) }
	cc, err := grpc.NewClient(addr, dialOptions...)
	if err != nil {
		fail(err)
		return
	}
	defer cc.Close()
	st, err := subscribe(context.Background(), cc, node)
	if err != nil {
		fail(err)
		return
	}
	var counts [len(typeURLs)]int
	var answered [len(typeURLs)]bool
	configured := false
	for responses := 1; ; responses++ {
		r := &response{watches: &l.watches}
		if err := st.RecvMsg(r); err != nil {
			fail(err)
			return
		}
		answer := &discovery.DeltaDiscoveryRequest{TypeUrl: r.typeURL, ResponseNonce: r.nonce}
		if l.nack {
			answer.ErrorDetail = rejected
		}
		if err := st.SendMsg(answer); err != nil {
			fail(err)
			return
		}
		now := time.Now().UnixNano()
		for j, url := range typeURLs {
			if url == r.typeURL && !answered[j] {
				answered[j], counts[j] = true, r.resources
			}
		}
		if !configured && answered[0] && answered[1] && answered[2] {
			configured = true
			l.printf("config %d %d %d %d %d %d\n", i, start, now, counts[0], counts[1], counts[2])
			readyOnce()
		}
		for _, h := range r.hits {
			l.seen(h.w, i, now, h.version, responses)
		}
	}
}

// silent subscribes the proxies and never reads their streams: with
// grpc-go's default windows, what the control plane sends past 64 KiB
// waits for a read that never comes. The connections stay open until the
// process exits.
func (l *load) silent(addr, mesh, prefix string) {
	for i := range l.n {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			l.printf("error %d %s\n", i, err)
			continue
		}
		if _, err := subscribe(context.Background(), cc, mesh+"."+fmt.Sprint(prefix, i)); err != nil {
			l.printf("error %d %s\n", i, strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		l.printf("subscribed %d\n", i)
	}
	l.printf("connected %d\n", l.n)
}

// churn makes total connections, at rate a second (0: unpaced),
// concurrency at once, as the proxies prefix<k mod n>.
func (l *load) churn(addr, mesh, prefix string, total, concurrency int, rate float64) {
	start := time.Now()
	var failed atomic.Int64
	var firstErr sync.Once
	next := make(chan int)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for k := range next {
				if err := l.churnOnce(addr, mesh+"."+fmt.Sprint(prefix, k%l.n), k%2 == 1); err != nil {
					failed.Add(1)
					firstErr.Do(func() { fmt.Fprintf(os.Stderr, "xdsload: churn: %v\n", err) })
				}
			}
		})
	}
	var tick <-chan time.Time
	if rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		tick = t.C
	}
	for k := range total {
		if tick != nil {
			<-tick
		}
		next <- k
	}
	close(next)
	wg.Wait()
	l.printf("churned %d %d %.3f\n", total, failed.Load(), time.Since(start).Seconds())
}

// churnOnce connects as node on a new connection, subscribes, waits for
// the first response when wait is set, and leaves.
func (l *load) churnOnce(addr, node string, wait bool) error {
	cc, err := grpc.NewClient(addr, dialOptions...)
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := subscribe(ctx, cc, node)
	if err != nil || !wait {
		return err
	}
	return st.RecvMsg(&response{watches: &l.watches})
}
