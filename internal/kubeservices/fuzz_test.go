package kubeservices

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshnames/meshnames/internal/resource"
)

// FuzzTranslate decodes arbitrary Services and EndpointSlices and
// translates them: no panic, a Service packed and unpacked is the same, and every MeshService made is valid and
// carries the Service's addresses.
func FuzzTranslate(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"web","namespace":"shop","labels":{"kuma.io/mesh":"default"}},"spec":{"clusterIP":"10.96.0.1","ports":[{"port":80,"targetPort":"http","appProtocol":"HTTP"}]}}`), []byte(`{}`))
	f.Add([]byte(`{"metadata":{"name":"db","namespace":"data","labels":{"kuma.io/mesh":"default"},"annotations":{"kuma.io/export-mode":"none"}},"spec":{"clusterIP":"None","ports":[{"port":5432},{"port":53,"protocol":"UDP"}]}}`),
		[]byte(`{"metadata":{"name":"db-1","namespace":"data","labels":{"kubernetes.io/service-name":"db"}},"endpoints":[{"addresses":["10.0.0.1"],"targetRef":{"kind":"Pod","name":"db-0"}},{"addresses":[]}]}`))
	f.Add([]byte(`{"spec":{"type":"ExternalName"}}`), []byte(`{"endpoints":null}`))
	f.Fuzz(func(t *testing.T, svcJSON, sliceJSON []byte) {
		svc, err := DecodeService(svcJSON)
		if err != nil {
			return
		}
		// What the controller keeps between reconciles is the Service.
		back, err := Pack(svc).Unpack(svc.Namespace, svc.Name)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(svc, back, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("Pack then Unpack changed the Service (-decoded +unpacked):\n%s", d)
		}
		in := Input{Service: svc, MeshExists: func(string) bool { return true }, ExportDefault: resource.ExportAll, SystemNamespace: "meshnames-system"}
		if _, s, err := decodeSlice(sliceJSON); err == nil {
			for _, e := range s.endpoints {
				ep := Endpoint{Addresses: e.addresses}
				if e.pod.name != "" {
					ep.Pod = &Pod{Namespace: e.pod.namespace, Name: e.pod.name}
				}
				in.Endpoints = append(in.Endpoints, ep)
			}
		}
		out := Translate(in)
		if out.Skipped != "" && len(out.Services) > 0 {
			t.Fatalf("skipped (%s) but made %d MeshServices", out.Skipped, len(out.Services))
		}
		for _, o := range out.Services {
			check := *o
			check.Name = o.Labels[resource.LabelServiceName]
			if o.Labels[resource.LabelHeadless] == "true" {
				continue // named after the Pod; checked when made
			}
			if errs := resource.Validate(&check); len(errs) > 0 {
				t.Fatalf("an invalid MeshService was made: %v", errs)
			}
			if len(o.Status.(*resource.ServiceStatus).VIPs) == 0 {
				t.Fatalf("a MeshService without the Service's addresses: %+v", o)
			}
		}
	})
}
