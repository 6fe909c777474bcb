package kubeservices

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/s2dict"
)

// The Kubernetes objects, as far as the translation reads them.

type serviceObject struct {
	Metadata kubeapi.ObjectMeta `json:"metadata"`
	Spec     struct {
		Type       string            `json:"type"`
		ClusterIP  string            `json:"clusterIP"`
		ClusterIPs []string          `json:"clusterIPs"`
		Selector   map[string]string `json:"selector"`
		Ports      []struct {
			Name        string          `json:"name"`
			Protocol    string          `json:"protocol"`
			Port        int             `json:"port"`
			TargetPort  json.RawMessage `json:"targetPort"`
			AppProtocol string          `json:"appProtocol"`
		} `json:"ports"`
	} `json:"spec"`
}

// readAnnotations are the only annotations the translation reads; the
// others (kubectl's last-applied-configuration among them) are not kept.
var readAnnotations = []string{AnnotationIgnore, AnnotationGateway, resource.LabelExportMode, resource.LabelMesh, LabelSidecarInjection}

func keepRead(m map[string]string) map[string]string {
	var out map[string]string
	for _, k := range readAnnotations {
		if v, ok := m[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// DecodeService reads a Service.
func DecodeService(raw []byte) (Service, error) {
	var o serviceObject
	if err := json.Unmarshal(raw, &o); err != nil {
		return Service{}, fmt.Errorf("decode Service: %w", err)
	}
	s := Service{
		Namespace: o.Metadata.Namespace, Name: o.Metadata.Name,
		Labels: o.Metadata.Labels, Annotations: keepRead(o.Metadata.Annotations),
		Type: o.Spec.Type, ClusterIPs: o.Spec.ClusterIPs, Selector: o.Spec.Selector,
	}
	if len(s.ClusterIPs) == 0 && o.Spec.ClusterIP != "" {
		s.ClusterIPs = []string{o.Spec.ClusterIP}
	}
	for _, p := range o.Spec.Ports {
		sp := ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, AppProtocol: p.AppProtocol}
		if len(p.TargetPort) > 0 {
			var t resource.IntOrString
			if err := json.Unmarshal(p.TargetPort, &t); err != nil {
				return Service{}, fmt.Errorf("decode Service %s/%s: port %d: targetPort: %w", s.Namespace, s.Name, p.Port, err)
			}
			sp.TargetPort = &t
		}
		s.Ports = append(s.Ports, sp)
	}
	return s, nil
}

type namespaceObject struct {
	Metadata kubeapi.ObjectMeta `json:"metadata"`
}

// DecodeNamespace reads a namespace.
func DecodeNamespace(raw []byte) (Namespace, error) {
	var o namespaceObject
	if err := json.Unmarshal(raw, &o); err != nil {
		return Namespace{}, fmt.Errorf("decode Namespace: %w", err)
	}
	return Namespace{Name: o.Metadata.Name, Labels: o.Metadata.Labels, Annotations: keepRead(o.Metadata.Annotations)}, nil
}

// slice is what the translation keeps of an EndpointSlice.
type slice struct {
	service   string
	endpoints []sliceEndpoint
}

type sliceEndpoint struct {
	addresses []string
	pod       podRef
}

// podRef names the Pod behind an endpoint.
type podRef struct {
	namespace, name, uid string
}

type endpointSliceObject struct {
	Metadata  kubeapi.ObjectMeta `json:"metadata"`
	Endpoints []struct {
		Addresses []string `json:"addresses"`
		TargetRef *struct {
			Kind      string `json:"kind"`
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
			UID       string `json:"uid"`
		} `json:"targetRef"`
	} `json:"endpoints"`
}

// labelServiceName is the label of an EndpointSlice naming its Service.
const labelServiceName = "kubernetes.io/service-name"

func decodeSlice(raw []byte) (kubeapi.ObjectMeta, slice, error) {
	var o endpointSliceObject
	if err := json.Unmarshal(raw, &o); err != nil {
		return kubeapi.ObjectMeta{}, slice{}, fmt.Errorf("decode EndpointSlice: %w", err)
	}
	s := slice{service: o.Metadata.Labels[labelServiceName]}
	for _, ep := range o.Endpoints {
		e := sliceEndpoint{addresses: ep.Addresses}
		if r := ep.TargetRef; r != nil && r.Kind == "Pod" {
			e.pod = podRef{namespace: r.Namespace, name: r.Name, uid: r.UID}
			if e.pod.namespace == "" {
				e.pod.namespace = o.Metadata.Namespace
			}
		}
		s.endpoints = append(s.endpoints, e)
	}
	return o.Metadata, s, nil
}

type podObject struct {
	Metadata kubeapi.ObjectMeta `json:"metadata"`
}

// decodePod reads what the translation needs of a Pod.
func decodePod(raw []byte) (*Pod, string, error) {
	var o podObject
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, "", fmt.Errorf("decode Pod: %w", err)
	}
	p := &Pod{Namespace: o.Metadata.Namespace, Name: o.Metadata.Name, Gateway: o.Metadata.Annotations[AnnotationGateway] == "enabled"}
	for _, k := range []string{LabelPodName, LabelPodIndex} {
		if v, ok := o.Metadata.Labels[k]; ok {
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			p.Labels[k] = v
		}
	}
	return p, o.Metadata.UID, nil
}

// Packed is a Service as the controller keeps it between reconciles:
// compact JSON of the fields Translate reads, without its name and
// namespace (the key holds them), compressed against a dictionary of a
// typical Service (packedDict). Tens of thousands of Services held as
// maps and slices cost several times as much (BenchmarkKubeServiceView).
type Packed []byte

// packedSample is a typical Service as Pack lays it out before
// compressing: Services of a cluster differ in a few names, numbers and
// addresses, so against it the hundred bytes of a typical one's JSON
// shrink to about twenty (TestPack_Compresses).
const packedSample = `{"l":{"app":"backend"},"t":"ClusterIP","i":["10.96.0.1"],"s":{"app":"backend"},` +
	`"p":[{"n":"grpc","r":"TCP","p":9090,"t":"grpc"},{"n":"http","r":"TCP","p":80,"t":8080,"a":"http"}]}` +
	`{"t":"ClusterIP","i":["10.96.0.1"],"s":{"app":"backend"},"p":[{"n":"http","r":"TCP","p":80,"t":80,"a":"http"}]}`

// packedDict is the dictionary of packed Services, made on first use.
var packedDict = sync.OnceValue(func() *s2dict.Dict {
	d, err := s2dict.New([]byte(packedSample), []byte(`{"t":"ClusterIP"`), maxPacked)
	if err != nil {
		panic(fmt.Sprintf("kubeservices: %v", err)) // fixed data: the tests fail first
	}
	return d
})

// maxPacked bounds what Unpack decompresses: the API server stores an
// object of at most 1.5 MiB.
const maxPacked = 3 << 20

type packed struct {
	Labels      map[string]string `json:"l,omitempty"`
	Annotations map[string]string `json:"a,omitempty"`
	Type        string            `json:"t,omitempty"`
	ClusterIPs  []string          `json:"i,omitempty"`
	Selector    map[string]string `json:"s,omitempty"`
	Ports       []packedPort      `json:"p,omitempty"`
}

type packedPort struct {
	Name        string                `json:"n,omitempty"`
	Protocol    string                `json:"r,omitempty"`
	Port        int                   `json:"p"`
	TargetPort  *resource.IntOrString `json:"t,omitempty"`
	AppProtocol string                `json:"a,omitempty"`
}

// Pack packs s.
func Pack(s Service) Packed {
	p := packed{Labels: s.Labels, Annotations: s.Annotations, Type: s.Type, ClusterIPs: s.ClusterIPs, Selector: s.Selector}
	for _, sp := range s.Ports {
		p.Ports = append(p.Ports, packedPort(sp))
	}
	b, _ := json.Marshal(p) // maps of strings and plain structs always marshal
	return packedDict().Encode(nil, b)
}

// Unpack returns the Service namespace/name packed in b.
func (b Packed) Unpack(namespace, name string) (Service, error) {
	var p packed
	if err := packedDict().Decode(b, func(plain []byte) error { return json.Unmarshal(plain, &p) }); err != nil {
		return Service{}, fmt.Errorf("unpack Service %s/%s: %w", namespace, name, err)
	}
	s := Service{Namespace: namespace, Name: name, Labels: p.Labels, Annotations: p.Annotations, Type: p.Type, ClusterIPs: p.ClusterIPs, Selector: p.Selector}
	for _, pp := range p.Ports {
		s.Ports = append(s.Ports, ServicePort(pp))
	}
	return s, nil
}
