package bench

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/meshnames/meshnames/internal/kubeservices"
)

// BenchmarkKubeServiceView compares what the Kubernetes mode keeps of a
// Service with what a client-go informer with a transform would keep: n
// Services as the API server sends them (managed fields, kubectl's
// last-applied annotation, labels, a selector, two ports), decoded into
// kubeservices.Service (the fields the mode reads, annotations it does not
// read dropped) and into corev1.Service with its managed fields and the
// last-applied annotation cleared, as an informer's transform would. It
// reports the heap each holds per Service once collected.
func BenchmarkKubeServiceView(b *testing.B) {
	const n = 10_000
	raws := make([][]byte, n)
	for i := range raws {
		name, ns := fmt.Sprintf("svc-%05d", i), fmt.Sprintf("ns-%03d", i/100)
		last := fmt.Sprintf(`{"apiVersion":"v1","kind":"Service","metadata":{"name":%q,"namespace":%q},"spec":{"selector":{"app":%q},"ports":[{"name":"http","port":80}]}}`, name, ns, name)
		raws[i] = fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Service","metadata":{"name":%q,"namespace":%q,"uid":"6f1c1e0e-3b0e-4b6e-9a55-%012d","resourceVersion":"%d",
"creationTimestamp":"2026-12-01T10:00:00Z","labels":{"app":%q,"team":"shop"},"annotations":{"kubectl.kubernetes.io/last-applied-configuration":%q},
"managedFields":[{"manager":"kubectl-client-side-apply","operation":"Update","apiVersion":"v1","time":"2026-12-01T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:app":{},"f:team":{}}},"f:spec":{"f:internalTrafficPolicy":{},"f:ports":{".":{},"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{},"f:protocol":{},"f:targetPort":{}}},"f:selector":{},"f:sessionAffinity":{},"f:type":{}}}}]},
"spec":{"ports":[{"name":"http","protocol":"TCP","port":80,"targetPort":8080,"appProtocol":"http"},{"name":"grpc","protocol":"TCP","port":9090,"targetPort":"grpc"}],"selector":{"app":%q},
"clusterIP":"10.96.%d.%d","clusterIPs":["10.96.%d.%d"],"type":"ClusterIP","sessionAffinity":"None","ipFamilies":["IPv4"],"ipFamilyPolicy":"SingleStack","internalTrafficPolicy":"Cluster"},"status":{"loadBalancer":{}}}`,
			name, ns, i, 1000+i, name, last, name, i/250, i%250+1, i/250, i%250+1)
	}
	held := func(decode func(raw []byte) any) float64 {
		keep := make([]any, n)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i, raw := range raws {
			keep[i] = decode(raw)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(keep)
		return float64(after.HeapAlloc-before.HeapAlloc) / n
	}
	for range b.N {
		mine := held(func(raw []byte) any {
			s, err := kubeservices.DecodeService(raw)
			if err != nil {
				b.Fatal(err)
			}
			return &s
		})
		packed := held(func(raw []byte) any {
			s, err := kubeservices.DecodeService(raw)
			if err != nil {
				b.Fatal(err)
			}
			return kubeservices.Pack(s)
		})
		typed := held(func(raw []byte) any {
			var s corev1.Service
			if err := json.Unmarshal(raw, &s); err != nil {
				b.Fatal(err)
			}
			s.ManagedFields = nil
			delete(s.Annotations, corev1.LastAppliedConfigAnnotation)
			return &s
		})
		b.ReportMetric(mine, "B/service-decoded")
		b.ReportMetric(packed, "B/service-packed")
		b.ReportMetric(typed, "B/service-informer-transformed")
	}
}
