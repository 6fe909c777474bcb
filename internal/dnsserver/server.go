// Package dnsserver answers the names of a mesh over DNS (seeds 000 and 004,
// ARCHITECTURE.md section 6), on UDP and TCP, with github.com/miekg/dns.
//
// It answers from an immutable Table swapped atomically: queries never wait
// for a rebuild and never touch the store. The table holds one view per
// mesh; a query is answered from the view of the mesh of the Dataplane
// whose address it comes from, or of the default mesh.
//
// For the names it knows it answers A, AAAA and SRV with authority; for
// unknown names under the configured domains it answers NXDOMAIN, and for
// known names without the asked type NODATA, both with an SOA. Other names
// are forwarded to the configured upstreams or refused.
//
// It imports api, resource, cache and reconcile only (api for the bodies
// Inspector returns, reconcile for its queue); it must not import the
// store.
package dnsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configures a Server.
type Options struct {
	Addr string
	// DefaultMesh answers sources that are not a Dataplane; empty refuses.
	DefaultMesh     string
	Upstreams       []string
	UpstreamTimeout time.Duration
	Log             *slog.Logger
	Registerer      prometheus.Registerer
}

// Server is the DNS server.
type Server struct {
	o      Options
	table  atomic.Pointer[Table]
	client *dns.Client
	// tcpClient asks again over TCP when an upstream truncates its UDP
	// answer to a query that came over TCP.
	tcpClient *dns.Client

	queries  *prometheus.CounterVec
	counters sync.Map // counterKey -> prometheus.Counter
	duration prometheus.Histogram
	names    prometheus.Gauge

	mu        sync.Mutex
	listening chan struct{}
	addrs     []string
}

// udpSize is the largest UDP answer we send when a client asks for more.
const udpSize = 1232

// New returns a server answering from an empty table until SetTable.
func New(o Options) *Server {
	s := &Server{
		o:         o,
		client:    &dns.Client{Timeout: o.UpstreamTimeout},
		tcpClient: &dns.Client{Net: "tcp", Timeout: o.UpstreamTimeout},
		listening: make(chan struct{}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_dns_queries_total", Help: "DNS queries by question type and response code.",
		}, []string{"type", "rcode"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "meshnames_dns_query_duration_seconds", Help: "Time to answer a DNS query (forwarded ones included).",
			Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10),
		}),
		names: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meshnames_dns_names", Help: "Names the DNS table answers, over all meshes.",
		}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(s.queries, s.duration, s.names)
	}
	return s
}

// queryCounter returns the counter of a question type and rcode, resolving
// the labels once per pair rather than per query.
func (s *Server) queryCounter(qtype string, rcode int) prometheus.Counter {
	k := counterKey{qtype, rcode}
	if c, ok := s.counters.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c := s.queries.WithLabelValues(qtype, dns.RcodeToString[rcode])
	s.counters.Store(k, c)
	return c
}

type counterKey struct {
	qtype string
	rcode int
}

// SetTable replaces the table queries are answered from.
func (s *Server) SetTable(t *Table) {
	n := 0
	for _, v := range t.Views {
		n += v.Len()
	}
	s.names.Set(float64(n))
	s.table.Store(t)
}

// Table returns the table in use. It is nil until the first SetTable;
// until then every query is answered SERVFAIL.
func (s *Server) Table() *Table { return s.table.Load() }

// Run serves UDP and TCP on Options.Addr until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	pcs, ln, err := listen(s.o.Addr, udpSockets())
	if err != nil {
		return err
	}
	tcp := &dns.Server{Listener: ln, Handler: s, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, IdleTimeout: func() time.Duration { return 10 * time.Second }}
	addr := pcs[0].LocalAddr().String()
	s.mu.Lock()
	s.addrs = []string{addr}
	close(s.listening)
	s.mu.Unlock()
	s.o.Log.Info("serving DNS", "addr", addr, "udp_sockets", len(pcs))
	errs := make(chan error, len(pcs)+1)
	for _, pc := range pcs {
		go func() { errs <- s.serveUDP(pc.(*net.UDPConn)) }()
	}
	go func() { errs <- tcp.ActivateAndServe() }()
	closeAll := func() {
		for _, pc := range pcs {
			pc.Close()
		}
	}
	select {
	case <-ctx.Done():
		closeAll()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = tcp.ShutdownContext(sctx)
		return nil
	case err := <-errs:
		closeAll()
		_ = tcp.Shutdown()
		if err == nil {
			err = errors.New("a listener stopped")
		}
		return fmt.Errorf("dns server: %w", err)
	}
}

// Addr waits until the server listens and returns its address (tests).
func (s *Server) Addr(ctx context.Context) (string, error) {
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-s.listening:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.addrs[0], nil
	}
}

