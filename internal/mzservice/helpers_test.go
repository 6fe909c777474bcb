package mzservice

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/meshnames/meshnames/internal/resource"
)

// ms returns a MeshService with labels and ports written "6379/tcp" or
// "6379/tcp/name".
func ms(mesh, name string, labels map[string]string, ports ...string) *resource.Object {
	spec := &resource.MeshServiceSpec{}
	for _, p := range ports {
		spec.Ports = append(spec.Ports, parsePort(p))
	}
	return &resource.Object{Kind: resource.MeshService, Mesh: mesh, Name: name, Labels: labels, Spec: spec}
}

// mz returns a MeshMultiZoneService selecting matchLabels (a nil map means
// no spec.selector.meshService at all) with the declared ports.
func mz(mesh, name string, matchLabels map[string]string, ports ...string) *resource.Object {
	spec := &resource.MeshMultiZoneServiceSpec{}
	if matchLabels != nil {
		spec.Selector.MeshService = &resource.LabelSelector{MatchLabels: matchLabels}
	}
	for _, p := range ports {
		spec.Ports = append(spec.Ports, parsePort(p))
	}
	return &resource.Object{Kind: resource.MeshMultiZoneService, Mesh: mesh, Name: name, Spec: spec}
}

func parsePort(s string) resource.Port {
	parts := strings.Split(s, "/")
	n, err := strconv.Atoi(parts[0])
	if err != nil {
		panic(fmt.Sprintf("port %q: %v", s, err))
	}
	p := resource.Port{Port: n, AppProtocol: parts[1]}
	if len(parts) > 2 {
		p.Name = parts[2]
	}
	return p
}

func ports(ps ...string) []resource.Port {
	var out []resource.Port
	for _, p := range ps {
		pp := parsePort(p)
		out = append(out, pp)
	}
	return out
}

func mzKey(mesh, name string) resource.Key {
	return resource.Key{Kind: resource.MeshMultiZoneService, Mesh: mesh, Name: name}
}

func msKey(mesh, name string) resource.Key {
	return resource.Key{Kind: resource.MeshService, Mesh: mesh, Name: name}
}

// zl returns the labels a zone sets on its MeshService, plus extra pairs
// given as "k=v".
func zl(zone string, extra ...string) map[string]string {
	m := map[string]string{resource.LabelZone: zone, resource.LabelOrigin: resource.OriginZone}
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func ref(name, namespace, zone, mesh string) resource.MeshServiceRef {
	return resource.MeshServiceRef{Name: name, Namespace: namespace, Zone: zone, Mesh: mesh}
}

func zones(names ...string) []resource.ZoneRef {
	var out []resource.ZoneRef
	for _, n := range names {
		out = append(out, resource.ZoneRef{Name: n})
	}
	return out
}

func matched(mesh string, n int) resource.Condition {
	c := resource.Condition{Type: resource.ConditionMeshServicesMatched, Status: resource.ConditionTrue, Reason: resource.ReasonMatchesFound}
	if n == 1 {
		c.Message = "1 MeshService of mesh " + mesh + " matches"
	} else {
		c.Message = fmt.Sprintf("%d MeshServices of mesh %s match", n, mesh)
	}
	return c
}

func noMatch(msg string) resource.Condition {
	return resource.Condition{Type: resource.ConditionMeshServicesMatched, Status: resource.ConditionFalse, Reason: resource.ReasonNoMatchesFound, Message: msg}
}

func portsDiffer(msg string) resource.Condition {
	return resource.Condition{Type: resource.ConditionPortsConsistent, Status: resource.ConditionFalse, Reason: resource.ReasonPortsDiffer,
		Message: "ports not on every matched MeshService are left out: " + msg}
}
