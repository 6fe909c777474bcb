package resource

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMeshExternalService_ClusterNames(t *testing.T) {
	tests := []struct {
		name  string
		match string
		want  []string
	}{
		// seed 003 "Cluster name": httpbin_80 and httpbin_443.
		{"SeedExample", "- {type: Domain, value: httpbin.com, port: 80, protocol: http2}\n- {type: Domain, value: httpbin.com, port: 443, protocol: tls}\n",
			[]string{"httpbin_80", "httpbin_443"}},
		{"OnePerPortInPortOrder", "- {type: IP, value: 1.1.1.1, port: 8080}\n- {type: IP, value: 1.1.1.2, port: 443, protocol: tls}\n- {type: CIDR, value: 10.0.0.0/8, port: 8080}\n",
			[]string{"httpbin_443", "httpbin_8080"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := decodeDefault(t, extsvc("match:\n"+tt.match))
			if got := o.Spec.(*MeshExternalServiceSpec).ClusterNames(o.Name); !cmp.Equal(got, tt.want) {
				t.Errorf("ClusterNames = %q, want %q", got, tt.want)
			}
		})
	}
}
