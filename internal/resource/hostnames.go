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

// HostnameServiceOf converts a service of any service kind for the hostname engine.
func HostnameServiceOf(obj *Object) hostname.Service {
	return hostname.Service{Key: HostnameKey(obj.Key()), Labels: obj.Labels, Created: obj.CreationTime}
}

// HostnameKey converts a service's key to the engine's.
func HostnameKey(k Key) hostname.ServiceKey {
	return hostname.ServiceKey{Kind: string(k.Kind), Mesh: k.Mesh, Name: k.Name}
}
