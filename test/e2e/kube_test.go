package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/kubeapi/kubetest"
)

// The Kubernetes tests share one real kube-apiserver and etcd, started by
// the first of them and stopped by TestMain; each has the cluster to itself
// (kubetest.Cluster.Fresh) and its own namespace (namespaces cannot be
// deleted without a controller-manager). meshnames runs as the user bound
// to the roles of meshnames install control-plane.
var (
	kubeOnce    sync.Once
	kubeShared  *kubetest.Cluster
	kubeStartup error
)

func stopKube() {
	if kubeShared != nil {
		kubeShared.Stop()
	}
}

// kube returns the shared cluster, given to t alone until t ends.
func kube(t *testing.T) *kubetest.Cluster {
	t.Helper()
	if err := kubetest.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	kubeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c, err := kubetest.Start(ctx)
		if err == nil {
			err = c.Setup(ctx)
		}
		kubeShared, kubeStartup = c, err
	})
	if kubeStartup != nil {
		t.Fatalf("starting the API server: %v", kubeStartup)
	}
	kubeShared.Fresh(t)
	return kubeShared
}

// kubeServe starts meshnames in env kubernetes on c as zone east.
func kubeServe(t *testing.T, c *kubetest.Cluster, name string, args ...string) *proc {
	t.Helper()
	args = append([]string{"--env", "kubernetes", "--kubeconfig", c.MeshnamesKubeconfig, "--zone", "east"}, args...)
	return start(t, name, args...)
}

// kubeApply applies YAML with $NS replaced by ns.
func kubeApply(t *testing.T, c *kubetest.Cluster, ns, yaml string) {
	t.Helper()
	if err := c.Apply(t.Context(), []byte(strings.ReplaceAll(yaml, "$NS", ns))); err != nil {
		t.Fatal(err)
	}
}

func meshedNamespace(t *testing.T, c *kubetest.Cluster, ns string) {
	kubeApply(t, c, ns, "apiVersion: v1\nkind: Namespace\nmetadata: {name: $NS, labels: {kuma.io/sidecar-injection: enabled}}\n")
}

// msView is what the tests read of a MeshService through meshnames' API.
type msView struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	Status struct {
		Addresses []struct {
			Hostname string `json:"hostname"`
			Status   string `json:"status"`
		} `json:"addresses"`
		VIPs []struct {
			IP   string `json:"ip"`
			Type string `json:"type"`
		} `json:"vips"`
		Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
	} `json:"status"`
}

func getMS(api, name string) (*msView, error) {
	resp, err := http.Get(api + "/meshes/default/meshservices/" + name)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", name, resp.Status)
	}
	var m msView
	return &m, json.NewDecoder(resp.Body).Decode(&m)
}

