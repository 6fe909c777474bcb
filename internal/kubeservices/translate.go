package kubeservices

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/validate"
)

// Labels and annotations of Kubernetes objects the translation reads
// (Kuma's, so that Kuma users' manifests carry over).
const (
	LabelSidecarInjection = "kuma.io/sidecar-injection"
	AnnotationIgnore      = "kuma.io/ignore"
	AnnotationGateway     = "kuma.io/gateway"
	LabelZoneProxyType    = "k8s.kuma.io/zone-proxy-type"
	LabelPodName          = "statefulset.kubernetes.io/pod-name"
	LabelPodIndex         = "apps.kubernetes.io/pod-index"
	// ManagedBy is the kuma.io/managed-by value of the MeshServices made
	// from Services (Kuma's; seed 001 said kube-controller).
	ManagedBy = resource.ManagedByKubernetes
)

// Service is what the translation reads of a Kubernetes Service.
type Service struct {
	Namespace, Name string
	Labels          map[string]string
	Annotations     map[string]string
	Type            string
	// ClusterIPs are spec.clusterIPs (spec.clusterIP first); "None" for a
	// headless Service, none for an ExternalName one.
	ClusterIPs []string
	Selector   map[string]string
	Ports      []ServicePort
	// Exported: a ServiceExport of the same name exists (the MCS API),
	// which exports the MeshService whatever the annotation says.
	Exported bool
}

// ServicePort is one port of a Service.
type ServicePort struct {
	Name        string
	Protocol    string // TCP when empty
	Port        int
	TargetPort  *resource.IntOrString
	AppProtocol string
}

// Namespace is what the translation reads of a namespace.
type Namespace struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
}

// Endpoint is one endpoint of a Service's EndpointSlices.
type Endpoint struct {
	Addresses []string
	// Pod is the Pod behind it, when the endpoint names one.
	Pod *Pod
}

// Pod is what the translation reads of the Pod behind an endpoint.
type Pod struct {
	Namespace, Name string
	// Labels holds the Pod's statefulset.kubernetes.io/pod-name and
	// apps.kubernetes.io/pod-index labels, when it has them.
	Labels map[string]string
	// Gateway: the Pod is a Kuma gateway (annotation kuma.io/gateway:
	// enabled), which makes the Service a gateway's.
	Gateway bool
}

// Input is everything the MeshServices of one Service depend on.
type Input struct {
	Service   Service
	Namespace *Namespace // nil when unknown
	// MeshExists reports whether a Mesh exists.
	MeshExists func(mesh string) bool
	// Endpoints are the endpoints of the Service's EndpointSlices, in a
	// stable order.
	Endpoints []Endpoint
	// ExportDefault is spec.export.mode when the Service has no
	// kuma.io/export-mode annotation (seed 002).
	ExportDefault string
	// SystemNamespace is the control plane's: resources there are named
	// without the namespace (store/kube).
	SystemNamespace string
}

// Output is the MeshServices a Service should have, and what the
// translation could not use.
type Output struct {
	// Mesh is the mesh of the MeshServices.
	Mesh string
	// Services are the MeshServices to keep, named "<name>.<namespace>",
	// with their VIPs in status.
	Services []*resource.Object
	// Skipped says why there are none, when there are none on purpose.
	Skipped string
	// Problems are what the translation ignored: UDP ports, an invalid
	// export annotation, Pods whose names cannot name a MeshService.
	Problems []string
}

