//go:build dnsbench

// Command seed writes the inputs of bench/dns/run.sh for N names
// svc-<i>.ns-<i%100>.svc.mesh.local, i in [0, N), each on VIP 241.0.0.0+1+i:
//
//   - with -data, an embedded store holding mesh default, a HostnameGenerator
//     "bench" ({{ .Name }}.{{ label "ns" }}.svc.mesh.local, selecting the
//     MeshServices labelled bench: dns) and N MeshServices svc-<i> labelled
//     ns: ns-<i%100>, whose status already holds that hostname (Available,
//     from generator bench) and the VIP (type Kuma). The hostnames and VIP
//     controllers compute the same status, so a server started on it writes
//     nothing and answers DNS as soon as its table is built;
//   - with -names, "name ip" per line (the bare map server's input);
//   - with -zone, a zone file of mesh.local (SOA, NS and N A records);
//   - with -hosts, a hosts file (CoreDNS hosts plugin);
//   - with -queries, a dnsperf input of -q lines "name A": known names drawn
//     at random, and with probability -unknown a name of the same shape that
//     does not exist (i >= N). The draw is seeded, so it is the same each run.
//
// It is built only with -tags dnsbench (see run.sh): it is a benchmark tool,
// not part of the module's packages.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net/netip"
	"os"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/pebble"
)

// Generator is the name of the HostnameGenerator the seeded services use.
const generator = "bench"

func hostname(i int) string { return fmt.Sprintf("svc-%d.ns-%d.svc.mesh.local", i, i%100) }

// vip is the address of service i: 241.0.0.1 onwards, inside the default
// MeshService pool 241.0.0.0/8.
func vip(i int) netip.Addr {
	a := [4]byte{241, byte((i + 1) >> 16), byte((i + 1) >> 8), byte(i + 1)}
	return netip.AddrFrom4(a)
}

func main() {
	n := flag.Int("n", 1000, "number of names")
	data := flag.String("data", "", "embedded store directory to seed (must not exist yet)")
	names := flag.String("names", "", `file of "name ip" lines to write`)
	zone := flag.String("zone", "", "zone file of mesh.local to write")
	hosts := flag.String("hosts", "", "hosts file to write")
	queries := flag.String("queries", "", "dnsperf query file to write")
	nq := flag.Int("q", 200000, "lines of the query file")
	unknown := flag.Float64("unknown", 0.1, "share of unknown names in the query file")
	flag.Parse()
	if *n <= 0 || *n >= 1<<24-2 {
		log.Fatalf("-n must be between 1 and %d", 1<<24-3)
	}
	if *data != "" {
		if err := seedStore(*data, *n); err != nil {
			log.Fatal(err)
		}
	}
	if *names != "" {
		writeFile(*names, func(w *bufio.Writer) {
			for i := range *n {
				fmt.Fprintf(w, "%s %s\n", hostname(i), vip(i))
			}
		})
	}
	if *zone != "" {
		writeFile(*zone, func(w *bufio.Writer) {
			fmt.Fprintln(w, "$ORIGIN mesh.local.")
			fmt.Fprintln(w, "$TTL 10")
			fmt.Fprintln(w, "@ IN SOA ns.mesh.local. hostmaster.mesh.local. 1 3600 600 86400 10")
			fmt.Fprintln(w, "@ IN NS ns.mesh.local.")
			fmt.Fprintln(w, "ns IN A 127.0.0.1")
			for i := range *n {
				fmt.Fprintf(w, "%s. IN A %s\n", hostname(i), vip(i))
			}
		})
	}
	if *hosts != "" {
		writeFile(*hosts, func(w *bufio.Writer) {
			for i := range *n {
				fmt.Fprintf(w, "%s %s\n", vip(i), hostname(i))
			}
		})
	}
	if *queries != "" {
		r := rand.New(rand.NewPCG(1, uint64(*n)))
		writeFile(*queries, func(w *bufio.Writer) {
			for range *nq {
				if r.Float64() < *unknown {
					fmt.Fprintf(w, "%s A\n", hostname(*n+r.IntN(*n)))
				} else {
					fmt.Fprintf(w, "%s A\n", hostname(r.IntN(*n)))
				}
			}
		})
	}
}

func writeFile(path string, fill func(*bufio.Writer)) {
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fill(w)
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}

// seedBatch is how many store operations one transaction holds.
const seedBatch = 1000

// seedStore creates mesh default, generator bench and n MeshServices with
// their status, as the API and the controllers would have stored them.
func seedStore(dir string, n int) error {
	ctx := context.Background()
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists; seed a fresh directory", dir)
	}
	st, err := pebble.Open(dir) // the default engine of meshnames serve
	if err != nil {
		return err
	}
	mesh := &resource.Object{Kind: resource.Mesh, Name: "default", Spec: &resource.MeshSpec{}}
	gen := &resource.Object{Kind: resource.HostnameGenerator, Name: generator, Spec: &resource.HostnameGeneratorSpec{
		Selector: resource.HostnameSelector{MeshService: &resource.LabelSelector{MatchLabels: map[string]string{"bench": "dns"}}},
		Template: `{{ .Name }}.{{ label "ns" }}.svc.mesh.local`,
	}}
	ops := make([]store.Op, 0, seedBatch)
	for _, obj := range []*resource.Object{mesh, gen} {
		if err := admit(obj); err != nil {
			return err
		}
		ops = append(ops, store.Op{Type: store.OpCreate, Object: obj})
	}
	flush := func() error {
		results, err := st.Apply(ctx, ops...)
		if err != nil {
			return err
		}
		for _, r := range results {
			if r.Err != nil {
				return r.Err
			}
		}
		ops = ops[:0]
		return nil
	}
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		obj := &resource.Object{
			Kind: resource.MeshService, Mesh: "default", Name: name,
			Labels: map[string]string{"bench": "dns", "ns": fmt.Sprintf("ns-%d", i%100)},
			Spec: &resource.MeshServiceSpec{
				Selector: resource.MeshServiceSelector{DataplaneTags: map[string]string{"kuma.io/service": name}},
				Ports:    []resource.Port{{Name: "http", Port: 80, TargetPort: &resource.IntOrString{Int: 8080}, AppProtocol: "http"}},
			},
			Status: &resource.ServiceStatus{
				Addresses: []resource.Address{{
					Hostname: hostname(i), Status: resource.AddressAvailable,
					Origin: resource.AddressOrigin{Kind: "HostnameGenerator", Name: generator},
				}},
				VIPs: []resource.VIP{{IP: vip(i).String(), Type: resource.VIPKuma}},
			},
		}
		if err := admit(obj); err != nil {
			return err
		}
		ops = append(ops, store.Op{Type: store.OpCreate, Object: obj})
		if len(ops) == seedBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if len(ops) > 0 {
		if err := flush(); err != nil {
			return err
		}
	}
	return st.Close()
}

// admit defaults obj, sets the system labels the API would set (standalone
// zone default) and fails if it is not what the API would store.
func admit(obj *resource.Object) error {
	errs := admission.New(admission.Options{Mode: resource.ModeStandalone, Zone: "default"}).Admit(obj, admission.Writer{Source: admission.System})
	if len(errs) > 0 {
		return fmt.Errorf("seeded %s %s is not what the API would store: %v", obj.Kind, obj.Name, errs)
	}
	return nil
}
