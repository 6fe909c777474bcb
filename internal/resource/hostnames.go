package resource

import (
	"errors"

	"github.com/meshnames/meshnames/internal/hostname"
)

// HostnameGeneratorOf converts a stored HostnameGenerator for the hostname
// engine. It fails for one that admission would refuse today (a generator
// stored under other rules): such a generator names nothing.
func HostnameGeneratorOf(obj *Object) (hostname.Generator, error) {
	spec, ok := obj.Spec.(*HostnameGeneratorSpec)
	if !ok {
		return hostname.Generator{}, errors.New("not a HostnameGenerator")
	}
	kind, sel := spec.Selector.Target()
	if sel == nil {
		return hostname.Generator{}, errors.New("its selector does not name exactly one kind")
	}
	t, err := hostname.Parse(spec.Template)
	if err != nil {
		return hostname.Generator{}, err
	}
	return hostname.Generator{
		Name:        obj.Name,
		Kind:        string(kind),
		MatchLabels: sel.MatchLabels,
		Template:    t,
		// seed 000: generators created in this zone win over those synced
		// from global; one without the label was created here.
		Local:   obj.Labels[LabelOrigin] != OriginGlobal,
		Created: obj.CreationTime,
	}, nil
}

// HostnameServiceOf converts a service of any service kind for the hostname
// engine. The InternalVIP values of a MeshExternalService are names it
// gives itself, which take part in the per-mesh uniqueness of names.
func HostnameServiceOf(obj *Object) hostname.Service {
	return hostname.Service{Key: HostnameKey(obj.Key()), Labels: obj.Labels, Created: obj.CreationTime, OwnNames: InternalVIPs(obj)}
}

// InternalVIPs returns the values of the InternalVIP matches of a
// MeshExternalService, in spec order (repeats included), or nil.
func InternalVIPs(obj *Object) []string {
	spec, ok := obj.Spec.(*MeshExternalServiceSpec)
	if !ok {
		return nil
	}
	var out []string
	for _, m := range spec.Match {
		if m.Type == MatchInternalVIP {
			out = append(out, m.Value)
		}
	}
	return out
}

// HostnameKey converts a service's key to the engine's.
func HostnameKey(k Key) hostname.ServiceKey {
	return hostname.ServiceKey{Kind: string(k.Kind), Mesh: k.Mesh, Name: k.Name}
}

// ServiceTags returns the values of the ServiceTag identities of a
// MeshService (seed 004), in spec order, or nil.
func ServiceTags(obj *Object) []string {
	spec, ok := obj.Spec.(*MeshServiceSpec)
	if !ok {
		return nil
	}
	var out []string
	for _, id := range spec.Identities {
		if id.Type == IdentityServiceTag && id.Value != "" {
			out = append(out, id.Value)
		}
	}
	return out
}
