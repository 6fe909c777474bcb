// Package kubexds is what the xDS control plane reads of Kubernetes in env
// kubernetes: the endpoints of Services, from their EndpointSlices
// (Slices), and who a Pod's proxy is, from the Pod and a TokenReview of
// the token it presents (Pods).
//
// Slices follows every EndpointSlice labelled kubernetes.io/service-name
// on every instance, leader or not, as the xDS control plane runs on
// each, and keeps of each only what proxies need: its Service, its ports'
// names and numbers, and per endpoint the first address, the Pod it names
// and whether it takes traffic.
//
// It imports kubeapi and resource. Slices and Pods are safe for
// concurrent use; a Subscribe callback runs on the watch's goroutine and
// must not block.
package kubexds

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	"github.com/meshnames/meshnames/internal/kubeapi"
)

// LabelServiceName is the label of an EndpointSlice naming its Service.
const LabelServiceName = "kubernetes.io/service-name"

// Endpoint is one address and port behind a Service port.
type Endpoint struct {
	Addr netip.AddrPort
	// Draining: the endpoint is terminating but still serving (its
	// conditions serving and terminating true, ready false). A ready
	// endpoint is not draining; the others are not endpoints at all.
	Draining bool
}

// ServiceName names a Service.
type ServiceName struct{ Namespace, Name string }

func (n ServiceName) String() string { return n.Namespace + "/" + n.Name }

// Slices keeps the EndpointSlices of every Service.
type Slices struct {
	client *kubeapi.Client
	log    *slog.Logger

	mu     sync.RWMutex
	slices map[ServiceName]*slice            // by EndpointSlice
	bySvc  map[ServiceName]map[string]*slice // Service -> slice name -> slice
	subs   map[int]func(ServiceName)
	nextID int

	syncOnce sync.Once
	synced   chan struct{}
}

// slice is what is kept of an EndpointSlice.
type slice struct {
	service   string
	ports     []port
	endpoints []endpoint
}

type port struct {
	name   string
	number uint16
}

// endpoint is an endpoint that takes traffic (ready, or draining).
type endpoint struct {
	addr     netip.Addr
	pod      string // the Pod it names, in the slice's namespace
	draining bool
}

// NewSlices returns a follower of the EndpointSlices c serves; it does
// no I/O.
func NewSlices(c *kubeapi.Client, log *slog.Logger) *Slices {
	return &Slices{client: c, log: log, slices: map[ServiceName]*slice{}, bySvc: map[ServiceName]map[string]*slice{},
		subs: map[int]func(ServiceName){}, synced: make(chan struct{})}
}

// Run follows the EndpointSlices until ctx ends.
func (s *Slices) Run(ctx context.Context) error {
	s.client.Follow(ctx, kubeapi.EndpointSlices, "", kubeapi.ListOptions{LabelSelector: LabelServiceName}, "", handler{s}, s.log)
	return nil
}

// Synced is closed once the EndpointSlices were listed.
func (s *Slices) Synced() <-chan struct{} { return s.synced }

// Subscribe calls f with every Service whose EndpointSlices change, until
// the returned function is called.
func (s *Slices) Subscribe(f func(ServiceName)) (cancel func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	s.subs[id] = f
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.subs, id)
	}
}

// Endpoints returns the endpoints of the port named portName (the
// Service's port name, "" for its one unnamed port) of Service svc, with
// the port number each EndpointSlice gives it: the Service's targetPort,
// which the EndpointSlice controller resolves Pod by Pod when it is a
// name. When pod is set, only that Pod's. An address in several slices
// counts once, ready if any says so. The order is stable.
func (s *Slices) Endpoints(svc ServiceName, pod, portName string) []Endpoint {
	s.mu.RLock()
	draining := map[netip.AddrPort]bool{}
	for _, sl := range s.bySvc[svc] {
		i := slices.IndexFunc(sl.ports, func(p port) bool { return p.name == portName })
		if i < 0 {
			continue
		}
		for _, e := range sl.endpoints {
			if pod != "" && e.pod != pod {
				continue
			}
			a := netip.AddrPortFrom(e.addr, sl.ports[i].number)
			if d, seen := draining[a]; !seen || d {
				draining[a] = e.draining
			}
		}
	}
	s.mu.RUnlock()
	out := make([]Endpoint, 0, len(draining))
	for a, d := range draining {
		out = append(out, Endpoint{Addr: a, Draining: d})
	}
	slices.SortFunc(out, func(a, b Endpoint) int { return a.Addr.Compare(b.Addr) })
	return out
}

// Len returns how many EndpointSlices are kept.
func (s *Slices) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.slices)
}

type handler struct{ s *Slices }