// waitMS polls meshnames' API until cond holds for MeshService name.
func waitMS(t *testing.T, api, name, what string, within time.Duration, cond func(*msView) bool) *msView {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		m, err := getMS(api, name)
		if err == nil && cond(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s not reached within %s: %+v, %v", name, what, within, m, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func clusterIP(t *testing.T, c *kubetest.Cluster, ns, name string) string {
	t.Helper()
	var s struct {
		Spec struct {
			ClusterIP string `json:"clusterIP"`
		} `json:"spec"`
	}
	if err := c.Client.Get(t.Context(), kubeapi.Services, ns, name, &s); err != nil {
		t.Fatal(err)
	}
	return s.Spec.ClusterIP
}

// TestKube_ServiceToDNS: a Service of a meshed namespace becomes a
// MeshService with its ClusterIP as VIP and the hostname of seed 001's
// local Kubernetes generator, and DNS answers that name, the service tag
// and its aliases (seed 004) with the ClusterIP; deleting the Service
// takes it all away.
func TestKube_ServiceToDNS(t *testing.T) {
	c := kube(t)
	p := kubeServe(t, c, "meshnames")
	p.waitReady(60 * time.Second)
	meshedNamespace(t, c, "shop")
	// Every state of the MeshService as the API server stores it.
	msr := kubeapi.Resource{Group: "kuma.io", Version: "v1alpha1", Resource: "meshservices", Namespaced: true}
	var list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := c.Client.Get(t.Context(), msr, "shop", "", &list); err != nil {
		t.Fatal(err)
	}
	w, err := c.Client.Watch(t.Context(), msr, "shop", kubeapi.WatchOptions{ResourceVersion: list.Metadata.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	kubeApply(t, c, "shop", `apiVersion: v1
kind: Service
metadata: {name: web, namespace: $NS}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, appProtocol: http}]
`)
	ip := clusterIP(t, c, "shop", "web")
	// Every status the API server stores has the ClusterIP: the first
	// status write carries it (with the hostname, unless the hostnames
	// controller had not seen the service yet), and no later one takes it
	// away (checked once the MeshService is deleted, below).
	states := make(chan error, 1)
	go func() {
		for {
			ev, err := w.Next()
			if err != nil {
				states <- fmt.Errorf("watching the MeshService: %w", err)
				return
			}
			if ev.Type == kubeapi.Deleted {
				states <- nil
				return
			}
			var ms struct {
				Status *struct {
					Addresses []struct{ Hostname string } `json:"addresses"`
					VIPs      []struct{ IP string }       `json:"vips"`
				} `json:"status"`
			}
			if err := json.Unmarshal(ev.Object, &ms); err != nil {
				states <- err
				return
			}
			if ms.Status != nil && (len(ms.Status.VIPs) != 1 || ms.Status.VIPs[0].IP != ip) {
				states <- fmt.Errorf("a stored status of the MeshService without its ClusterIP %s: %+v", ip, *ms.Status)
				return
			}
		}
	}()
	waitMS(t, p.api, "web.shop", "hostname and ClusterIP", 30*time.Second, func(m *msView) bool {
		return m != nil && len(m.Status.VIPs) == 1 && m.Status.VIPs[0].IP == ip && m.Status.VIPs[0].Type == "Kubernetes" &&
			// The generated name, then the service tag's name and aliases.
			len(m.Status.Addresses) == 4 && m.Status.Addresses[0].Hostname == "web.shop.svc.mesh.local" && m.Status.Addresses[0].Status == "Available" &&
			m.Status.Addresses[1].Hostname == "web_shop_svc_80.mesh" && m.Status.Addresses[1].Status == "Available"
	})
	for _, name := range []string{"web.shop.svc.mesh.local", "web_shop_svc_80.mesh", "web-shop-svc-80.mesh", "web.shop.svc.80.mesh"} {
		waitDNS(t, p.dns, name, ip)
	}
	// The status shows in the custom resource too (kubectl get).
	var cr struct {
		Status struct {
			VIPs []struct{ IP string } `json:"vips"`
		} `json:"status"`
	}
	if err := c.Client.Get(t.Context(), kubeapi.Resource{Group: "kuma.io", Version: "v1alpha1", Resource: "meshservices", Namespaced: true}, "shop", "web", &cr); err != nil {
		t.Fatal(err)
	}
	if len(cr.Status.VIPs) != 1 || cr.Status.VIPs[0].IP != ip {
		t.Errorf("the MeshService custom resource's status: %+v", cr.Status)
	}
	if err := c.Client.Delete(t.Context(), kubeapi.Services, "shop", "web", kubeapi.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	waitMS(t, p.api, "web.shop", "deleted", 30*time.Second, func(m *msView) bool { return m == nil })
	if err := <-states; err != nil {
		t.Error(err)
	}
	waitDNSCode(t, p.dns, "web.shop.svc.mesh.local", dns.RcodeNameError)
}

func waitDNS(t *testing.T, addr, name, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := resolveA(addr, name)
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("DNS %s = %q, %v; want %s", name, got, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitDNSCode(t *testing.T, addr, name string, code int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), dns.TypeA)
		r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, addr)
		if err == nil && r.Rcode == code {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("DNS %s: %v %v, want rcode %s", name, r, err, dns.RcodeToString[code])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// meshServiceCR is a MeshService written with kubectl: it gets its VIP from
// the pool (no Service behind it).
func meshServiceCR(ns, name string) string {
	return fmt.Sprintf(`apiVersion: kuma.io/v1alpha1
kind: MeshService
metadata: {name: %s, namespace: %s, labels: {kuma.io/mesh: default}}
spec:
  ports: [{port: 80}]
---
`, name, ns)
}

// TestKube_LeaderHandover runs two instances: one leads; stopped, the
// other takes over at once (the lease is released); killed, the other
// takes over after the lease's silence. Each leader makes the MeshServices
// of Services created while it leads.
func TestKube_LeaderHandover(t *testing.T) {
	c := kube(t)
	a := kubeServe(t, c, "a", haFlags...)
	b := kubeServe(t, c, "b", haFlags...)
	a.waitReady(60 * time.Second)
	b.waitReady(60 * time.Second)
	meshedNamespace(t, c, "handover")
	service := func(name string) {
		kubeApply(t, c, "handover", fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: $NS}\nspec:\n  ports: [{port: 80}]\n", name))
	}
	lead, view := waitLeader(t, 30*time.Second, a, b)
	service("one")
	waitMS(t, lead.api, "one.handover", "made by the first leader", 30*time.Second, func(m *msView) bool { return m != nil && len(m.Status.VIPs) == 1 })

	other := map[*proc]*proc{a: b, b: a}[lead]
	if err := lead.stop(20 * time.Second); err != nil {
		t.Fatalf("stopping the leader: %v", err)
	}
	start := time.Now()
	next, nextView := waitLeader(t, haLease, other)
	if nextView.Term <= view.Term {
		t.Errorf("term after a handover = %d, want more than %d", nextView.Term, view.Term)
	}
	t.Logf("handover after SIGTERM took %s", time.Since(start))
	service("two")
	waitMS(t, next.api, "two.handover", "made by the second leader", 30*time.Second, func(m *msView) bool { return m != nil && len(m.Status.VIPs) == 1 })

	// The first comes back as a follower; the leader is killed.
	again := kubeServe(t, c, "a-again", haFlags...)
	again.waitReady(60 * time.Second)
	next.kill()
	start = time.Now()
	third, thirdView := waitLeader(t, 4*haLease, again)
	if thirdView.Term <= nextView.Term {
		t.Errorf("term after a takeover = %d, want more than %d", thirdView.Term, nextView.Term)
	}
	t.Logf("takeover after kill -9 took %s (lease %s)", time.Since(start), haLease)
	service("three")
	waitMS(t, third.api, "three.handover", "made by the third leader", 30*time.Second, func(m *msView) bool { return m != nil && len(m.Status.VIPs) == 1 })
}

// TestKube_KillDuringWrites kills the leader with SIGKILL while it writes:
// MeshServices for many Services, and pool VIPs for many MeshServices
// written with kubectl. The other instance takes over and finishes: every
// Service has exactly its MeshService with its ClusterIP, and no two
// MeshServices share a VIP.
func TestKube_KillDuringWrites(t *testing.T) {
	c := kube(t)
	a := kubeServe(t, c, "a", haFlags...)
	b := kubeServe(t, c, "b", haFlags...)
	a.waitReady(60 * time.Second)
	b.waitReady(60 * time.Second)
	lead, _ := waitLeader(t, 30*time.Second, a, b)
	other := map[*proc]*proc{a: b, b: a}[lead]
	const ns = "crash"
	meshedNamespace(t, c, ns)
	const n = 150
	var svcs, crs strings.Builder
	for i := range n {
		fmt.Fprintf(&svcs, "apiVersion: v1\nkind: Service\nmetadata: {name: s%d, namespace: $NS}\nspec:\n  ports: [{port: 80}]\n---\n", i)
		crs.WriteString(meshServiceCR(ns, fmt.Sprintf("m%d", i)))
	}
	done := make(chan error, 2)
	go func() { done <- c.Apply(context.Background(), []byte(strings.ReplaceAll(svcs.String(), "$NS", ns))) }()
	go func() { done <- c.Apply(context.Background(), []byte(crs.String())) }()
	// Kill the leader once it has written some of both.
	deadline := time.Now().Add(60 * time.Second)
	for {
		vips, err := listVIPs(lead.api)
		written := 0
		for _, ips := range vips {
			if len(ips) > 0 {
				written++
			}
		}
		if err == nil && written >= n/4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader wrote %d VIPs in 60 s (%v)", written, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	lead.kill()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	waitLeader(t, 4*haLease, other)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("s%d.%s", i, ns), fmt.Sprintf("m%d.%s", i, ns))
	}
	got := waitAllVIPs(t, other.api, want, 2*time.Minute)
	holder := map[string]string{}
	for name, ips := range got {
		for _, ip := range ips {
			if h, dup := holder[ip]; dup {
				t.Errorf("VIP %s is held by %s and %s", ip, h, name)
			}
			holder[ip] = name
		}
	}
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		if ip := clusterIP(t, c, ns, name); got[name+"."+ns][0] != ip {
			t.Errorf("%s: VIP %v, want its ClusterIP %s", name, got[name+"."+ns], ip)
		}
	}
	if len(got) != 2*n {
		t.Errorf("%d MeshServices, want %d: a Service got more than one", len(got), 2*n)
	}
}

// TestKube_QuarantineSurvivesRestart deletes a MeshService and restarts
// meshnames with SIGKILL: the deleted service's VIP, the only free address
// of a small pool, stays in quarantine (a Lease in the system namespace),
// so a new service waits instead of getting it.
func TestKube_QuarantineSurvivesRestart(t *testing.T) {
	c := kube(t)
	flags := []string{"--vip-cidr-mesh-service", "10.10.0.0/30", "--vip-quarantine", "10m"}
	first := kubeServe(t, c, "first", flags...)
	first.waitReady(60 * time.Second)
	const ns = "meshnames-system"
	kubeApply(t, c, ns, meshServiceCR(ns, "a")+meshServiceCR(ns, "b"))
	vipA := waitMS(t, first.api, "a", "a VIP", 30*time.Second, func(m *msView) bool { return m != nil && len(m.Status.VIPs) == 1 }).Status.VIPs[0].IP
	waitMS(t, first.api, "b", "a VIP", 30*time.Second, func(m *msView) bool { return m != nil && len(m.Status.VIPs) == 1 })
	if err := c.Client.Delete(t.Context(), kubeapi.Resource{Group: "kuma.io", Version: "v1alpha1", Resource: "meshservices", Namespaced: true}, ns, "a", kubeapi.Preconditions{}); err != nil {
		t.Fatal(err)
	}
	// The controller has seen the deletion when the VIP's lease says it
	// was released.
	deadline := time.Now().Add(30 * time.Second)
	for !released(t, c, vipA) {
		if time.Now().After(deadline) {
			t.Fatalf("no quarantine lease for %s", vipA)
		}
		time.Sleep(20 * time.Millisecond)
	}
	first.kill()
	second := kubeServe(t, c, "second", flags...)
	second.waitReady(60 * time.Second)
	kubeApply(t, c, ns, meshServiceCR(ns, "c"))
	m := waitMS(t, second.api, "c", "waiting for an address", 30*time.Second, func(m *msView) bool {
		return m != nil && len(m.Status.Conditions) > 0
	})
	if len(m.Status.VIPs) != 0 || m.Status.Conditions[0].Reason != "PoolExhausted" {
		t.Fatalf("c: VIPs %+v, conditions %+v; want none and PoolExhausted (%s is in quarantine)", m.Status.VIPs, m.Status.Conditions, vipA)
	}
	t.Logf("c waits: %s", m.Status.Conditions[0].Message)
}

// released reports whether the store lease of VIP ip records its release.
func released(t *testing.T, c *kubetest.Cluster, ip string) bool {
	t.Helper()
	var list struct {
		Items []struct {
			Metadata kubeapi.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	if err := c.Client.Get(t.Context(), kubeapi.Leases, "meshnames-system", "", &list); err != nil && !errors.Is(err, kubeapi.ErrNotFound) {
		t.Fatal(err)
	}
	for _, l := range list.Items {
		a := l.Metadata.Annotations
		if a["meshnames.io/lease-name"] == "vip/"+ip && a["meshnames.io/lease-expires"] != "" {
			return true
		}
	}
	return false
}

// TestKube_InvalidObjectReported: a HostnameGenerator whose template does
// not parse is not used, and its status says why.
func TestKube_InvalidObjectReported(t *testing.T) {
	c := kube(t)
	p := kubeServe(t, c, "meshnames")
	p.waitReady(60 * time.Second)
	kubeApply(t, c, "meshnames-system", `apiVersion: kuma.io/v1alpha1
kind: HostnameGenerator
metadata: {name: broken, namespace: meshnames-system}
spec:
  template: "{{ .DisplayName "
  selector: {meshService: {matchLabels: {app: web}}}
`)
	r := kubeapi.Resource{Group: "kuma.io", Version: "v1alpha1", Resource: "hostnamegenerators", Namespaced: true}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var hg struct {
			Status struct {
				Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
			} `json:"status"`
		}
		if err := c.Client.Get(t.Context(), r, "meshnames-system", "broken", &hg); err != nil {
			t.Fatal(err)
		}
		if cs := hg.Status.Conditions; len(cs) == 1 && cs[0].Type == "Valid" && cs[0].Status == "False" {
			if !strings.Contains(cs[0].Message, "spec.template") {
				t.Errorf("the condition does not name the field: %q", cs[0].Message)
			}
			t.Logf("condition: %s", cs[0].Message)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Valid=False condition: %+v", hg.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Get(p.api + "/hostnamegenerators/broken")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET of an invalid generator through meshnames: %s, want 404", resp.Status)
	}
}
