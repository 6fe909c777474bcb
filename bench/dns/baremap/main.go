//go:build dnsbench

// Command baremap is the ceiling of github.com/miekg/dns for bench/dns/run.sh:
// a UDP server that loads "name ip" lines into a map and answers A queries
// from it, NXDOMAIN with the zone's SOA otherwise. It does what any server
// built on the library must do per query (unpack, one map lookup, pack)
// and nothing else: no metrics, no views, no EDNS or truncation handling.
//
// It is built only with -tags dnsbench (see run.sh).
package main

import (
	"bufio"
	"flag"
	"log"
	"net"
	"os"
	"strings"

	"github.com/miekg/dns"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5354", "UDP address to serve")
	file := flag.String("names", "", `file of "name ip" lines`)
	flag.Parse()
	names, err := load(*file)
	if err != nil {
		log.Fatal(err)
	}
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: "mesh.local.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 10},
		Ns: "ns.mesh.local.", Mbox: "hostmaster.mesh.local.", Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: 10}
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		if len(r.Question) == 1 {
			q := r.Question[0]
			if ip, ok := names[strings.ToLower(q.Name)]; ok {
				if q.Qtype == dns.TypeA {
					m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 10}, A: ip}}
				} else {
					m.Ns = []dns.RR{soa}
				}
			} else {
				m.Rcode = dns.RcodeNameError
				m.Ns = []dns.RR{soa}
			}
		}
		_ = w.WriteMsg(m)
	})
	log.Printf("serving %d names on %s (udp)", len(names), *addr)
	log.Fatal((&dns.Server{Addr: *addr, Net: "udp", Handler: handler}).ListenAndServe())
}

func load(path string) (map[string]net.IP, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names := map[string]net.IP{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, addr, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		ip := net.ParseIP(addr).To4()
		if ip == nil {
			continue
		}
		names[dns.Fqdn(strings.ToLower(name))] = ip
	}
	return names, sc.Err()
}
