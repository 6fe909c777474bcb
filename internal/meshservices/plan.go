package meshservices

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// LabelDeletionStarted marks a managed MeshService whose last Dataplane went
// away, with the moment its grace period started.
const LabelDeletionStarted = "kuma.io/deletion-grace-period-started-at"

// startedLayout writes that moment in UTC (ISO 8601 basic format, with
// milliseconds): a valid label value, unlike RFC 3339, whose ':' labels
// may not hold. RFC 3339, as Kuma writes it, is read too.
const startedLayout = "20060102T150405.000Z"

func formatStarted(t time.Time) string { return t.UTC().Format(startedLayout) }

func parseStarted(s string) (time.Time, error) {
	t, err := time.Parse(startedLayout, s)
	if err != nil {
		t, err = time.Parse(time.RFC3339, s)
	}
	return t, err
}

// Options are the settings that shape the MeshServices.
type Options struct {
	// Zone labels the MeshServices (kuma.io/zone).
	Zone string
	// ExportDefault is spec.export.mode when no Dataplane has a
	// kuma.io/export-mode tag (All or None).
	ExportDefault string
	// GracePeriod is how long a MeshService outlives its last Dataplane.
	GracePeriod time.Duration
}

// Unit is what decides the MeshServices of one compliant name in one mesh:
// the tags whose compliant form is Base compete for the name Base, so they
// are planned together.
type Unit struct {
	Mesh string
	Base string
}

// Input is everything a unit's plan depends on.
type Input struct {
	Unit Unit
	// Dataplanes with at least one inbound whose kuma.io/service tag has
	// the compliant form Unit.Base.
	Dataplanes []*resource.Object
	// Managed are the MeshServices of the mesh managed by this controller
	// whose ServiceTag identity has the compliant form Unit.Base.
	Managed []*resource.Object
	// Lookup returns the MeshService of the mesh with that name, if any.
	Lookup func(name string) *resource.Object
}

// Service is the outcome for one tag (or one managed MeshService left
// without Dataplanes), as the API's _servicetags inspection shows it.
type Service = api.ServiceTag

// Plan is the outcome of a unit: what each tag gets and the writes that
// bring the store there.
type Plan struct {
	Services []Service
	// Ops write at most one change per MeshService: create, labels and
	// spec, or else status; the echo of a write makes the unit planned
	// again, which writes the next change.
	Ops []store.Op
	// Wake is when the unit must be planned again for a grace period to
	// end (zero for never).
	Wake time.Time
	// Blockers are names of MeshServices not managed here that keep a tag
	// from its name: a change to them must plan the unit again.
	Blockers []string
}

// claim is one tag and the Dataplanes that carry it.
type claim struct {
	tag     string
	dps     []*resource.Object // oldest first
	ports   [][]resource.Port  // per Dataplane
	exports []string           // per Dataplane; "" when untagged
	holder  *resource.Object   // the managed MeshService it has
}