// listen opens TCP and n UDP sockets on addr (several share the port with
// SO_REUSEPORT). With port 0 the system picks the UDP port, which another
// process may hold for TCP: then it tries another.
//
// The first UDP socket is bound without SO_REUSEPORT and closed again
// before the shared ones are bound: a port that another process holds
// (another meshnames included, which would set SO_REUSEPORT too and
// silently take half the queries) is then refused, as with one socket.
func listen(addr string, n int) ([]net.PacketConn, net.Listener, error) {
	_, port, _ := net.SplitHostPort(addr)
	for attempt := 1; ; attempt++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("dns.addr: cannot listen on %s (udp): %w", addr, err)
		}
		bound := pc.LocalAddr().String()
		ln, err := net.Listen("tcp", bound)
		if err != nil {
			pc.Close()
			if port != "0" || attempt == 10 {
				return nil, nil, fmt.Errorf("dns.addr: cannot listen on %s (tcp): %w", bound, err)
			}
			continue
		}
		if n <= 1 {
			return []net.PacketConn{pc}, ln, nil
		}
		pc.Close()
		pcs, err := listenShared(bound, n)
		if err != nil {
			ln.Close()
			return nil, nil, err
		}
		return pcs, ln, nil
	}
}

// listenShared binds n UDP sockets on addr with SO_REUSEPORT.
func listenShared(addr string, n int) ([]net.PacketConn, error) {
	lc := net.ListenConfig{Control: reusePort}
	pcs := make([]net.PacketConn, 0, n)
	for range n {
		pc, err := lc.ListenPacket(context.Background(), "udp", addr)
		if err != nil {
			for _, p := range pcs {
				p.Close()
			}
			return nil, fmt.Errorf("dns.addr: cannot listen on %s (udp): %w", addr, err)
		}
		pcs = append(pcs, pc)
	}
	return pcs, nil
}

// ServeDNS implements dns.Handler (TCP; UDP is served by serveUDP).
func (s *Server) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	start := time.Now()
	rp := replies.Get().(*answerMem)
	defer rp.release()
	m := s.answerInto(rp, w.RemoteAddr(), w.LocalAddr().Network(), r)
	// Packing into the reply's own buffer is what WriteMsg does, without
	// a new buffer per answer.
	out, err := rp.pack(m)
	if err == nil {
		_, err = w.Write(out)
	}
	if err != nil {
		s.o.Log.Debug("writing a DNS answer", "err", err)
	}
	s.record(questionType(r), m, start, w.RemoteAddr())
}

// questionType is the metrics label of r's question type.
func questionType(r *dns.Msg) string {
	if len(r.Question) == 0 {
		return "none"
	}
	if t := dns.TypeToString[r.Question[0].Qtype]; t != "" {
		return t
	}
	return "other"
}

// record counts an answered query and logs it at debug level.
func (s *Server) record(qtype string, m *dns.Msg, start time.Time, from net.Addr) {
	s.queryCounter(qtype, m.Rcode).Inc()
	s.duration.Observe(time.Since(start).Seconds())
	if s.o.Log.Enabled(context.Background(), slog.LevelDebug) {
		name := ""
		if len(m.Question) > 0 {
			name = m.Question[0].Name
		}
		s.o.Log.Debug("dns query", "from", from.String(), "name", name, "type", qtype,
			"rcode", dns.RcodeToString[m.Rcode], "answers", len(m.Answer), "dur", time.Since(start))
	}
}

// answerMem is the memory of one answer, reused from query to query: the
// message, its question, its OPT record, room for a few address records
// and the packing buffer. Nearly every answer then allocates nothing.
type answerMem struct {
	m     dns.Msg
	q     [1]dns.Question
	opt   dns.OPT
	rr    [maxPooledRR]dns.RR
	a     [maxPooledRR]dns.A
	aaaa  [maxPooledRR]dns.AAAA
	ip    [maxPooledRR][16]byte
	extra [1]dns.RR
	buf   []byte
	// noForward asks answerInto to set forward instead of asking an
	// upstream (the UDP loop forwards off the loop).
	noForward, forward bool
}

// maxPooledRR address records are built in a reply's own memory; more are
// allocated.
const maxPooledRR = 4

var replies = sync.Pool{New: func() any { return &answerMem{buf: make([]byte, 0, 512)} }}

// pack packs m into rp's buffer.
func (rp *answerMem) pack(m *dns.Msg) ([]byte, error) {
	out, err := m.PackBuffer(rp.buf[:cap(rp.buf)])
	if err == nil {
		rp.buf = out[:0]
	}
	return out, err
}

// release returns rp to the pool, dropping what it points to.
func (rp *answerMem) release() {
	buf := rp.buf
	if cap(buf) > 64<<10 {
		buf = nil // a large TCP answer: do not keep its buffer
	}
	*rp = answerMem{buf: buf}
	replies.Put(rp)
}

