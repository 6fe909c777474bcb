package kubeservices

import (
	"encoding/json"
	"log/slog"
	"maps"
	"sync"

	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/reconcile"
)

// This file holds what the watches see: the Services, namespaces,
// EndpointSlices and ServiceExports, each kept by its handler in views,
// which queues the Services whose MeshServices may change.

// views holds what the watches saw; the handlers update it and queue the
// Services whose MeshServices may change.
type views struct {
	mu         sync.Mutex
	services   map[nsName]Packed
	namespaces map[string]Namespace
	slices     map[nsName]slice           // by EndpointSlice
	bySvc      map[nsName]map[nsName]bool // Service -> its EndpointSlices
	exports    map[nsName]bool            // ServiceExports (MCS API), when served
	synced     map[string]bool            // resource -> listed once
	queue      *reconcile.Queue[nsName]
	log        *slog.Logger
}

type serviceHandler struct{ v *views }
type namespaceHandler struct{ v *views }
type sliceHandler struct{ v *views }
type exportHandler struct{ v *views }

// Replace and Event of exportHandler keep the names of the ServiceExports
// (the MCS API): a ServiceExport exports its Service's MeshService.
func (h exportHandler) Replace(items []json.RawMessage, _ string) {
	v := h.v
	next := map[nsName]bool{}
	for _, raw := range items {
		var o namespaceObject
		if err := json.Unmarshal(raw, &o); err != nil {
			continue
		}
		next[nsName{o.Metadata.Namespace, o.Metadata.Name}] = true
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for k := range next {
		if !v.exports[k] {
			v.queue.Add(k)
		}
	}
	for k := range v.exports {
		if !next[k] {
			v.queue.Add(k)
		}
	}
	v.exports = next
	v.synced["serviceexports"] = true
}

func (h exportHandler) Event(ev kubeapi.Event) {
	v := h.v
	if ev.Type == kubeapi.Bookmark {
		return
	}
	var o namespaceObject
	if err := json.Unmarshal(ev.Object, &o); err != nil {
		return
	}
	k := nsName{o.Metadata.Namespace, o.Metadata.Name}
	v.mu.Lock()
	defer v.mu.Unlock()
	had := v.exports[k]
	if ev.Type == kubeapi.Deleted {
		delete(v.exports, k)
	} else {
		v.exports[k] = true
	}
	if had != v.exports[k] {
		v.queue.Add(k)
	}
}

func (h serviceHandler) Replace(items []json.RawMessage, _ string) {
	v := h.v
	next := map[nsName]Packed{}
	for _, raw := range items {
		s, err := DecodeService(raw)
		if err != nil {
			v.log.Warn("skipping a Service", "err", err)
			continue
		}
		next[nsName{s.Namespace, s.Name}] = Pack(s)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for k := range v.services {
		if _, ok := next[k]; !ok {
			v.queue.Add(k)
		}
	}
	for k := range next {
		v.queue.Add(k)
	}
	v.services = next
	v.synced["services"] = true
}

func (h serviceHandler) Event(ev kubeapi.Event) {
	v := h.v
	if ev.Type == kubeapi.Bookmark {
		return
	}
	s, err := DecodeService(ev.Object)
	if err != nil {
		v.log.Warn("skipping a Service", "err", err)
		return
	}
	k := nsName{s.Namespace, s.Name}
	v.mu.Lock()
	defer v.mu.Unlock()
	if ev.Type == kubeapi.Deleted {
		delete(v.services, k)
	} else {
		v.services[k] = Pack(s)
	}
	v.queue.Add(k)
}

func (h namespaceHandler) Replace(items []json.RawMessage, _ string) {
	v := h.v
	next := map[string]Namespace{}
	for _, raw := range items {
		n, err := DecodeNamespace(raw)
		if err != nil {
			continue
		}
		next[n.Name] = n
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for name, n := range next {
		if old, ok := v.namespaces[name]; !ok || !sameNamespace(old, n) {
			v.queueNamespace(name)
		}
	}
	for name := range v.namespaces {
		if _, ok := next[name]; !ok {
			v.queueNamespace(name)
		}
	}
	v.namespaces = next
	v.synced["namespaces"] = true
}

func (h namespaceHandler) Event(ev kubeapi.Event) {
	v := h.v
	if ev.Type == kubeapi.Bookmark {
		return
	}
	n, err := DecodeNamespace(ev.Object)
	if err != nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	old, had := v.namespaces[n.Name]
	if ev.Type == kubeapi.Deleted {
		delete(v.namespaces, n.Name)
	} else {
		v.namespaces[n.Name] = n
	}
	if !had || ev.Type == kubeapi.Deleted || !sameNamespace(old, n) {
		v.queueNamespace(n.Name)
	}
}

func sameNamespace(a, b Namespace) bool {
	return maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations)
}

// queueNamespace queues every Service of namespace ns. v.mu is held.
func (v *views) queueNamespace(ns string) {
	for k := range v.services {
		if k.ns == ns {
			v.queue.Add(k)
		}
	}
}

func (h sliceHandler) Replace(items []json.RawMessage, _ string) {
	v := h.v
	v.mu.Lock()
	defer v.mu.Unlock()
	for k, s := range v.slices {
		v.queue.Add(nsName{k.ns, s.service})
	}
	v.slices, v.bySvc = map[nsName]slice{}, map[nsName]map[nsName]bool{}
	for _, raw := range items {
		m, s, err := decodeSlice(raw)
		if err != nil {
			continue
		}
		v.putSlice(nsName{m.Namespace, m.Name}, s)
	}
	v.synced["endpointslices"] = true
}

func (h sliceHandler) Event(ev kubeapi.Event) {
	v := h.v
	if ev.Type == kubeapi.Bookmark {
		return
	}
	m, s, err := decodeSlice(ev.Object)
	if err != nil {
		return
	}
	k := nsName{m.Namespace, m.Name}
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.slices[k]; ok {
		svc := nsName{k.ns, old.service}
		delete(v.bySvc[svc], k)
		delete(v.slices, k)
		v.queue.Add(svc)
	}
	if ev.Type != kubeapi.Deleted {
		v.putSlice(k, s)
	}
}

// putSlice records an EndpointSlice. v.mu is held.
func (v *views) putSlice(k nsName, s slice) {
	if s.service == "" {
		return
	}
	v.slices[k] = s
	svc := nsName{k.ns, s.service}
	if v.bySvc[svc] == nil {
		v.bySvc[svc] = map[nsName]bool{}
	}
	v.bySvc[svc][k] = true
	v.queue.Add(svc)
}