// PlanUnit decides the MeshServices of a unit at now. It is pure.
func PlanUnit(in Input, o Options, now time.Time) Plan {
	dps := slices.Clone(in.Dataplanes)
	slices.SortFunc(dps, older)
	claims := map[string]*claim{}
	var order []*claim
	for _, dp := range dps {
		spec := dp.Spec.(*resource.DataplaneSpec)
		seen := map[string]int{} // tag -> index into its claim's per-DP slices
		for _, inb := range spec.Networking.Inbound {
			tag := inb.Tags[resource.TagService]
			if tag == "" || Compliant(tag) != in.Unit.Base {
				// A Kuma 3.x inbound has no tags: no service to synthesise.
				continue
			}
			c := claims[tag]
			if c == nil {
				c = &claim{tag: tag}
				claims[tag] = c
				order = append(order, c)
			}
			i, ok := seen[tag]
			if !ok {
				i = len(c.dps)
				seen[tag] = i
				c.dps = append(c.dps, dp)
				c.ports = append(c.ports, nil)
				c.exports = append(c.exports, "")
			}
			c.ports[i] = addPort(c.ports[i], inb)
			if v := inb.Tags[resource.LabelExportMode]; v != "" && c.exports[i] == "" {
				c.exports[i] = v
			}
		}
	}

	// Managed services keep their names; one without Dataplanes is an
	// orphan on its way out.
	managed := slices.Clone(in.Managed)
	slices.SortFunc(managed, older)
	var orphans []*resource.Object
	used := map[string]bool{}
	for _, ms := range managed {
		used[ms.Name] = true
		tag := identityTag(ms)
		c := claims[tag]
		if c == nil || c.holder != nil {
			orphans = append(orphans, ms)
			continue
		}
		c.holder = ms
	}

	// Tags without a service yet: a tag that is its own compliant name
	// first, then the one with the oldest Dataplane, then by value.
	slices.SortStableFunc(order, func(a, b *claim) int {
		if (a.holder != nil) != (b.holder != nil) {
			return boolFirst(a.holder != nil)
		}
		if (a.tag == in.Unit.Base) != (b.tag == in.Unit.Base) {
			return boolFirst(a.tag == in.Unit.Base)
		}
		if c := older(a.dps[0], b.dps[0]); c != 0 {
			return c
		}
		return cmp.Compare(a.tag, b.tag)
	})

	// The lookup reads a live cache, which may take in the echo of a write
	// while the unit is being planned: each name is read once, so that
	// adopt and pickName see the same state. Otherwise adopt could miss the
	// tag's service just created under its name and pickName, reading again
	// a moment later, find it and take it for another tag's, giving the tag
	// a second service under its suffixed name.
	lookup := onceEach(in.Lookup)
	var p Plan
	for _, c := range order {
		svc := Service{Tag: c.tag}
		for _, dp := range c.dps {
			svc.Dataplanes = append(svc.Dataplanes, dp.Name)
		}
		svc.Ports, svc.ExportMode, svc.Conditions = c.agree(o.ExportDefault)
		if c.holder == nil {
			// The index may not have seen a service created moments ago:
			// one of the tag's own names holding it is its service.
			c.holder = adopt(c.tag, used, lookup)
		}
		if c.holder != nil {
			svc.Name = c.holder.Name
			used[svc.Name] = true
		} else {
			svc.Name, svc.Blocked = pickName(c.tag, used, lookup, &p.Blockers)
			if svc.Name != "" {
				used[svc.Name] = true
			}
		}
		if svc.Name != "" {
			if op, ok := reconcileService(in.Unit, c.holder, svc, o); ok {
				p.Ops = append(p.Ops, op)
			}
		}
		p.Services = append(p.Services, svc)
	}
	for _, ms := range orphans {
		svc, op, wake := retire(ms, o.GracePeriod, now)
		p.Services = append(p.Services, svc)
		if op != nil {
			p.Ops = append(p.Ops, *op)
		}
		if !wake.IsZero() && (p.Wake.IsZero() || wake.Before(p.Wake)) {
			p.Wake = wake
		}
	}
	return p
}

// onceEach returns lookup remembering its answer for each name.
func onceEach(lookup func(string) *resource.Object) func(string) *resource.Object {
	seen := map[string]*resource.Object{}
	return func(name string) *resource.Object {
		ms, ok := seen[name]
		if !ok {
			ms = lookup(name)
			seen[name] = ms
		}
		return ms
	}
}

// adopt returns the managed MeshService of tag under one of its names, if
// one exists that the unit has not counted yet.
func adopt(tag string, used map[string]bool, lookup func(string) *resource.Object) *resource.Object {
	for _, n := range []string{Name(tag), Suffixed(tag)} {
		if ms := lookup(n); ms != nil && !used[n] && Managed(ms) && identityTag(ms) == tag {
			return ms
		}
	}
	return nil
}

