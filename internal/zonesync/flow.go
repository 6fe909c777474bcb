package zonesync

import (
	"maps"
	"strings"

	"github.com/meshnames/meshnames/internal/resource"
)

// What flows where (the MeshService multizone design record; ARCHITECTURE.md
// section 7):
//
//   - zone to global: the zone's own MeshServices (with status), its
//     Dataplanes and ZoneIngresses, and the HostnameGenerators and
//     MeshExternalServices created in the zone; the global keeps them and
//     sends none of them on, but the MeshServices and ZoneIngresses.
//   - global to zones: Meshes, the HostnameGenerators, MeshExternalServices
//     and MeshMultiZoneServices created on the global, every other zone's
//     exported MeshServices, without status, and every other zone's
//     ZoneIngresses (seed 002: a proxy reaches another zone's service
//     through that zone's ingress).

// fromZone reports whether resources of kind k flow from zones to global.
func fromZone(k resource.Kind) bool {
	switch k {
	case resource.MeshService, resource.Dataplane, resource.ZoneIngress, resource.HostnameGenerator, resource.MeshExternalService:
		return true
	}
	return false
}

// fromGlobal reports whether resources of kind k flow from global to zones.
func fromGlobal(k resource.Kind) bool {
	switch k {
	case resource.Mesh, resource.HostnameGenerator, resource.MeshExternalService, resource.MeshMultiZoneService, resource.MeshService, resource.ZoneIngress:
		return true
	}
	return false
}

// zoneOut decides what a zone sends to global.
type zoneOut struct {
	// env is the zone's kuma.io/env, set on services that carry none, so
	// that the global's default generators for synced services select them
	// (seed 001).
	env string
	// exportDefault is spec.export.mode of a MeshService that sets none: the
	// zone owns the service, so its setting decides, and the global stores
	// the resolved mode.
	exportDefault string
}

// put returns what the global gets of obj, a zone's resource, or nil. It
// shares what it does not change with obj, which it leaves as it is.
func (z zoneOut) put(obj *resource.Object) *resource.Object {
	if !z.sends(obj.Kind, obj.Labels[resource.LabelOrigin]) {
		return nil
	}
	if obj.Kind == resource.MeshService {
		out := *obj
		if out.Labels[resource.LabelEnv] == "" && z.env != "" {
			out.Labels = withLabels(out.Labels, resource.LabelEnv, z.env)
		}
		if spec := obj.Spec.(*resource.MeshServiceSpec); spec.Export == nil {
			s := *spec
			s.Export = &resource.Export{Mode: z.exportDefault}
			out.Spec = &s
		}
		return &out
	}
	return obj
}

// sends reports whether the global gets a zone's resource of kind k with
// the kuma.io/origin label origin: what was created in the zone.
func (z zoneOut) sends(k resource.Kind, origin string) bool {
	return fromZone(k) && origin != resource.OriginGlobal
}

// tombstone returns what the global deletes when the zone deleted k.
func (z zoneOut) tombstone(k resource.Key) (resource.Key, bool) {
	return k, fromZone(k.Kind)
}

// acceptFromZone turns what zone sent into the global's resource: a kind
// that flows from zones, claiming no other zone, renamed <name>-<hash> and
// attributed to zone whatever the payload says (origin zone, kuma.io/zone,
// display name the zone's name for it, shortened as resource.DisplayName
// says when it is too long for a label).
func acceptFromZone(obj *resource.Object, zone string) (*resource.Object, error) {
	if !fromZone(obj.Kind) {
		return nil, refuse("kind", "%s resources do not flow from zones to global", obj.Kind)
	}
	if v, ok := obj.Labels[resource.LabelZone]; ok && v != zone {
		return nil, refuse("zone", "%s claims zone %q, but this stream is zone %q's", obj.Key(), v, zone)
	}
	if v, ok := obj.Labels[resource.LabelOrigin]; ok && v != resource.OriginZone {
		return nil, refuse("zone", "%s has kuma.io/origin %q: a zone sends only what it created (origin zone)", obj.Key(), v)
	}
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	ns := obj.Labels[resource.LabelNamespace]
	local := localName(obj.Name, ns)
	obj.Name = globalKey(obj.Key(), zone, ns).Name
	obj.Labels[resource.LabelOrigin] = resource.OriginZone
	obj.Labels[resource.LabelZone] = zone
	obj.Labels[resource.LabelDisplayName] = resource.DisplayName(local)
	return obj, nil
}

