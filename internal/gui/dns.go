package gui

import (
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
)

// This file serves the DNS page (what a mesh's DNS answers, names not
// answered, and why) and the search of a name or an address ("who is
// this?"), which reads the same matches of the DNS table.

// dnsPageSize is how many answered names a page of the DNS listing shows.
const dnsPageSize = 100

type dnsData struct {
	Mesh   string
	Q      string
	Meshes []option
	Err    string
	// Names is the page of answered names; Total counts those the search
	// selects.
	Names       []api.DNSName
	Total       int
	From, To    int
	Prev, Next  string
	NotAnswered []api.DNSNotAnswer
	Available   bool
}

func (s *Server) dns(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	d := dnsData{Mesh: v.Get("mesh"), Q: strings.ToLower(strings.TrimSpace(v.Get("q"))), Available: s.o.DNS != nil}
	rev := s.o.Cache.Revision()
	if d.Mesh == "" {
		if ms := s.o.Cache.Keys(cache.Query{Kind: resource.Mesh}); len(ms) > 0 {
			d.Mesh = ms[0].Name
			for _, m := range ms {
				if m.Name == "default" {
					d.Mesh = m.Name
				}
			}
		}
	}
	pageNo, ok := s.pageParam(w, r)
	if !ok {
		return
	}
	if _, ok := s.o.Cache.Get(resource.Key{Kind: resource.Mesh, Name: d.Mesh}); d.Mesh != "" && !ok {
		s.render(w, r, http.StatusNotFound, "error.html", &page{Title: "Not found", Nav: "dns", Revision: rev, Live: true,
			Data: errorData{Message: "mesh: there is no mesh " + strconv.Quote(d.Mesh) + "."}})
		return
	}
	d.Meshes = s.meshOptions(d.Mesh, "")
	if s.o.DNS != nil && d.Mesh != "" {
		l, err := s.o.DNS(d.Mesh)
		if err != nil {
			d.Err = err.Error()
		}
		from := (pageNo - 1) * dnsPageSize
		if s.o.DNSNames != nil {
			d.Names, d.Total = s.o.DNSNames(d.Mesh, d.Q, from, dnsPageSize)
		}
		if len(d.Names) > 0 {
			d.From, d.To = from+1, from+len(d.Names)
		}
		params := map[string]string{"mesh": d.Mesh, "q": d.Q}
		if pageNo > 1 {
			d.Prev = pageLink("dns", params, pageNo-1)
		}
		if from+dnsPageSize < d.Total {
			d.Next = pageLink("dns", params, pageNo+1)
		}
		for _, n := range l.NotAnswered {
			if d.Q == "" || strings.Contains(n.Name, d.Q) || strings.Contains(n.Service, d.Q) {
				d.NotAnswered = append(d.NotAnswered, n)
			}
		}
	}
	s.render(w, r, http.StatusOK, "dns.html", &page{Title: "DNS", Nav: "dns", Revision: rev, Live: true, Data: d})
}

// ---- who is this? ----

type searchData struct {
	Q string
	// IP is set when Q is an address.
	IP     bool
	VIP    *VIPState
	VIPErr string
	// ByVIP are the services that have the address in status.vips.
	ByVIP   []resource.Key
	Claims  []claimRow
	Records []DNSMatch
	Suggest []resource.Key
	// History is who held the address or hostname over time.
	History *historyData
	// More is set when there were more suggestions than shown.
	More     bool
	Searched bool
}

// suggestLimit bounds the suggestions of a search that found nothing.
const suggestLimit = 20

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	d := searchData{Q: q}
	rev := s.o.Cache.Revision()
	if q != "" {
		d.Searched = true
		if ip, err := netip.ParseAddr(q); err == nil {
			ip = ip.Unmap()
			d.IP, d.Q = true, ip.String()
			d.ByVIP = s.byVIP(ip)
			d.History = s.history(r.Context(), []string{d.Q}, nil)
			if s.o.VIP != nil {
				st, err := s.o.VIP(r.Context(), ip)
				if err != nil {
					d.VIPErr = err.Error()
				} else {
					d.VIP = &st
				}
			}
		} else {
			name := strings.TrimSuffix(strings.ToLower(q), ".")
			d.Q = name
			if s.o.Lookup != nil {
				d.Records = s.o.Lookup(name + ".")
			}
			d.Claims = s.withHolders(s.claims(name, d.Records))
			d.History = s.history(r.Context(), nil, []string{name})
		}
		if len(d.ByVIP) == 0 && len(d.Claims) == 0 && len(d.Records) == 0 && (d.History == nil || len(d.History.Holders) == 0) {
			d.Suggest, d.More = s.suggest(strings.ToLower(strings.TrimSuffix(q, ".")))
		}
	}
	s.render(w, r, http.StatusOK, "search.html", &page{Title: "Who is this?", Nav: "search", Revision: rev, Live: true, Data: d})
}

// byVIP returns the services that have ip in status.vips: the one the DNS
// server's reverse name points to in each mesh, and those the index keeps.
func (s *Server) byVIP(ip netip.Addr) []resource.Key {
	keys := s.ix.byVIP(ip)
	if s.o.LookupAddr != nil {
		for _, m := range s.o.LookupAddr(ip) {
			keys = append(keys, resource.Key{Kind: m.Name.Kind, Mesh: m.Mesh, Name: m.Name.Service})
		}
	}
	slices.SortFunc(keys, compareKeys)
	return slices.Compact(keys)
}

// claims returns every service's address for the hostname: those the DNS
// server answers (records, read back from the service's status), and those
// the index keeps; the holders first.
func (s *Server) claims(name string, records []DNSMatch) []claim {
	out := s.ix.offTable(name)
	for _, m := range records {
		if m.Name.Source != sourceHostname && m.Name.Source != sourceInternalVIP {
			continue
		}
		k := resource.Key{Kind: m.Name.Kind, Mesh: m.Mesh, Name: m.Name.Service}
		if slices.ContainsFunc(out, func(c claim) bool { return c.Key == k }) {
			continue
		}
		o, ok := s.o.Cache.Get(k)
		if !ok {
			continue
		}
		if st, ok := o.Status.(resource.ServiceStatusOf); ok && st != nil {
			for _, a := range st.Service().Addresses {
				if a.Hostname == name {
					c := claim{Key: k, Hostname: name, Available: a.Status == resource.AddressAvailable, Reason: a.Reason}
					if a.Origin.Kind == resource.OriginHostnameGenerator {
						c.Generator = a.Origin.Name
					}
					out = append(out, c)
				}
			}
		}
	}
	slices.SortFunc(out, compareClaims)
	return out
}

// suggest returns the first services whose name, DNS names, hostnames or
// VIPs contain w, and whether there are more.
func (s *Server) suggest(w string) ([]resource.Key, bool) {
	found := map[resource.Key]bool{}
	for _, kind := range serviceKinds {
		for _, k := range s.o.Cache.Keys(cache.Query{Kind: kind}) {
			if strings.Contains(k.Name, w) {
				found[k] = true
			}
		}
	}
	if s.o.MatchDNS != nil {
		s.o.MatchDNS(w, func(k resource.Key) { found[k] = true })
	}
	for _, k := range s.ix.matching(w) {
		found[k] = true
	}
	keys := slices.SortedFunc(maps.Keys(found), compareKeys)
	return keys[:min(len(keys), suggestLimit)], len(keys) > suggestLimit
}