// pickName finds a free name for a tag without a service: Name(tag), or
// Suffixed(tag) when another tag of the unit holds Name(tag). A name held
// by a MeshService this controller does not manage is never taken over.
func pickName(tag string, used map[string]bool, lookup func(string) *resource.Object, blockers *[]string) (name, blocked string) {
	for _, n := range []string{Name(tag), Suffixed(tag)} {
		if used[n] {
			continue // another tag of this unit has it
		}
		if ms := lookup(n); ms != nil {
			*blockers = append(*blockers, n)
			if !Managed(ms) {
				return "", fmt.Sprintf("MeshService %q exists and is not managed by meshnames (label %s is not %s): it is left alone; rename it or the %s tag",
					n, resource.LabelManagedBy, resource.ManagedByMeshServices, resource.TagService)
			}
			continue // managed for another tag (a hash clash): try the next
		}
		return n, ""
	}
	return "", fmt.Sprintf("the names %q and %q are both held by other MeshServices", Name(tag), Suffixed(tag))
}

// agree picks the ports and export mode of a tag from its Dataplanes: the
// oldest Dataplane's, with a condition naming those that disagree.
func (c *claim) agree(exportDefault string) ([]resource.Port, string, []resource.Condition) {
	var conds []resource.Condition
	ports := c.ports[0]
	var differ []string
	for i := 1; i < len(c.dps); i++ {
		if !slices.EqualFunc(c.ports[i], ports, samePort) {
			differ = append(differ, c.dps[i].Name)
		}
	}
	if len(differ) > 0 {
		conds = append(conds, resource.Condition{Type: resource.ConditionPortsConsistent, Status: resource.ConditionFalse, Reason: resource.ReasonPortConflict,
			Message: fmt.Sprintf("ports must be the same on every Dataplane of %s %q; the oldest, %s, declares %s, and these differ: %s",
				resource.TagService, c.tag, c.dps[0].Name, portList(ports), strings.Join(differ, ", "))})
	}
	mode, from := exportDefault, ""
	differ = nil
	for i, v := range c.exports {
		switch {
		case v == "":
		case from == "":
			mode, from = v, c.dps[i].Name
		case v != mode:
			differ = append(differ, c.dps[i].Name)
		}
	}
	if len(differ) > 0 {
		conds = append(conds, resource.Condition{Type: resource.ConditionExportModeConsistent, Status: resource.ConditionFalse, Reason: resource.ReasonExportModeConflict,
			Message: fmt.Sprintf("Dataplanes of %s %q disagree on the %s tag: the oldest that sets it, %s, says %s; these differ: %s",
				resource.TagService, c.tag, resource.LabelExportMode, from, mode, strings.Join(differ, ", "))})
	}
	return ports, mode, conds
}

// reconcileService returns the write that brings a tag's MeshService closer
// to what it should be, if any.
func reconcileService(u Unit, holder *resource.Object, svc Service, o Options) (store.Op, bool) {
	spec := &resource.MeshServiceSpec{
		Selector:   resource.MeshServiceSelector{DataplaneTags: map[string]string{resource.TagService: svc.Tag}},
		Ports:      svc.Ports,
		Identities: []resource.Identity{{Type: resource.IdentityServiceTag, Value: svc.Tag}},
		Export:     &resource.Export{Mode: svc.ExportMode},
	}
	var labels map[string]string
	if holder != nil {
		labels = maps.Clone(holder.Labels)
	} else {
		labels = map[string]string{}
	}
	delete(labels, LabelDeletionStarted)
	maps.Copy(labels, map[string]string{
		resource.LabelMesh:        u.Mesh,
		resource.LabelDisplayName: svc.Name, // the tag is in the identity

		resource.LabelManagedBy: resource.ManagedByMeshServices,
		resource.LabelEnv:       resource.EnvUniversal,
		resource.LabelOrigin:    resource.OriginZone,
		resource.LabelZone:      o.Zone,
	})
	if holder == nil {
		return store.Op{Type: store.OpCreate, Object: &resource.Object{
			Kind: resource.MeshService, Mesh: u.Mesh, Name: svc.Name, Labels: labels, Spec: spec}}, true
	}
	if !maps.Equal(labels, holder.Labels) || !sameSpec(holder.Spec.(*resource.MeshServiceSpec), spec) {
		obj := &resource.Object{Kind: resource.MeshService, Mesh: u.Mesh, Name: svc.Name, Labels: labels, Spec: spec, Version: holder.Version}
		return store.Op{Type: store.OpUpdate, Object: obj}, true
	}
	status := resource.ServiceStatusOrNew(holder)
	conds := withConditions(status.Service().Conditions, svc.Conditions)
	if slices.Equal(conds, status.Service().Conditions) {
		return store.Op{}, false
	}
	obj := holder.Clone()
	st := resource.ServiceStatusOrNew(obj)
	st.Service().Conditions = conds
	obj.Status = st
	return store.Op{Type: store.OpPatchStatus, Object: obj, Patch: statusPatch, DiscardObject: true}, true
}

