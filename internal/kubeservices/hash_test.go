package kubeservices

import "testing"

// TestPodServiceName_Kuma checks the names against Kuma's own example
// (pod example-1 of Service example in namespace demo).
func TestPodServiceName_Kuma(t *testing.T) {
	if got := PodServiceName("example-1", "example", "demo"); got != "example-1-87ff74c98" {
		t.Errorf("PodServiceName = %q, want example-1-87ff74c98", got)
	}
}