// Translate returns the MeshServices of a Service (kuma-facts 11.2, seeds
// 000 and 002): only in a meshed namespace or with the kuma.io/mesh label,
// in an existing Mesh; not for ignored, gateway or zone-proxy Services or
// Services without a cluster IP; the ClusterIP as the VIP (type
// Kubernetes); TCP ports only; for a headless Service one per Pod endpoint,
// with the Pod's IPs. It is pure and deterministic.
func Translate(in Input) Output {
	svc := in.Service
	var out Output
	meshed := svc.Labels[resource.LabelMesh] != ""
	if ns := in.Namespace; ns != nil {
		for _, m := range []map[string]string{ns.Labels, ns.Annotations} {
			if v := m[LabelSidecarInjection]; v == "enabled" || v == "true" {
				meshed = true
			}
		}
	}
	if !meshed {
		out.Skipped = fmt.Sprintf("namespace %s is not meshed (label %s: enabled) and the Service has no %s label", svc.Namespace, LabelSidecarInjection, resource.LabelMesh)
		return out
	}
	out.Mesh = meshOf(in)
	switch {
	case !in.MeshExists(out.Mesh):
		out.Skipped = fmt.Sprintf("mesh %q does not exist", out.Mesh)
	case svc.Annotations[AnnotationIgnore] == "true":
		out.Skipped = "annotated " + AnnotationIgnore + ": true"
	case svc.Annotations[AnnotationGateway] != "":
		out.Skipped = "a gateway's Service (annotation " + AnnotationGateway + ")"
	case svc.Labels[LabelZoneProxyType] != "":
		out.Skipped = "a zone proxy's Service"
	case len(in.Endpoints) > 0 && in.Endpoints[0].Pod != nil && in.Endpoints[0].Pod.Gateway:
		out.Skipped = "a gateway's Service (its Pods are gateways)"
	case svc.Type == "ExternalName" || len(svc.ClusterIPs) == 0 || svc.ClusterIPs[0] == "":
		out.Skipped = "no cluster IP (ExternalName)"
	}
	if out.Skipped != "" {
		return out
	}
	ports, problems := translatePorts(svc)
	out.Problems = problems
	if len(ports) == 0 {
		out.Skipped = "no TCP port"
		return out
	}
	export, problem := exportMode(svc, in.ExportDefault)
	if problem != "" {
		out.Problems = append(out.Problems, problem)
	}
	base := baseLabels(svc, out.Mesh)
	if svc.ClusterIPs[0] == "None" {
		headless(in, &out, base, ports, export)
		return out
	}
	labels := maps.Clone(base)
	labels[resource.LabelHeadless] = "false"
	selector := maps.Clone(svc.Selector)
	if selector == nil {
		selector = map[string]string{}
	}
	selector[resource.LabelNamespace] = svc.Namespace
	spec := &resource.MeshServiceSpec{
		Selector: resource.MeshServiceSelector{DataplaneLabels: &resource.LabelSelector{MatchLabels: selector}},
		Ports:    ports,
		Export:   export,
	}
	// seed 004: <name>_<namespace>_svc_<port> answers in DNS too, with its
	// dash and dot aliases, on the ClusterIP.
	for _, p := range ports {
		tag := fmt.Sprintf("%s_%s_svc_%d", svc.Name, svc.Namespace, p.Port)
		if validate.LabelValue(tag) != "" {
			out.Problems = append(out.Problems, fmt.Sprintf("service tag %s is longer than 63 characters: it does not answer in DNS", tag))
			continue
		}
		spec.Identities = append(spec.Identities, resource.Identity{Type: resource.IdentityServiceTag, Value: tag})
	}
	var vips []resource.VIP
	for _, ip := range svc.ClusterIPs {
		if ip != "" && ip != "None" {
			vips = append(vips, resource.VIP{IP: ip, Type: resource.VIPKubernetes})
		}
	}
	out.add(in, svc.Namespace, svc.Name, labels, spec, vips)
	return out
}

func (out *Output) add(in Input, ns, name string, labels map[string]string, spec *resource.MeshServiceSpec, vips []resource.VIP) {
	full := name + "." + ns
	if ns == in.SystemNamespace {
		full = name
	}
	obj := &resource.Object{Kind: resource.MeshService, Mesh: out.Mesh, Name: full, Labels: labels, Spec: spec,
		Status: &resource.ServiceStatus{VIPs: vips}}
	spec.Default()
	// The name a MeshService gets in hostnames is the Kubernetes name.
	check := *obj
	check.Name = name
	if errs := resource.Validate(&check); len(errs) > 0 {
		out.Problems = append(out.Problems, fmt.Sprintf("MeshService %s/%s would be invalid: %v", ns, name, errs))
		return
	}
	out.Services = append(out.Services, obj)
}

// meshOf returns the mesh of a meshed Service: its kuma.io/mesh label,
// else its namespace's (label or annotation), else "default".
func meshOf(in Input) string {
	if m := in.Service.Labels[resource.LabelMesh]; m != "" {
		return m
	}
	if ns := in.Namespace; ns != nil {
		if m := ns.Labels[resource.LabelMesh]; m != "" {
			return m
		}
		if m := ns.Annotations[resource.LabelMesh]; m != "" {
			return m
		}
	}
	return "default"
}

// baseLabels are the labels of every MeshService of svc: the Service's
// own, then the ones that say where it comes from.
func baseLabels(svc Service, mesh string) map[string]string {
	l := maps.Clone(svc.Labels)
	if l == nil {
		l = map[string]string{}
	}
	for _, k := range []string{resource.LabelOrigin, resource.LabelZone, resource.LabelDisplayName, resource.LabelNamespace} {
		delete(l, k) // the store computes these
	}
	l[resource.LabelMesh] = mesh
	l[resource.LabelServiceName] = svc.Name
	l[resource.LabelManagedBy] = ManagedBy
	l[resource.LabelEnv] = resource.EnvKubernetes
	return l
}