// statusPatch is what this controller owns of a status: its conditions.
var statusPatch = &store.StatusPatch{Conditions: []string{resource.ConditionPortsConsistent, resource.ConditionExportModeConsistent}}

// retire handles a managed MeshService without Dataplanes: it starts the
// grace period, or deletes the service once the period is over. A zero now
// reports what the stored labels say and decides nothing (Report).
func retire(ms *resource.Object, grace time.Duration, now time.Time) (Service, *store.Op, time.Time) {
	svc := Service{Tag: identityTag(ms), Name: ms.Name}
	started, err := parseStarted(ms.Labels[LabelDeletionStarted])
	if now.IsZero() {
		if err == nil {
			svc.DeletionAt = started.Add(grace)
		}
		svc.Retiring = true
		return svc, nil, time.Time{}
	}
	if err != nil {
		// Not started, or a value we cannot read: start now.
		labels := maps.Clone(ms.Labels)
		labels[LabelDeletionStarted] = formatStarted(now)
		obj := &resource.Object{Kind: ms.Kind, Mesh: ms.Mesh, Name: ms.Name, Labels: labels, Spec: ms.Spec, Version: ms.Version}
		svc.DeletionAt = now.Add(grace)
		return svc, &store.Op{Type: store.OpUpdate, Object: obj}, svc.DeletionAt
	}
	svc.DeletionAt = started.Add(grace)
	if now.Before(svc.DeletionAt) {
		return svc, nil, svc.DeletionAt
	}
	return svc, &store.Op{Type: store.OpDelete, Key: ms.Key(), Version: ms.Version}, time.Time{}
}

// Managed reports whether ms was created by this controller (Kuma's
// kuma.io/managed-by label); only those are ever changed or deleted. A
// service another zone synthesised arrives from global with the label and
// kuma.io/origin: global; it is that zone's, never this controller's.
func Managed(ms *resource.Object) bool {
	return ms.Labels[resource.LabelManagedBy] == resource.ManagedByMeshServices && ms.Labels[resource.LabelOrigin] != resource.OriginGlobal
}

// identityTag is the kuma.io/service value a managed MeshService stands for.
func identityTag(ms *resource.Object) string {
	for _, id := range ms.Spec.(*resource.MeshServiceSpec).Identities {
		if id.Type == resource.IdentityServiceTag {
			return id.Value
		}
	}
	return ""
}

// addPort adds an inbound's port, keeping ports sorted and the first of
// two inbounds on one port.
func addPort(ports []resource.Port, inb resource.Inbound) []resource.Port {
	proto := inb.Tags[resource.TagProtocol]
	if proto == "" {
		proto = resource.ProtocolTCP
	}
	p := resource.Port{Name: inb.Name, Port: inb.Port, TargetPort: &resource.IntOrString{Int: inb.Port}, AppProtocol: proto}
	i, found := slices.BinarySearchFunc(ports, p.Port, func(a resource.Port, port int) int { return cmp.Compare(a.Port, port) })
	if found {
		return ports
	}
	return slices.Insert(ports, i, p)
}

func samePort(a, b resource.Port) bool {
	return a.Name == b.Name && a.Port == b.Port && a.AppProtocol == b.AppProtocol && sameTarget(a.TargetPort, b.TargetPort)
}

