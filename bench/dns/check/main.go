//go:build dnsbench

// Command check asks a DNS server for names and checks the answers, for
// bench/dns/run.sh: it waits until the first name of the -names file
// ("name ip" lines) resolves to its address, then (with -all) asks for
// every name over UDP, 8 at a time, and for -unknown names of the same
// shape that do not exist. A known name must be answered with exactly its
// A record; an unknown one with NXDOMAIN (with -any-negative, any error
// rcode). It prints one line: the counts, the rcodes of the unknown names
// and how many NXDOMAIN answers carry an SOA (correct negative answers,
// RFC 2308). It exits 1 on any wrong answer.
//
// It is built only with -tags dnsbench (see run.sh).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

type entry struct {
	name string
	ip   netip.Addr
}

func main() {
	server := flag.String("s", "127.0.0.1:5653", "server address")
	file := flag.String("names", "", `file of "name ip" lines`)
	wait := flag.Duration("wait", 60*time.Second, "how long to wait for the first name to resolve")
	all := flag.Bool("all", false, "ask for every name, then for -unknown unknown ones")
	unknown := flag.Int("unknown", 1000, "unknown names to ask for with -all")
	anyNeg := flag.Bool("any-negative", false, "accept any error rcode for unknown names, not only NXDOMAIN (CoreDNS hosts answers SERVFAIL)")
	flag.Parse()
	entries, err := load(*file)
	if err != nil {
		log.Fatal(err)
	}
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	deadline := time.Now().Add(*wait)
	for {
		_, err := ask(c, *server, entries[0].name, entries[0].ip, nil)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			log.Fatalf("%s does not answer %s after %s: %v", *server, entries[0].name, *wait, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !*all {
		fmt.Printf("%s answers %s\n", *server, entries[0].name)
		return
	}
	n := len(entries)
	for i := range *unknown {
		j := n + i
		entries = append(entries, entry{name: fmt.Sprintf("svc-%d.ns-%d.svc.mesh.local", j, j%100)})
	}
	var (
		next, bad, withSOA atomic.Int64
		wg                 sync.WaitGroup
		mu                 sync.Mutex
		firstErr           error
		negative           = map[string]int{}
	)
	for range 8 {
		wg.Go(func() {
			c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
			for {
				i := int(next.Add(1) - 1)
				if i >= len(entries) {
					return
				}
				e := entries[i]
				var soa bool
				rcode, err := retry(c, *server, e, &soa)
				if !e.ip.IsValid() && rcode >= 0 {
					mu.Lock()
					negative[dns.RcodeToString[rcode]]++
					mu.Unlock()
					if *anyNeg && rcode != dns.RcodeSuccess {
						err = nil
					}
				}
				if err != nil {
					bad.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
				if soa {
					withSOA.Add(1)
				}
			}
		})
	}
	wg.Wait()
	var neg []string
	for _, rc := range slices.Sorted(maps.Keys(negative)) {
		neg = append(neg, fmt.Sprintf("%s %d", rc, negative[rc]))
	}
	fmt.Printf("%s: %d names, %d unknown names answered %s (%d NXDOMAIN with an SOA), %d wrong\n",
		*server, n, *unknown, strings.Join(neg, ", "), withSOA.Load(), bad.Load())
	if bad.Load() > 0 {
		log.Fatalf("first wrong answer: %v", firstErr)
	}
}

// retry asks again after a timeout (a UDP loss is not a wrong answer).
func retry(c *dns.Client, server string, e entry, soa *bool) (int, error) {
	var (
		rcode int
		err   error
	)
	for range 3 {
		rcode, err = ask(c, server, e.name, e.ip, soa)
		if err == nil || !strings.Contains(err.Error(), "timeout") {
			return rcode, err
		}
	}
	return rcode, err
}

// ask checks the A answer for name: ip, or NXDOMAIN when ip is invalid. It
// returns the answer's rcode, -1 when there was none.
func ask(c *dns.Client, server, name string, ip netip.Addr, soa *bool) (int, error) {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	q.RecursionDesired = false
	r, _, err := c.Exchange(q, server)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", name, err)
	}
	return r.Rcode, checkAnswer(r, name, ip, soa)
}

func checkAnswer(r *dns.Msg, name string, ip netip.Addr, soa *bool) error {
	if !ip.IsValid() {
		if r.Rcode != dns.RcodeNameError {
			return fmt.Errorf("%s: want NXDOMAIN, got %s", name, dns.RcodeToString[r.Rcode])
		}
		if soa != nil {
			for _, rr := range r.Ns {
				if _, ok := rr.(*dns.SOA); ok {
					*soa = true
				}
			}
		}
		return nil
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return fmt.Errorf("%s: want one A record, got %s with %d answers", name, dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	a, ok := r.Answer[0].(*dns.A)
	if !ok {
		return fmt.Errorf("%s: want an A record, got %s", name, r.Answer[0])
	}
	if got, _ := netip.AddrFromSlice(a.A); got.Unmap() != ip {
		return fmt.Errorf("%s: want %s, got %s", name, ip, a.A)
	}
	return nil
}

func load(path string) ([]entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, addr, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		ip, err := netip.ParseAddr(addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, entry{name: name, ip: ip})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no names", path)
	}
	return out, nil
}
