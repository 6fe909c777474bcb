package kubemcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/crd"
	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// Options configures a Controller.
type Options struct {
	Client *kubeapi.Client
	Store  store.Store
	Cache  *cache.Cache
	// Mode and Zone are the control plane's.
	Mode, Zone string
	// SkipGenerators leaves the clusterset HostnameGenerators uncreated
	// (defaults.skipHostnameGenerators).
	SkipGenerators bool
	Log            *slog.Logger
	// Resync is how often every ServiceExport and ServiceImport is
	// checked again, for what no event announces (a namespace created
	// after its import was refused): 1 minute when zero.
	Resync time.Duration
	// Now gives the conditions' transition times.
	Now func() time.Time
}

// ManagedBy labels the ServiceImports meshnames writes
// (app.kubernetes.io/managed-by); it leaves every other one alone.
const ManagedBy = "meshnames"

const labelManagedBy = "app.kubernetes.io/managed-by"

// Controller keeps the MCS objects.
type Controller struct{ o Options }

// New returns a Controller; it does no I/O.
func New(o Options) *Controller {
	if o.Resync <= 0 {
		o.Resync = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Controller{o: o}
}

type nsName struct{ ns, name string }

// exportView and importView are what the watches keep of the MCS
// objects.
type exportView struct {
	generation int64
	conditions []Condition
}

type importView struct {
	managed bool
	spec    ImportSpec
	status  ImportStatus
}

type views struct {
	mu      sync.Mutex
	exports map[nsName]exportView
	imports map[nsName]importView
	synced  int
	queue   *reconcile.Queue[nsName]
}

type mcsObject struct {
	Metadata kubeapi.ObjectMeta `json:"metadata"`
	Spec     ImportSpec         `json:"spec"`
	Status   struct {
		ImportStatus
		Conditions []Condition `json:"conditions"`
	} `json:"status"`
	generation int64
}

func decodeMCS(raw []byte) (mcsObject, error) {
	var o mcsObject
	var g struct {
		Metadata struct {
			Generation int64 `json:"generation"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return o, err
	}
	_ = json.Unmarshal(raw, &g)
	o.generation = g.Metadata.Generation
	return o, nil
}

type handler struct {
	v      *views
	export bool
}

func (h handler) put(o mcsObject) {
	k := nsName{o.Metadata.Namespace, o.Metadata.Name}
	if h.export {
		h.v.exports[k] = exportView{generation: o.generation, conditions: o.Status.Conditions}
	} else {
		h.v.imports[k] = importView{managed: o.Metadata.Labels[labelManagedBy] == ManagedBy, spec: o.Spec, status: o.Status.ImportStatus}
	}
	h.v.queue.Add(k)
}

func (h handler) Replace(items []json.RawMessage, _ string) {
	h.v.mu.Lock()
	defer h.v.mu.Unlock()
	for k := range h.v.exports {
		if h.export {
			h.v.queue.Add(k)
		}
	}
	for k := range h.v.imports {
		if !h.export {
			h.v.queue.Add(k)
		}
	}
	if h.export {
		h.v.exports = map[nsName]exportView{}
	} else {
		h.v.imports = map[nsName]importView{}
	}
	for _, raw := range items {
		if o, err := decodeMCS(raw); err == nil {
			h.put(o)
		}
	}
	h.v.synced++
}

func (h handler) Event(ev kubeapi.Event) {
	if ev.Type == kubeapi.Bookmark {
		return
	}
	o, err := decodeMCS(ev.Object)
	if err != nil {
		return
	}
	h.v.mu.Lock()
	defer h.v.mu.Unlock()
	if ev.Type == kubeapi.Deleted {
		k := nsName{o.Metadata.Namespace, o.Metadata.Name}
		if h.export {
			delete(h.v.exports, k)
		} else {
			delete(h.v.imports, k)
		}
		h.v.queue.Add(k)
		return
	}
	h.put(o)
}

// role is how a cached service bears on a ServiceExport or ServiceImport.
type role int

const (
	roleLocal  role = iota + 1 // the MeshService of this zone's Service
	roleRemote                 // another zone's MeshService
	roleMulti                  // a MeshMultiZoneService
)

// roleOf returns the name, namespace and role of a cached object, or
// false when it bears on no MCS object.
func roleOf(o *resource.Object) (nsName, role, bool) {
	l := o.Labels
	switch o.Kind {
	case resource.MeshService:
		k := nsName{l[resource.LabelNamespace], l[resource.LabelServiceName]}
		switch {
		case k.ns == "" || k.name == "" || l[resource.LabelHeadless] == "true":
		case l[resource.LabelOrigin] == resource.OriginGlobal:
			return k, roleRemote, true
		case l[resource.LabelManagedBy] == resource.ManagedByKubernetes:
			return k, roleLocal, true
		}
	case resource.MeshMultiZoneService:
		name := l[resource.LabelDisplayName]
		if name == "" {
			name = o.Name
		}
		if ns := l[resource.LabelNamespace]; ns != "" {
			return nsName{ns, name}, roleMulti, true
		}
	}
	return nsName{}, 0, false
}

// Run keeps the MCS objects until ctx ends. Call it only while leading.
func (c *Controller) Run(ctx context.Context) error {
	served, err := c.served(ctx)
	if !served || err != nil {
		return err
	}
	if !c.o.SkipGenerators {
		if err := c.ensureGenerators(ctx); err != nil {
			return err
		}
	}
	q := reconcile.New[nsName]()
	defer q.Close()
	index := map[resource.Key]nsName{}
	var imu sync.Mutex
	cancel := c.o.Cache.Subscribe(func(keys []resource.Key) {
		for _, k := range keys {
			if k.Kind != resource.MeshService && k.Kind != resource.MeshMultiZoneService {
				continue
			}
			imu.Lock()
			if old, ok := index[k]; ok {
				q.Add(old)
			}
			delete(index, k)
			if o, ok := c.o.Cache.Peek(k); ok {
				if n, _, ok := roleOf(o); ok {
					index[k] = n
					q.Add(n)
				}
			}
			imu.Unlock()
		}
	})
	defer cancel()
	if !c.o.Cache.WaitSynced(ctx) {
		return nil
	}
	v := &views{exports: map[nsName]exportView{}, imports: map[nsName]importView{}, queue: q}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	wg.Go(func() {
		c.o.Client.Follow(wctx, crd.ServiceExports, "", kubeapi.ListOptions{}, "", handler{v, true}, c.o.Log)
	})
	wg.Go(func() {
		c.o.Client.Follow(wctx, crd.ServiceImports, "", kubeapi.ListOptions{}, "", handler{v, false}, c.o.Log)
	})
	for _, kind := range []resource.Kind{resource.MeshService, resource.MeshMultiZoneService} {
		c.o.Cache.Scan(cache.Query{Kind: kind}, func(o *resource.Object) {
			if n, _, ok := roleOf(o); ok {
				imu.Lock()
				index[o.Key()] = n
				imu.Unlock()
				q.Add(n)
			}
		})
	}
	for {
		v.mu.Lock()
		done := v.synced >= 2
		v.mu.Unlock()
		if done {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
	resync := time.NewTicker(c.o.Resync)
	defer resync.Stop()
	batches := q.Batches(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-resync.C:
			v.mu.Lock()
			for k := range v.exports {
				q.Add(k)
			}
			for k := range v.imports {
				q.Add(k)
			}
			v.mu.Unlock()
			imu.Lock()
			for _, n := range index {
				q.Add(n)
			}
			imu.Unlock()
		case keys, ok := <-batches:
			if !ok {
				return nil
			}
			for _, k := range keys {
				if err := c.reconcile(ctx, v, k); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					c.o.Log.Warn("kubernetes: MCS objects not written; will retry", "namespace", k.ns, "name", k.name, "err", err)
					q.AddAfter(time.Second, k)
				}
			}
		}
	}
}

// served reports whether the API server serves the MCS API, retrying
// while it cannot tell, and logs once when it does not.
func (c *Controller) served(ctx context.Context) (bool, error) {
	delay := 100 * time.Millisecond
	for {
		e, err1 := c.o.Client.Serves(ctx, crd.ServiceExports)
		i, err2 := c.o.Client.Serves(ctx, crd.ServiceImports)
		if err := errors.Join(err1, err2); err == nil {
			if !e || !i {
				c.o.Log.Info("kubernetes: the Multi-Cluster Services API (multicluster.x-k8s.io/v1alpha1 ServiceExport and ServiceImport) is not served: ServiceExports are not read and no ServiceImports are written; install its CRDs (meshnames install mcs-crds) and restart to use it")
			}
			return e && i, nil
		} else if ctx.Err() != nil {
			return false, nil
		} else {
			c.o.Log.Warn("kubernetes: cannot tell whether the MCS API is served; will retry", "err", err)
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// services returns the cached services bearing on k, by role.
func (c *Controller) services(k nsName) (local *Service, remote, multi []Service) {
	for _, kind := range []resource.Kind{resource.MeshService, resource.MeshMultiZoneService} {
		q := cache.Query{Kind: kind, Labels: map[string]string{resource.LabelNamespace: k.ns}}
		c.o.Cache.Scan(q, func(o *resource.Object) {
			n, r, ok := roleOf(o)
			if !ok || n != k {
				return
			}
			s := view(o)
			switch r {
			case roleLocal:
				if local == nil {
					local = &s
				}
			case roleRemote:
				remote = append(remote, s)
			case roleMulti:
				multi = append(multi, s)
			}
		})
	}
	return local, remote, multi
}

// view reads what the rules need of a cached object.
func view(o *resource.Object) Service {
	s := Service{Key: o.Key(), Zone: o.Labels[resource.LabelZone], Created: o.CreationTime}
	switch spec := o.Spec.(type) {
	case *resource.MeshServiceSpec:
		s.Ports = spec.Ports
		s.Exported = spec.Export != nil && spec.Export.Mode == resource.ExportAll
	case *resource.MeshMultiZoneServiceSpec:
		s.Ports = spec.Ports
	}
	if st, ok := o.Status.(*resource.MultiZoneServiceStatus); ok && st != nil {
		if len(s.Ports) == 0 {
			s.Ports = st.Ports
		}
		for _, z := range st.Zones {
			s.Zones = append(s.Zones, z.Name)
		}
	}
	if st, ok := o.Status.(resource.ServiceStatusOf); ok && st != nil {
		if ss := st.Service(); ss != nil {
			for _, v := range ss.VIPs {
				s.VIPs = append(s.VIPs, v.IP)
			}
			for _, a := range ss.Addresses {
				if a.Status == resource.AddressAvailable {
					s.Hostnames = append(s.Hostnames, a.Hostname)
				}
			}
		}
	}
	return s
}

// reconcile writes the conditions of the ServiceExport k and the
// ServiceImport k as they should be.
func (c *Controller) reconcile(ctx context.Context, v *views, k nsName) error {
	local, remote, multi := c.services(k)
	v.mu.Lock()
	exp, exported := v.exports[k]
	imp, imported := v.imports[k]
	v.mu.Unlock()
	var errs []error
	if exported {
		errs = append(errs, c.writeConditions(ctx, k, exp, local, remote))
	}
	spec, status, want := Import(k.ns, k.name, append(remote, multi...))
	switch {
	case imported && !imp.managed:
		// Another MCS implementation's: not ours to change.
	case want && !imported:
		errs = append(errs, c.createImport(ctx, k, spec, status))
	case want:
		errs = append(errs, c.updateImport(ctx, k, imp, spec, status))
	case imported:
		if err := c.o.Client.Delete(ctx, crd.ServiceImports, k.ns, k.name, kubeapi.Preconditions{}); err != nil && !errors.Is(err, kubeapi.ErrNotFound) {
			errs = append(errs, fmt.Errorf("delete ServiceImport %s/%s: %w", k.ns, k.name, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) writeConditions(ctx context.Context, k nsName, exp exportView, local *Service, remote []Service) error {
	in := ExportInput{Namespace: k.ns, Name: k.name, Local: local, Remote: remote, Federated: c.o.Mode == resource.ModeZone}
	if local == nil {
		in.Missing, in.MissingMessage = c.whyNoMeshService(ctx, k)
	}
	want := Conditions(in)
	now := c.o.Now().UTC().Format(time.RFC3339)
	for i := range want {
		want[i].ObservedGeneration = exp.generation
		want[i].LastTransitionTime = now
		for _, old := range exp.conditions {
			if old.Type == want[i].Type && old.Status == want[i].Status {
				want[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	if reflect.DeepEqual(want, exp.conditions) {
		return nil
	}
	patch := map[string]any{"status": map[string]any{"conditions": want}}
	err := c.o.Client.Patch(ctx, crd.ServiceExports, k.ns, k.name, "status", kubeapi.MergePatch, patch, nil)
	if errors.Is(err, kubeapi.ErrNotFound) {
		return nil // deleted meanwhile
	}
	if err != nil {
		return fmt.Errorf("ServiceExport %s/%s: status: %w", k.ns, k.name, err)
	}
	return nil
}

// whyNoMeshService reads the Service a ServiceExport names.
func (c *Controller) whyNoMeshService(ctx context.Context, k nsName) (string, string) {
	var svc struct {
		Spec struct {
			Type string `json:"type"`
		} `json:"spec"`
	}
	err := c.o.Client.Get(ctx, kubeapi.Services, k.ns, k.name, &svc)
	switch {
	case errors.Is(err, kubeapi.ErrNotFound):
		return ReasonNoService, fmt.Sprintf("there is no Service %s in namespace %s", k.name, k.ns)
	case err != nil:
		return ReasonNoMeshService, fmt.Sprintf("the Service could not be read: %v", err)
	case svc.Spec.Type == "ExternalName":
		return ReasonInvalidServiceType, "an ExternalName Service cannot be exported"
	}
	return ReasonNoMeshService, "the Service has no MeshService: its namespace is not meshed (kuma.io/sidecar-injection), its mesh does not exist, or meshnames skips it (docs/kubernetes.md, Services become MeshServices)"
}

func (c *Controller) createImport(ctx context.Context, k nsName, spec ImportSpec, status ImportStatus) error {
	body := map[string]any{
		"apiVersion": crd.ServiceImports.APIVersion(), "kind": "ServiceImport",
		"metadata": map[string]any{"name": k.name, "namespace": k.ns, "labels": map[string]string{labelManagedBy: ManagedBy}},
		"spec":     spec,
	}
	err := c.o.Client.Create(ctx, crd.ServiceImports, k.ns, body, nil)
	switch {
	case errors.Is(err, kubeapi.ErrNotFound):
		// The namespace does not exist here (KEP-1645: namespace
		// sameness); the resync tries again.
		c.o.Log.Debug("kubernetes: no namespace for a ServiceImport", "namespace", k.ns, "name", k.name)
		return nil
	case err != nil:
		return fmt.Errorf("create ServiceImport %s/%s: %w", k.ns, k.name, err)
	}
	return c.patchImportStatus(ctx, k, status)
}

func (c *Controller) updateImport(ctx context.Context, k nsName, cur importView, spec ImportSpec, status ImportStatus) error {
	if !sameSpec(cur.spec, spec) {
		// A merge patch replaces lists whole, and null removes ips.
		patch := map[string]any{"spec": map[string]any{"type": spec.Type, "ports": spec.Ports, "ips": spec.IPs}}
		if err := c.o.Client.Patch(ctx, crd.ServiceImports, k.ns, k.name, "", kubeapi.MergePatch, patch, nil); err != nil {
			return fmt.Errorf("ServiceImport %s/%s: %w", k.ns, k.name, err)
		}
	}
	if !slices.Equal(cur.status.Clusters, status.Clusters) {
		return c.patchImportStatus(ctx, k, status)
	}
	return nil
}

func sameSpec(a, b ImportSpec) bool {
	return a.Type == b.Type && slices.Equal(a.IPs, b.IPs) && slices.Equal(a.Ports, b.Ports)
}

func (c *Controller) patchImportStatus(ctx context.Context, k nsName, status ImportStatus) error {
	patch := map[string]any{"status": map[string]any{"clusters": status.Clusters}}
	if err := c.o.Client.Patch(ctx, crd.ServiceImports, k.ns, k.name, "status", kubeapi.MergePatch, patch, nil); err != nil && !errors.Is(err, kubeapi.ErrNotFound) {
		return fmt.Errorf("ServiceImport %s/%s: status: %w", k.ns, k.name, err)
	}
	return nil
}

// Generators returns the HostnameGenerators that give other zones'
// Kubernetes services and MeshMultiZoneServices their clusterset names
// (KEP-1645: <name>.<namespace>.svc.clusterset.local), ready to store.
func Generators(mode, zone string) []*resource.Object {
	rows := []struct {
		name     string
		kind     resource.Kind
		labels   map[string]string
		template string
	}{
		{"clusterset-kube-mesh-service", resource.MeshService,
			map[string]string{resource.LabelOrigin: resource.OriginGlobal, resource.LabelEnv: resource.EnvKubernetes, resource.LabelHeadless: "false"},
			`{{ label "k8s.kuma.io/service-name" }}.{{ .Namespace }}.svc.clusterset.local`},
		{"clusterset-mesh-multi-zone-service", resource.MeshMultiZoneService, map[string]string{},
			`{{ .DisplayName }}.{{ label "k8s.kuma.io/namespace" }}.svc.clusterset.local`},
	}
	var out []*resource.Object
	for _, r := range rows {
		spec := &resource.HostnameGeneratorSpec{Template: r.template}
		sel := &resource.LabelSelector{MatchLabels: maps.Clone(r.labels)}
		if r.kind == resource.MeshService {
			spec.Selector.MeshService = sel
		} else {
			spec.Selector.MeshMultiZoneService = sel
		}
		obj := &resource.Object{Kind: resource.HostnameGenerator, Name: r.name, Spec: spec}
		obj.Spec.Default()
		if errs := admission.New(admission.Options{Mode: mode, Zone: zone}).Admit(obj, admission.Writer{Source: admission.System}); len(errs) > 0 {
			panic(fmt.Sprintf("kubemcs: generator %s is invalid: %v", r.name, errs))
		}
		out = append(out, obj)
	}
	return out
}

func (c *Controller) ensureGenerators(ctx context.Context) error {
	for _, g := range Generators(c.o.Mode, c.o.Zone) {
		_, err := c.o.Store.Get(ctx, g.Key())
		if err == nil {
			continue
		}
		if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("HostnameGenerator %s: %w", g.Name, err)
		}
		switch _, err := store.Create(ctx, c.o.Store, g); {
		case err == nil:
			c.o.Log.Info("created a HostnameGenerator for the MCS API's clusterset names", "name", g.Name, "template", g.Spec.(*resource.HostnameGeneratorSpec).Template)
		case !errors.Is(err, store.ErrAlreadyExists):
			return fmt.Errorf("HostnameGenerator %s: %w", g.Name, err)
		}
	}
	return nil
}