func (h handler) Replace(items []json.RawMessage, _ string) {
	s := h.s
	next := map[ServiceName]*slice{}
	for _, raw := range items {
		k, sl, err := decodeSlice(raw)
		if err != nil {
			s.log.Warn("kubernetes: skipping an EndpointSlice", "err", err)
			continue
		}
		next[k] = sl
	}
	s.mu.Lock()
	changed := map[ServiceName]bool{}
	for k, sl := range s.slices {
		changed[ServiceName{k.Namespace, sl.service}] = true
	}
	s.slices, s.bySvc = map[ServiceName]*slice{}, map[ServiceName]map[string]*slice{}
	for k, sl := range next {
		changed[s.put(k, sl)] = true
	}
	subs := s.subscribers()
	s.mu.Unlock()
	for svc := range changed {
		for _, f := range subs {
			f(svc)
		}
	}
	s.syncOnce.Do(func() { close(s.synced) })
}

func (h handler) Event(ev kubeapi.Event) {
	s := h.s
	if ev.Type == kubeapi.Bookmark {
		return
	}
	k, sl, err := decodeSlice(ev.Object)
	if err != nil {
		s.log.Warn("kubernetes: skipping an EndpointSlice", "err", err)
		return
	}
	var changed []ServiceName
	s.mu.Lock()
	if old, ok := s.slices[k]; ok {
		svc := ServiceName{k.Namespace, old.service}
		delete(s.bySvc[svc], k.Name)
		if len(s.bySvc[svc]) == 0 {
			delete(s.bySvc, svc)
		}
		delete(s.slices, k)
		changed = append(changed, svc)
	}
	if ev.Type != kubeapi.Deleted {
		if svc := s.put(k, sl); !slices.Contains(changed, svc) {
			changed = append(changed, svc)
		}
	}
	subs := s.subscribers()
	s.mu.Unlock()
	for _, svc := range changed {
		for _, f := range subs {
			f(svc)
		}
	}
}

// put records the slice k and returns its Service. s.mu is held.
func (s *Slices) put(k ServiceName, sl *slice) ServiceName {
	svc := ServiceName{k.Namespace, sl.service}
	s.slices[k] = sl
	if s.bySvc[svc] == nil {
		s.bySvc[svc] = map[string]*slice{}
	}
	s.bySvc[svc][k.Name] = sl
	return svc
}

// subscribers returns the callbacks in a stable order. s.mu is held.
func (s *Slices) subscribers() []func(ServiceName) {
	ids := make([]int, 0, len(s.subs))
	for id := range s.subs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]func(ServiceName), 0, len(ids))
	for _, id := range ids {
		out = append(out, s.subs[id])
	}
	return out
}

// sliceObject is an EndpointSlice as far as it is read.
type sliceObject struct {
	Metadata    kubeapi.ObjectMeta `json:"metadata"`
	AddressType string             `json:"addressType"`
	Ports       []struct {
		Name     *string `json:"name"`
		Protocol *string `json:"protocol"`
		Port     *int32  `json:"port"`
	} `json:"ports"`
	Endpoints []struct {
		Addresses  []string `json:"addresses"`
		Conditions struct {
			Ready       *bool `json:"ready"`
			Serving     *bool `json:"serving"`
			Terminating *bool `json:"terminating"`
		} `json:"conditions"`
		TargetRef *struct {
			Kind      string `json:"kind"`
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"targetRef"`
	} `json:"endpoints"`
}

// decodeSlice reads what is kept of an EndpointSlice: its TCP ports that
// have a number, and the endpoints that take traffic, by the API's rules
// for the conditions (a nil ready or serving is true, a nil terminating
// false): ready takes traffic; not ready but serving and terminating is
// draining; anything else (not ready and not serving, or not ready and
// not terminating) takes none and is not kept. Only an endpoint's first
// address counts, as the API says consumers should read it; FQDN slices
// have no IP address and keep no endpoint.
func decodeSlice(raw []byte) (ServiceName, *slice, error) {
	var o sliceObject
	if err := json.Unmarshal(raw, &o); err != nil {
		return ServiceName{}, nil, err
	}
	k := ServiceName{o.Metadata.Namespace, o.Metadata.Name}
	sl := &slice{service: o.Metadata.Labels[LabelServiceName]}
	for _, p := range o.Ports {
		if p.Port == nil || *p.Port < 1 || *p.Port > 65535 || (p.Protocol != nil && *p.Protocol != "TCP") {
			continue
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		sl.ports = append(sl.ports, port{name: name, number: uint16(*p.Port)})
	}
	if o.AddressType != "IPv4" && o.AddressType != "IPv6" {
		return k, sl, nil
	}
	for _, e := range o.Endpoints {
		if len(e.Addresses) == 0 {
			continue
		}
		a, err := netip.ParseAddr(e.Addresses[0])
		if err != nil {
			continue
		}
		c := e.Conditions
		ready := c.Ready == nil || *c.Ready
		serving := c.Serving == nil || *c.Serving
		terminating := c.Terminating != nil && *c.Terminating
		if !ready && !(serving && terminating) {
			continue
		}
		ep := endpoint{addr: a.Unmap(), draining: !ready}
		if r := e.TargetRef; r != nil && r.Kind == "Pod" && cmp.Or(r.Namespace, k.Namespace) == k.Namespace {
			ep.pod = r.Name
		}
		sl.endpoints = append(sl.endpoints, ep)
	}
	return k, sl, nil
}
