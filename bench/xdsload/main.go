// Command xdsload simulates Envoy proxies on delta ADS streams for
// BenchmarkXDS (bench/xds_test.go), in a process of its own so that the
// clients' work is not the control plane's.
//
//	xdsload -addr 127.0.0.1:5678 -mesh default -prefix proxy- -n 1000
//
// It opens one gRPC connection and one delta ADS stream per proxy, as the
// Dataplane <prefix><index> (node id <mesh>.<prefix><index>, no token:
// the benchmark runs on loopback), subscribes CDS, EDS and LDS with a
// wildcard, and ACKs every response as soon as it arrives. It keeps no
// resources, only what the benchmark asks for. Standard output, one line
// each, times in Unix nanoseconds of the wall clock (the benchmark runs on
// the same host):
//
//	config <i> <start> <done> <clusters> <assignments> <listeners>
//	        proxy i's first complete config: every type answered and ACKed;
//	        start is before it dialed
//	connected <n>         every proxy has its first config
//	watching <name>       the watch asked for on standard input is set
//	seen <name> <i> <t> <version>
//	        proxy i received <name> (first time since the watch) and ACKed
//	        it at t
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
	"google.golang.org/grpc"
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
	flag.Parse()
	if *addr == "" || *n < 1 || *concurrency < 1 {
		fmt.Fprintln(os.Stderr, "xdsload: -addr is required, -n and -concurrency at least 1")
		os.Exit(2)
	}
	l := &load{out: bufio.NewWriter(os.Stdout), n: *n}
	l.watches.Store(&map[string]*watch{})
	go l.connect(*addr, *mesh, *prefix, *concurrency)
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
	mu      sync.Mutex // guards out
	out     *bufio.Writer
	watches atomic.Pointer[map[string]*watch] // copied on write
}

// watch is one name the benchmark waits for: when each proxy first
// received it.
type watch struct {
	name    string
	at      []atomic.Int64
	version []string // written once per proxy, before its at
	left    atomic.Int64
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
		w := &watch{name: name, at: make([]atomic.Int64, l.n), version: make([]string, l.n)}
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

// seen records proxy i's receipt of w's name at t; the last proxy to see
// it prints every receipt.
func (l *load) seen(w *watch, i int, t int64, version string) {
	if w.at[i].Load() != 0 {
		return
	}
	w.version[i] = version
	w.at[i].Store(t)
	if w.left.Add(-1) != 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for j := range w.at {
		fmt.Fprintf(l.out, "seen %s %d %d %s\n", w.name, j, w.at[j].Load(), w.version[j])
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

// run is proxy i: it closes ready once it has its first config (or its
// stream failed).
func (l *load) run(i int, addr, node string, ready chan struct{}) {
	start := time.Now().UnixNano()
	readyOnce := sync.OnceFunc(func() { close(ready) })
	defer readyOnce()
	fail := func(err error) { l.printf("error %d %s\n", i, strings.ReplaceAll(err.Error(), "\n", " ")) }
	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// Envoy's HTTP/2 windows are 256 MiB: a proxy does not throttle
		// its control plane; grpc-go's 64 KiB would.
		grpc.WithInitialWindowSize(16<<20), grpc.WithInitialConnWindowSize(16<<20),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30)),
	)
	if err != nil {
		fail(err)
		return
	}
	defer cc.Close()
	st, err := cc.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, deltaMethod, grpc.ForceCodecV2(codec{}))
	if err != nil {
		fail(err)
		return
	}
	for j, url := range typeURLs {
		req := &discovery.DeltaDiscoveryRequest{TypeUrl: url}
		if j == 0 {
			req.Node = &corev3.Node{Id: node}
		}
		if err := st.SendMsg(req); err != nil {
			fail(err)
			return
		}
	}
	var counts [len(typeURLs)]int
	var answered [len(typeURLs)]bool
	configured := false
	for {
		r := &response{watches: &l.watches}
		if err := st.RecvMsg(r); err != nil {
			fail(err)
			return
		}
		if err := st.SendMsg(&discovery.DeltaDiscoveryRequest{TypeUrl: r.typeURL, ResponseNonce: r.nonce}); err != nil {
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
			l.seen(h.w, i, now, h.version)
		}
	}
}
