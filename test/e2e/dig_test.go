package e2e

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// digMain stands in for dig(1) in the README walkthrough when dig is not
// installed: TestMain runs it when the test binary is invoked as "dig". It
// takes the forms the README uses - dig @SERVER [-p PORT] [+short] NAME
// [TYPE] - and prints what dig prints for them: with +short the answers'
// data, one per line; without, the header line (->>HEADER<<-, which the
// README greps for the status), the flags and the sections.
func digMain(args []string, out io.Writer) int {
	server, port, name, short := "", "53", "", false
	qtype, typed := dns.TypeA, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, "@"):
			server = a[1:]
		case a == "-p" && i+1 < len(args):
			i++
			port = args[i]
		case a == "+short":
			short = true
		case strings.HasPrefix(a, "+"):
			// display options (+noall, +comments...): this shim prints
			// what the README's forms need
		case dns.StringToType[strings.ToUpper(a)] != 0 && !typed:
			// dig takes a type name anywhere among the arguments
			qtype, typed = dns.StringToType[strings.ToUpper(a)], true
		default:
			name = a
		}
	}
	if server == "" || name == "" {
		fmt.Fprintln(out, "dig (test shim): usage: dig @SERVER [-p PORT] [+short] NAME [TYPE]")
		return 1
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, server+":"+port)
	if err != nil {
		fmt.Fprintf(out, ";; communications error to %s#%s: %v\n", server, port, err)
		return 9
	}
	if short {
		for _, rr := range r.Answer {
			// dig +short prints the record's data: what follows the
			// header (name, TTL, class, type) in its text form.
			fields := strings.SplitN(rr.String(), "\t", 5)
			if len(fields) == 5 {
				fmt.Fprintln(out, fields[4])
			}
		}
		return 0
	}
	fmt.Fprintf(out, ";; ->>HEADER<<- opcode: %s, status: %s, id: %d\n", dns.OpcodeToString[r.Opcode], dns.RcodeToString[r.Rcode], r.Id)
	var flags []string
	for _, f := range []struct {
		on   bool
		name string
	}{{r.Response, "qr"}, {r.Authoritative, "aa"}, {r.Truncated, "tc"}, {r.RecursionDesired, "rd"}, {r.RecursionAvailable, "ra"}} {
		if f.on {
			flags = append(flags, f.name)
		}
	}
	fmt.Fprintf(out, ";; flags: %s; QUERY: %d, ANSWER: %d, AUTHORITY: %d, ADDITIONAL: %d\n",
		strings.Join(flags, " "), len(r.Question), len(r.Answer), len(r.Ns), len(r.Extra))
	for _, s := range []struct {
		title string
		rrs   []dns.RR
	}{{"ANSWER", r.Answer}, {"AUTHORITY", r.Ns}} {
		if len(s.rrs) == 0 {
			continue
		}
		fmt.Fprintf(out, "\n;; %s SECTION:\n", s.title)
		for _, rr := range s.rrs {
			fmt.Fprintln(out, rr.String())
		}
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, ";; SERVER: %s#%s(%s) (UDP)\n", server, port, server)
	fmt.Fprintf(out, ";; MSG SIZE  rcvd: %s\n", strconv.Itoa(r.Len()))
	return 0
}
