package kubeservices

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPack_Compresses checks that the controller keeps a typical Service
// (as the API server sends it: a ClusterIP, a selector, a named port)
// in a fraction of its packed JSON, and reads it back unchanged: it keeps
// one for every Service of the cluster.
func TestPack_Compresses(t *testing.T) {
	for i := range 3 {
		raw := fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc-%05d","namespace":"ns-%03d","uid":"6f1c1e0e-3b0e-4b6e-9a55-%012d"},`+
			`"spec":{"ports":[{"name":"http","protocol":"TCP","port":80,"targetPort":80,"appProtocol":"http"}],"selector":{"app":"x"},`+
			`"clusterIP":"10.96.%d.%d","clusterIPs":["10.96.%d.%d"],"type":"ClusterIP","sessionAffinity":"None"}}`, i, i/100, i, i/250, i%250+1, i/250, i%250+1)
		svc, err := DecodeService(raw)
		if err != nil {
			t.Fatal(err)
		}
		p := Pack(svc)
		if len(p) > 32 {
			t.Errorf("a typical Service packs into %d bytes, want at most 32", len(p))
		}
		back, err := p.Unpack(svc.Namespace, svc.Name)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(svc, back); d != "" {
			t.Errorf("Pack then Unpack changed the Service (-decoded +unpacked):\n%s", d)
		}
	}
}