// setReply makes rp's message the reply to r, as dns.Msg.SetReply does
// but with the question in rp's memory.
func (rp *answerMem) setReply(r *dns.Msg) *dns.Msg {
	m := &rp.m
	m.Id = r.Id
	m.Response = true
	m.Opcode = r.Opcode
	if m.Opcode == dns.OpcodeQuery {
		m.RecursionDesired = r.RecursionDesired
		m.CheckingDisabled = r.CheckingDisabled
	}
	m.Rcode = dns.RcodeSuccess
	if len(r.Question) > 0 {
		rp.q[0] = r.Question[0]
		m.Question = rp.q[:1]
	}
	return m
}

// setEdns0 adds rp's OPT record with our UDP size, as dns.Msg.SetEdns0.
func (rp *answerMem) setEdns0() {
	rp.opt = dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	rp.opt.SetUDPSize(udpSize)
	rp.extra[0] = &rp.opt
	rp.m.Extra = rp.extra[:1]
}

// answer computes the reply to r from source over network ("udp" or
// "tcp") in memory of its own.
func (s *Server) answer(source net.Addr, network string, r *dns.Msg) *dns.Msg {
	return s.answerInto(new(answerMem), source, network, r)
}

// answerInto computes the reply to r in rp's memory.
func (s *Server) answerInto(rp *answerMem, source net.Addr, network string, r *dns.Msg) *dns.Msg {
	m := rp.setReply(r)
	m.RecursionAvailable = false
	if r.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeNotImplemented
		return m
	}
	if len(r.Question) != 1 || r.Response {
		m.Rcode = dns.RcodeFormatError
		return m
	}
	q := r.Question[0]
	bufsize := uint16(dns.MinMsgSize)
	if opt := r.IsEdns0(); opt != nil {
		if opt.Version() != 0 {
			m.Rcode = dns.RcodeBadVers
			rp.setEdns0()
			return m
		}
		bufsize = max(opt.UDPSize(), dns.MinMsgSize)
		rp.setEdns0()
	}
	defer func() {
		if network == "udp" {
			m.Truncate(int(min(bufsize, udpSize)))
		}
	}()
	if q.Qclass != dns.ClassINET {
		m.Rcode = dns.RcodeNotImplemented
		return m
	}

	t := s.table.Load()
	if t == nil {
		// Still loading: an NXDOMAIN now would be cached by resolvers for
		// names that exist (and a forwarded query would reach an upstream
		// that does not know them), so ask the client to come back.
		m.Rcode = dns.RcodeServerFailure
		return m
	}
	name := strings.ToLower(q.Name)
	zone := t.zoneOf(name)
	view, mesh := s.view(t, source)

	if view != nil {
		if target, ok := view.reverse(name); ok && (q.Qtype == dns.TypePTR || q.Qtype == dns.TypeANY) {
			m.Authoritative = true
			m.Answer = append(m.Answer, &dns.PTR{Hdr: hdr(q.Name, dns.TypePTR, t.TTL), Ptr: target})
			return m
		}
		if e, ok := view.Lookup(name); ok {
			m.Authoritative = true
			m.Answer = rp.records(&e, q, t.TTL)
			if len(m.Answer) == 0 {
				m.Ns = []dns.RR{soa(zoneOr(zone, name), t.TTL)} // NODATA
			}
			return m
		}
	}
	if zone != "" {
		if name == zone {
			m.Authoritative = true
			// The apex exists: SOA and NS are answered, the rest is NODATA.
			switch q.Qtype {
			case dns.TypeSOA:
				m.Answer = []dns.RR{soaNamed(q.Name, zone, t.TTL)}
			case dns.TypeNS:
				m.Answer = []dns.RR{&dns.NS{Hdr: hdr(q.Name, dns.TypeNS, t.TTL), Ns: "ns." + zone}}
			default:
				m.Ns = []dns.RR{soa(zone, t.TTL)}
			}
			return m
		}
		if view == nil && mesh == "" {
			m.Rcode = dns.RcodeRefused // a source with no mesh to answer from
			return m
		}
		m.Authoritative = true
		if view != nil {
			if view.IsParent(name) {
				m.Ns = []dns.RR{soa(zone, t.TTL)} // NODATA: an empty non-terminal
				return m
			}
		}
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{soa(zone, t.TTL)}
		return m
	}
	if rp.noForward && len(s.o.Upstreams) > 0 {
		rp.forward = true
		return m
	}
	// The forwarded answer obeys the same UDP limits as ours (the deferred
	// Truncate applies to m).
	m = s.forward(r, m, network)
	return m
}

