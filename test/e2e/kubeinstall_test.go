package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/kubeapi/kubetest"
)

// TestKube_InstallControlPlaneApplies applies the output of `meshnames
// install control-plane` to a real API server as `kubectl apply
// --server-side` would, each object first as a server-side dry run
// (dryRun=All) and then for real, in the order printed; applies it all
// again, which must pass its dry runs and change nothing; and then runs
// the Deployment's own `meshnames serve` arguments as its service account
// (a token from the TokenRequest API), so that the RBAC it installs is
// shown to be enough: the instance takes the leader Lease and names a
// Service.
func TestKube_InstallControlPlaneApplies(t *testing.T) {
	c := kube(t)
	ctx := t.Context()
	out, stderr, err := run(t, ctx, nil, "install", "control-plane", "--replicas", "3", "--zone", "east", "--image", "registry.example/meshnames:test")
	if err != nil {
		t.Fatalf("install control-plane: %v\n%s", err, stderr)
	}
	objs, err := kubetest.Objects([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Applier()
	if err != nil {
		t.Fatal(err)
	}
	a.Manager = "meshnames-install-test"
	var kinds []string
	versions := map[string]string{}
	key := func(o *unstructured.Unstructured) string {
		return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
	}
	for _, o := range objs {
		if _, err := a.Apply(ctx, o, true); err != nil {
			t.Fatal(err)
		}
		got, err := a.Apply(ctx, o, false)
		if err != nil {
			t.Fatal(err)
		}
		versions[key(o)] = got.GetResourceVersion()
		if !slices.Contains(kinds, o.GetKind()) {
			kinds = append(kinds, o.GetKind())
		}
	}
	want := []string{"Namespace", "CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
		"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service", "PodDisruptionBudget"}
	if !slices.Equal(kinds, want) {
		t.Errorf("kinds in order of the output: %v, want %v", kinds, want)
	}
	// Applying the same output again is a no-op that passes its dry runs.
	for _, o := range objs {
		if _, err := a.Apply(ctx, o, true); err != nil {
			t.Fatalf("again: %v", err)
		}
		got, err := a.Apply(ctx, o, false)
		if err != nil {
			t.Fatalf("again: %v", err)
		}
		if rv := got.GetResourceVersion(); rv != versions[key(o)] {
			t.Errorf("applying %s again changed it (resourceVersion %s -> %s)", key(o), versions[key(o)], rv)
		}
	}

	var dep struct {
		Spec struct {
			Replicas int `json:"replicas"`
			Template struct {
				Spec struct {
					ServiceAccountName string `json:"serviceAccountName"`
					Containers         []struct {
						Image string   `json:"image"`
						Args  []string `json:"args"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	deployments := kubeapi.Resource{Group: "apps", Version: "v1", Resource: "deployments", Namespaced: true}
	if err := c.Client.Get(ctx, deployments, "meshnames-system", "meshnames", &dep); err != nil {
		t.Fatal(err)
	}
	pod := dep.Spec.Template.Spec
	if dep.Spec.Replicas != 3 || pod.ServiceAccountName != "meshnames" || len(pod.Containers) != 1 || pod.Containers[0].Image != "registry.example/meshnames:test" {
		t.Fatalf("the stored Deployment: %+v", dep.Spec)
	}
	for _, svc := range []string{"meshnames-api", "meshnames-dns"} {
		if err := c.Client.Get(ctx, kubeapi.Services, "meshnames-system", svc, nil); err != nil {
			t.Errorf("Service %s: %v", svc, err)
		}
	}

	// The Deployment's arguments, but for the addresses and the data
	// directory, which the harness sets to loopback ports and a temporary
	// directory, as the service account the installation made.
	args := serveArgs(pod.Containers[0].Args)
	kc, err := c.ServiceAccountKubeconfig(ctx, "meshnames-system", pod.ServiceAccountName)
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, "installed", append(args, "--kubeconfig", kc)...)
	p.waitReady(60 * time.Second)
	waitLeader(t, 30*time.Second, p)
	// This cluster does not serve the MCS API: said once.
	p.waitLog(t, "Multi-Cluster Services API", 30*time.Second)
	meshedNamespace(t, c, "installed")
	kubeApply(t, c, "installed", kubeService("web", ""))
	waitMS(t, p.api, "web.installed", "named by the installed instance", 30*time.Second, func(m *msView) bool {
		return m != nil && len(m.Status.Addresses) > 0 && m.Status.Addresses[0].Hostname == "web.installed.svc.mesh.local" && m.Status.Addresses[0].Status == "Available"
	})
	if n := strings.Count(p.log.String(), "Multi-Cluster Services API"); n != 1 {
		t.Errorf("the log says %d times that the MCS API is not served, want once", n)
	}
}

// serveArgs drops "serve" and the flags the harness sets from a
// container's arguments.
func serveArgs(container []string) []string {
	var out []string
	for i := 1; i < len(container); i++ {
		switch container[i] {
		case "--api-addr", "--dns-addr", "--data-dir":
			i++
			continue
		}
		out = append(out, container[i])
	}
	return out
}