// globalKey is the global's key of zone's resource k, whose namespace
// label is ns ("" for none).
func globalKey(k resource.Key, zone, ns string) resource.Key {
	k.Name = HashedName(k.Kind, k.Mesh, localName(k.Name, ns), zone, ns)
	return k
}

// localName returns the zone's name for a resource named name with the
// namespace label ns, as seed 002 hashes it: a Kubernetes zone names its
// namespaced resources "<object>.<namespace>" (Kuma's core name), and the
// object's name is what the hash and the display name take, the
// namespace being hashed on its own. Without the namespace suffix the name
// is the zone's as it is.
func localName(name, ns string) string {
	if ns == "" {
		return name
	}
	if n, ok := strings.CutSuffix(name, "."+ns); ok && n != "" {
		return n
	}
	return name
}

// globalOut decides what the global sends to zones. What a resource
// becomes is the same for every zone (shared), and is computed once for
// all the streams that send it; each stream then only skips a zone's own
// services and turns a disabled zone's into deletions (forZone).
type globalOut struct {
	// enabled reports whether a zone's services go to other zones
	// (Zone.spec.enabled); nil means every zone is enabled.
	enabled func(zone string) bool
	// exportDefault is the export mode of a MeshService without one (a
	// zone fills it in; this covers services that came without).
	exportDefault string
}

// flow is what happens to a resource of the global in the zones.
type flow int

const (
	flowNone   flow = iota // it does not flow to zones
	flowPut                // zones store it
	flowDelete             // zones delete it: it stopped flowing (export None)
)

// target returns where obj, a resource of the global, goes: the key zones
// store it under, the zone a MeshService or ZoneIngress came from (""
// for other kinds), and whether it flows.
func (g globalOut) target(obj *resource.Object) (k resource.Key, from string, fl flow) {
	k = obj.Key()
	switch obj.Kind {
	case resource.Mesh:
		return k, "", flowPut
	case resource.HostnameGenerator, resource.MeshExternalService, resource.MeshMultiZoneService:
		if obj.Labels[resource.LabelOrigin] == resource.OriginZone {
			return k, "", flowNone // created in a zone: visible on global, not sent on
		}
		k.Name = HashedName(obj.Kind, obj.Mesh, obj.Name, "", "")
		return k, "", flowPut
	case resource.MeshService:
		from = obj.Labels[resource.LabelZone]
		if obj.Labels[resource.LabelOrigin] != resource.OriginZone || from == "" {
			return k, "", flowNone
		}
		if !g.exported(obj) {
			return k, from, flowDelete
		}
		return k, from, flowPut
	case resource.ZoneIngress:
		// Every zone's ingress goes to the other zones under the
		// global's name, which two zones' ingress-1 need to differ, with
		// its kuma.io/zone, by which xDS finds the ingresses of a zone.
		from = obj.Labels[resource.LabelZone]
		if obj.Labels[resource.LabelOrigin] != resource.OriginZone || from == "" {
			return k, "", flowNone
		}
		return k, from, flowPut
	}
	return k, "", flowNone
}