func sameTarget(a, b *resource.IntOrString) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func portList(ports []resource.Port) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, p := range ports {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d/%s", p.Port, p.AppProtocol)
	}
	b.WriteByte(']')
	return b.String()
}

func sameSpec(a, b *resource.MeshServiceSpec) bool {
	return maps.Equal(a.Selector.DataplaneTags, b.Selector.DataplaneTags) &&
		a.Selector.DataplaneRef == nil && a.Selector.DataplaneLabels == nil && a.Selector.Dataplane == nil &&
		slices.EqualFunc(a.Ports, b.Ports, samePort) &&
		slices.Equal(a.Identities, b.Identities) &&
		a.State == b.State &&
		a.Export != nil && b.Export != nil && *a.Export == *b.Export
}

// withConditions replaces this controller's conditions in conds by want,
// leaving the others' (the VIP controller's) in place.
func withConditions(conds, want []resource.Condition) []resource.Condition {
	out := slices.DeleteFunc(slices.Clone(conds), func(c resource.Condition) bool {
		return c.Type == resource.ConditionPortsConsistent || c.Type == resource.ConditionExportModeConsistent
	})
	out = append(out, want...)
	if len(out) == 0 {
		return nil
	}
	return out
}

// older orders resources oldest first, then by name.
func older(a, b *resource.Object) int {
	if c := a.CreationTime.Compare(b.CreationTime); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

func boolFirst(a bool) int {
	if a {
		return -1
	}
	return 1
}

// Report plans every unit of a mesh from its Dataplanes and MeshServices
// without a clock: what the controller decided, as the
// stored resources show it - for the API, which may run on any instance
// and must not decide what only the leader decides (a grace period not yet
// started has no end yet; one that ended is still reported).
func Report(mesh string, dataplanes, services []*resource.Object, o Options) []Service {
	return planMesh(mesh, dataplanes, services, o, time.Time{})
}

// Reporter returns Report over what c holds of a mesh, for the
// _servicetags inspection: the wiring hands it to the REST API, which does
// not import this package.
func Reporter(c *cache.Cache, o Options) func(mesh string) []api.ServiceTag {
	return func(mesh string) []api.ServiceTag {
		dps, _ := c.List(cache.Query{Kind: resource.Dataplane, Mesh: mesh})
		mss, _ := c.List(cache.Query{Kind: resource.MeshService, Mesh: mesh})
		return Report(mesh, dps, mss, o)
	}
}

// planMesh plans every unit of a mesh at now (zero: report, see retire).
func planMesh(mesh string, dataplanes, services []*resource.Object, o Options, now time.Time) []Service {
	inputs := map[Unit]*Input{}
	byName := map[string]*resource.Object{}
	for _, ms := range services {
		byName[ms.Name] = ms
	}
	lookup := func(name string) *resource.Object { return byName[name] }
	in := func(base string) *Input {
		u := Unit{Mesh: mesh, Base: base}
		if inputs[u] == nil {
			inputs[u] = &Input{Unit: u, Lookup: lookup}
		}
		return inputs[u]
	}
	for _, dp := range dataplanes {
		var bases []string
		for _, inb := range dp.Spec.(*resource.DataplaneSpec).Networking.Inbound {
			tag := inb.Tags[resource.TagService]
			if b := Compliant(tag); tag != "" && !slices.Contains(bases, b) {
				bases = append(bases, b)
				in(b).Dataplanes = append(in(b).Dataplanes, dp)
			}
		}
	}
	for _, ms := range services {
		if tag := identityTag(ms); tag != "" && Managed(ms) {
			i := in(Compliant(tag))
			i.Managed = append(i.Managed, ms)
		}
	}
	var out []Service
	for _, i := range inputs {
		out = append(out, PlanUnit(*i, o, now).Services...)
	}
	slices.SortFunc(out, func(a, b Service) int { return cmp.Or(cmp.Compare(a.Tag, b.Tag), cmp.Compare(a.Name, b.Name)) })
	return out
}
