package dnsserver

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// UDP is served by one goroutine per socket that reads, answers and
// writes each query in turn, instead of miekg/dns's server, which starts a
// goroutine and allocates a response writer and a source address per
// packet. Answers are computed in pooled memory (answerMem) and addresses
// are read as netip.AddrPort, so a query allocates only what unpacking it
// does. Queries that go to an upstream leave the loop: each is answered in
// a goroutine of its own, so that an upstream's timeout never holds up the
// socket. Packets are accepted, rejected or ignored as miekg/dns's
// DefaultMsgAcceptFunc says, as TCP queries are.

// udpSource is the source of a UDP query as a net.Addr, reused by a loop.
type udpSource struct{ ap netip.AddrPort }

func (a *udpSource) Network() string { return "udp" }
func (a *udpSource) String() string  { return a.ap.String() }

// serveUDP answers the queries arriving on pc until it is closed.
func (s *Server) serveUDP(pc *net.UDPConn) error {
	buf := make([]byte, dns.MaxMsgSize)
	src := &udpSource{}
	req := new(dns.Msg)
	for {
		n, ap, err := pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		src.ap = ap
		s.serveUDPPacket(pc, src, buf[:n], req)
	}
}

// serveUDPPacket answers one datagram.
func (s *Server) serveUDPPacket(pc *net.UDPConn, src *udpSource, pkt []byte, req *dns.Msg) {
	start := time.Now()
	rp := replies.Get().(*answerMem)
	defer rp.release()
	m, qtype := s.answerPacket(rp, src, pkt, req)
	switch {
	case m == nil:
		return // ignored
	case rp.forward:
		// Leave the loop: the goroutine owns a copy of the packet.
		go s.forwardUDP(pc, src.ap, append([]byte(nil), pkt...), start)
		return
	}
	out, err := rp.pack(m)
	if err == nil {
		_, err = pc.WriteToUDPAddrPort(out, src.ap)
	}
	if err != nil {
		s.o.Log.Debug("writing a DNS answer", "err", err)
	}
	s.record(qtype, m, start, src)
}

// answerPacket computes the answer to a datagram in rp's memory, unpacking
// it into req: nil for a datagram to ignore (shorter than a header, or a
// response), a bare FORMERR or NOTIMP for one miekg/dns's accept function
// rejects or that does not unpack, and with rp.forward set for a query to
// forward. qtype is the metrics label of its question.
func (s *Server) answerPacket(rp *answerMem, src *udpSource, pkt []byte, req *dns.Msg) (m *dns.Msg, qtype string) {
	if len(pkt) < 12 {
		return nil, ""
	}
	dh := dns.Header{
		Id: binary.BigEndian.Uint16(pkt), Bits: binary.BigEndian.Uint16(pkt[2:]),
		Qdcount: binary.BigEndian.Uint16(pkt[4:]), Ancount: binary.BigEndian.Uint16(pkt[6:]),
		Nscount: binary.BigEndian.Uint16(pkt[8:]), Arcount: binary.BigEndian.Uint16(pkt[10:]),
	}
	switch dns.DefaultMsgAcceptFunc(dh) {
	case dns.MsgIgnore:
		return nil, ""
	case dns.MsgReject:
		return rp.reject(dh, dns.RcodeFormatError), "none"
	case dns.MsgRejectNotImplemented:
		return rp.reject(dh, dns.RcodeNotImplemented), "none"
	}
	if err := req.Unpack(pkt); err != nil {
		return rp.reject(dh, dns.RcodeFormatError), "none"
	}
	rp.noForward = true
	return s.answerInto(rp, src, "udp", req), questionType(req)
}

// forwardUDP answers a query that goes to an upstream, off the loop.
func (s *Server) forwardUDP(pc *net.UDPConn, ap netip.AddrPort, pkt []byte, start time.Time) {
	req := new(dns.Msg)
	if err := req.Unpack(pkt); err != nil {
		return // it unpacked a moment ago
	}
	rp := replies.Get().(*answerMem)
	defer rp.release()
	src := &udpSource{ap: ap}
	m := s.answerInto(rp, src, "udp", req)
	out, err := rp.pack(m)
	if err == nil {
		_, err = pc.WriteToUDPAddrPort(out, ap)
	}
	if err != nil {
		s.o.Log.Debug("writing a DNS answer", "err", err)
	}
	s.record(questionType(req), m, start, src)
}

// reject is the answer miekg/dns gives a packet its accept function
// rejects: the header echoed with rcode, and no records.
func (rp *answerMem) reject(dh dns.Header, rcode int) *dns.Msg {
	m := &rp.m
	m.Id = dh.Id
	m.Response = true
	m.Opcode = int(dh.Bits>>11) & 0xF
	m.RecursionDesired = dh.Bits&(1<<8) != 0
	m.CheckingDisabled = dh.Bits&(1<<4) != 0
	if rcode == dns.RcodeFormatError {
		m.Opcode = dns.OpcodeQuery
	}
	m.Rcode = rcode
	return m
}