// translatePorts keeps the TCP ports, with their names and the
// appProtocol meshnames knows (tcp otherwise).
func translatePorts(svc Service) ([]resource.Port, []string) {
	var ports []resource.Port
	var ignored, problems []string
	for _, p := range svc.Ports {
		if p.Protocol != "" && p.Protocol != "TCP" {
			ignored = append(ignored, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
			continue
		}
		// Kuma names an unnamed port by its number; a name that is all
		// digits reads as a port number in meshnames, so it stays unnamed
		// (and gets no SRV record).
		name := p.Name
		proto := strings.ToLower(p.AppProtocol)
		switch proto {
		case "", resource.ProtocolTCP:
			proto = resource.ProtocolTCP
		case resource.ProtocolHTTP, resource.ProtocolHTTP2, resource.ProtocolGRPC:
		case "kubernetes.io/h2c":
			proto = resource.ProtocolHTTP2
		default:
			problems = append(problems, fmt.Sprintf("port %d: appProtocol %q is not one of tcp, http, http2, grpc: using tcp", p.Port, p.AppProtocol))
			proto = resource.ProtocolTCP
		}
		var target *resource.IntOrString
		if p.TargetPort != nil {
			t := *p.TargetPort
			target = &t
		}
		ports = append(ports, resource.Port{Name: name, Port: p.Port, TargetPort: target, AppProtocol: proto})
	}
	if len(ignored) > 0 {
		problems = append(problems, "ignored ports that are not TCP: "+strings.Join(ignored, ", "))
	}
	return ports, problems
}

// exportMode reads the kuma.io/export-mode annotation (seed 002); a
// ServiceExport exports the service whatever it says.
func exportMode(svc Service, def string) (*resource.Export, string) {
	if svc.Exported {
		return &resource.Export{Mode: resource.ExportAll}, ""
	}
	v, ok := svc.Annotations[resource.LabelExportMode]
	if !ok {
		return &resource.Export{Mode: def}, ""
	}
	for _, m := range []string{resource.ExportAll, resource.ExportNone} {
		if strings.EqualFold(v, m) {
			return &resource.Export{Mode: m}, ""
		}
	}
	return &resource.Export{Mode: def}, fmt.Sprintf("annotation %s: %q is not All or None: using %s", resource.LabelExportMode, v, def)
}

// headless adds one MeshService per Pod endpoint: named after the Pod,
// selecting its Dataplane, with the Pod's IPs.
func headless(in Input, out *Output, base map[string]string, ports []resource.Port, export *resource.Export) {
	svc := in.Service
	seen := map[string]bool{}
	for _, ep := range in.Endpoints {
		if ep.Pod == nil || len(ep.Addresses) == 0 || seen[ep.Pod.Name] {
			continue
		}
		seen[ep.Pod.Name] = true
		labels := maps.Clone(base)
		labels[resource.LabelHeadless] = "true"
		for _, k := range []string{LabelPodName, LabelPodIndex} {
			if v, ok := ep.Pod.Labels[k]; ok {
				labels[k] = v
			}
		}
		spec := &resource.MeshServiceSpec{
			Selector: resource.MeshServiceSelector{DataplaneRef: &resource.DataplaneRef{Name: ep.Pod.Name + "." + ep.Pod.Namespace}},
			Ports:    slices.Clone(ports),
			Export:   &resource.Export{Mode: export.Mode},
		}
		var vips []resource.VIP
		for _, a := range ep.Addresses {
			vips = append(vips, resource.VIP{IP: a, Type: resource.VIPKubernetes})
		}
		out.add(in, ep.Pod.Namespace, PodServiceName(ep.Pod.Name, svc.Name, svc.Namespace), labels, spec, vips)
	}
	slices.SortFunc(out.Services, func(a, b *resource.Object) int { return strings.Compare(a.Name, b.Name) })
}

// PodServiceName is the name of the MeshService of Pod pod behind headless
// Service svc in namespace ns, as Kuma names it: the Pod's name and a hash
// of the Service's name and namespace; when that would pass 63 characters,
// the Pod's name cut to 52 and a hash of the Pod's name too.
func PodServiceName(pod, svc, ns string) string {
	if len(pod)+11 > 63 {
		return pod[:52] + "-" + safeHash(svc+ns+pod)
	}
	return pod + "-" + safeHash(svc+ns)
}

// safeHash is Kubernetes' SafeEncodeString of the decimal FNV-32a of s:
// no vowels, so no words.
func safeHash(s string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	h := fnv.New32a()
	h.Write([]byte(s))
	d := []byte(strconv.FormatUint(uint64(h.Sum32()), 10))
	for i, c := range d {
		d[i] = alphabet[int(c)%len(alphabet)]
	}
	return string(d)
}