// shared returns what every zone gets of obj, a resource of the global: a
// resource to store, or a key to delete there when obj stopped flowing
// (its export mode turned None), or neither; and from, the zone a
// MeshService or ZoneIngress came from ("" for other kinds). The resource shares what it
// does not change with obj, which it leaves as it is.
func (g globalOut) shared(obj *resource.Object) (out *resource.Object, del *resource.Key, from string) {
	k, from, fl := g.target(obj)
	switch fl {
	case flowNone:
		return nil, nil, ""
	case flowDelete:
		return nil, &k, from
	}
	o := *obj
	o.Name = k.Name
	switch obj.Kind {
	case resource.Mesh, resource.MeshService, resource.ZoneIngress:
		o.Labels = withLabels(o.Labels, resource.LabelOrigin, resource.OriginGlobal)
	default:
		o.Labels = withLabels(o.Labels, resource.LabelOrigin, resource.OriginGlobal, resource.LabelDisplayName, resource.DisplayName(obj.Name))
	}
	if obj.Kind != resource.Mesh {
		o.Status = nil // each zone computes its own VIPs and hostnames
	}
	return &o, nil, from
}

// forZone returns whether zone gets what came from the zone from (""
// for resources of the global), and whether as a deletion: never a zone's
// own services back to it, and a disabled zone's services are deleted
// from the others.
func (g globalOut) forZone(zone, from string) (send, asDelete bool) {
	if from == "" {
		return true, false
	}
	if from == zone {
		return false, false
	}
	return true, g.enabled != nil && !g.enabled(from)
}

func (g globalOut) exported(obj *resource.Object) bool {
	mode := g.exportDefault
	if e := obj.Spec.(*resource.MeshServiceSpec).Export; e != nil && e.Mode != "" {
		mode = e.Mode
	}
	return mode == resource.ExportAll
}

// tombstone returns what the zone deletes when the global deleted k. The
// feed does not say where a deleted resource came from, so a deletion is
// sent for every kind that may have flowed; the zone deletes only what it
// got from global.
func (g globalOut) tombstone(k resource.Key) (resource.Key, bool) {
	switch k.Kind {
	case resource.Mesh, resource.MeshService, resource.ZoneIngress:
		return k, true
	case resource.HostnameGenerator, resource.MeshExternalService, resource.MeshMultiZoneService:
		return resource.Key{Kind: k.Kind, Mesh: k.Mesh, Name: HashedName(k.Kind, k.Mesh, k.Name, "", "")}, true
	}
	return resource.Key{}, false
}

// acceptFromGlobal turns what the global sent into the zone's resource: a
// kind that flows from global, never this zone's own service or ingress,
// labelled kuma.io/origin: global, without status (the zone computes its
// own).
func acceptFromGlobal(obj *resource.Object, zone string) (*resource.Object, error) {
	if !fromGlobal(obj.Kind) {
		return nil, refuse("kind", "%s resources do not flow from global to zones", obj.Kind)
	}
	what := ""
	switch obj.Kind {
	case resource.MeshService:
		what = "service"
	case resource.ZoneIngress:
		what = "ingress"
	}
	if what != "" {
		switch from := obj.Labels[resource.LabelZone]; from {
		case zone:
			return nil, refuse("zone", "%s is this zone's own %s; global must not send it back", obj.Key(), what)
		case "":
			return nil, refuse("invalid", "%s has no kuma.io/zone label: a synced %s names its zone", obj.Key(), what)
		}
	}
	if localName(obj.Name, obj.Labels[resource.LabelNamespace]) != obj.Name {
		// A name with a namespace suffix: DecodeResource checks it as a
		// zone's object name, but what the global sends keeps its own,
		// so it is checked here whole (a zone's receiver, which decodes
		// without validating, has Admit check it again).
		if errs := resource.Validate(obj); len(errs) > 0 {
			return nil, refuse("invalid", "%s: %v", obj.Key(), errs)
		}
	}
	if obj.Labels[resource.LabelOrigin] != resource.OriginGlobal { // the global labels what it sends so
		obj.Labels = withLabels(obj.Labels, resource.LabelOrigin, resource.OriginGlobal)
	}
	obj.Status = nil
	return obj, nil
}

// withLabels returns labels (cloned) with the pairs kv set.
func withLabels(labels map[string]string, kv ...string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = make(map[string]string, len(kv)/2)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}