// view picks the view of the source's mesh. mesh is "" when the source has
// no mesh (not a Dataplane and no default mesh).
func (s *Server) view(t *Table, source net.Addr) (*View, string) {
	mesh := s.o.DefaultMesh
	if a, ok := sourceAddr(source); ok {
		if m, ok := t.Sources.Get(a); ok {
			mesh = m
		}
	}
	if mesh == "" {
		return nil, ""
	}
	return t.Views[mesh], mesh
}

// sourceAddr is the IP address of a query's source, without parsing text
// for the usual address types.
func sourceAddr(a net.Addr) (netip.Addr, bool) {
	switch a := a.(type) {
	case *net.UDPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		return ip.Unmap(), ok
	case *net.TCPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		return ip.Unmap(), ok
	case *udpSource:
		return a.ap.Addr().Unmap(), a.ap.IsValid()
	}
	ap, err := netip.ParseAddrPort(a.String())
	return ap.Addr().Unmap(), err == nil
}

// zoneOf returns the authoritative zone name belongs to, or "".
func (t *Table) zoneOf(name string) string {
	best := ""
	for _, z := range t.Zones {
		if (name == z || strings.HasSuffix(name, "."+z)) && len(z) > len(best) {
			best = z
		}
	}
	return best
}

func zoneOr(zone, name string) string {
	if zone != "" {
		return zone
	}
	return name
}

func hdr(name string, rrtype uint16, ttl uint32) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: rrtype, Class: dns.ClassINET, Ttl: ttl}
}

// records answers q from e, echoing the question's case, in rp's memory
// when the answer is small.
func (rp *answerMem) records(e *Entry, q dns.Question, ttl uint32) []dns.RR {
	out := rp.rr[:0]
	switch q.Qtype {
	case dns.TypeA:
		for i, ip := range e.A {
			rr := pooled(rp.a[:], i)
			rr.Hdr, rr.A = hdr(q.Name, dns.TypeA, ttl), ipBytes(&rp.ip[i%maxPooledRR], ip, i)
			out = append(out, rr)
		}
	case dns.TypeAAAA:
		for i, ip := range e.AAAA {
			rr := pooled(rp.aaaa[:], i)
			rr.Hdr, rr.AAAA = hdr(q.Name, dns.TypeAAAA, ttl), ipBytes(&rp.ip[i%maxPooledRR], ip, i)
			out = append(out, rr)
		}
	case dns.TypeSRV:
		for _, s := range e.SRV {
			out = append(out, &dns.SRV{Hdr: hdr(q.Name, dns.TypeSRV, ttl), Priority: 0, Weight: 0, Port: s.Port, Target: s.Target})
		}
	case dns.TypeANY:
		// RFC 8482: a minimal answer to ANY.
		out = append(out, &dns.HINFO{Hdr: hdr(q.Name, dns.TypeHINFO, ttl), Cpu: "RFC8482"})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// pooled returns the i-th record of pool, or a new one past its end.
func pooled[T any](pool []T, i int) *T {
	if i < len(pool) {
		return &pool[i]
	}
	return new(T)
}

// ipBytes is ip in the form miekg/dns packs (4 bytes for IPv4), in buf
// for the first maxPooledRR addresses of an answer.
func ipBytes(buf *[16]byte, ip netip.Addr, i int) net.IP {
	if i >= maxPooledRR {
		return ip.AsSlice()
	}
	*buf = ip.As16()
	if ip.Is4() {
		return net.IP(buf[12:16])
	}
	return net.IP(buf[:])
}

// soa is the SOA of zone, for authority sections.
func soa(zone string, ttl uint32) dns.RR { return soaNamed(zone, zone, ttl) }

func soaNamed(owner, zone string, ttl uint32) dns.RR {
	return &dns.SOA{Hdr: hdr(owner, dns.TypeSOA, ttl), Ns: "ns." + zone, Mbox: "hostmaster." + zone,
		Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: ttl}
}

// forward sends r to the upstreams, or refuses when there are none. A
// query that came over TCP gets the whole answer: a truncated UDP answer is
// asked again over TCP.
func (s *Server) forward(r, m *dns.Msg, network string) *dns.Msg {
	if len(s.o.Upstreams) == 0 {
		m.Rcode = dns.RcodeRefused
		return m
	}
	var last error
	for _, u := range s.o.Upstreams {
		resp, _, err := s.client.Exchange(r, u)
		if err == nil && resp != nil && resp.Truncated && network == "tcp" {
			resp, _, err = s.tcpClient.Exchange(r, u)
		}
		if err == nil && resp != nil {
			resp.Id = r.Id
			return resp
		}
		last = err
	}
	s.o.Log.Debug("forwarding failed", "name", r.Question[0].Name, "err", last)
	m.Rcode = dns.RcodeServerFailure
	return m
}
