package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

// multiZoneInput is the worked example of docs/multizone-services.md.
const multiZoneInput = `type: MeshService
name: redis
mesh: default
labels:
  app: redis
spec:
  ports:
  - name: main
    port: 6379
  - name: metrics
    port: 9121
    appProtocol: http
---
type: MeshService
name: redis-replica
mesh: default
labels:
  app: redis
spec:
  ports:
  - name: main
    port: 6379
---
type: MeshMultiZoneService
name: redis
mesh: default
spec:
  selector:
    meshService:
      matchLabels:
        app: redis
`

// multiZoneStatus is the part of a MeshMultiZoneService's status the
// test reads.
type multiZoneStatus struct {
	VIPs []struct {
		IP string `json:"ip"`
	} `json:"vips"`
	Conditions []struct {
		Type, Status, Reason, Message string
	} `json:"conditions"`
	Ports []struct {
		Name        string `json:"name"`
		Port        int    `json:"port"`
		AppProtocol string `json:"appProtocol"`
	} `json:"ports"`
	Zones []struct {
		Name string `json:"name"`
	} `json:"zones"`
	MeshServices []struct {
		Name, Namespace, Zone, Mesh string
	} `json:"meshServices"`
}

// summary flattens what a zone computed into lines a test can compare.
func (s multiZoneStatus) summary() []string {
	var out []string
	for _, m := range s.MeshServices {
		out = append(out, "service "+m.Name+" ns="+m.Namespace+" zone="+m.Zone+" mesh="+m.Mesh)
	}
	for _, z := range s.Zones {
		out = append(out, "zone "+z.Name)
	}
	for _, p := range s.Ports {
		out = append(out, "port "+itoa(p.Port)+"/"+p.AppProtocol+" "+p.Name)
	}
	for _, c := range s.Conditions {
		if c.Type == "MeshServicesMatched" || c.Type == "PortsConsistent" {
			out = append(out, "condition "+c.Type+" "+c.Status+" "+c.Reason+": "+c.Message)
		}
	}
	return out
}

func getMultiZone(api, name string) (multiZoneStatus, error) {
	var doc struct {
		Status multiZoneStatus `json:"status"`
	}
	resp, err := http.Get(api + "/meshes/default/meshmultizoneservices/" + name)
	if err != nil {
		return doc.Status, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&doc)
	return doc.Status, err
}

// waitMultiZone polls the API until the MeshMultiZoneService's summary
// equals want.
func waitMultiZone(t *testing.T, api, name string, want ...string) multiZoneStatus {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		st, err := getMultiZone(api, name)
		if err == nil {
			if got = st.summary(); cmp.Equal(want, got) {
				return st
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("status of MeshMultiZoneService %s (-want +got):\n%s", name, cmp.Diff(want, got))
	return multiZoneStatus{}
}

// TestMultiZoneServices_Standalone applies the worked example to a real
// standalone server and reads back what it computed: the matched
// MeshServices, their zone, the common ports and the condition naming the
// port left out; the CLI's views of it; the DNS answer of its hostname;
// and the status following a relabel.
func TestMultiZoneServices_Standalone(t *testing.T) {
	p := start(t, "server", "--data-dir", t.TempDir())
	p.waitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, stderr, err := run(t, ctx, []byte(multiZoneInput), "apply", "-f", "-", "--server", p.api); err != nil {
		t.Fatalf("apply: %v\n%s%s", err, out, stderr)
	}

	st := waitMultiZone(t, p.api, "redis",
		"service redis ns= zone=default mesh=default",
		"service redis-replica ns= zone=default mesh=default",
		"zone default",
		"port 6379/tcp main",
		"condition MeshServicesMatched True MatchesFound: 2 MeshServices of mesh default match",
		"condition PortsConsistent False PortsDiffer: ports not on every matched MeshService are left out: 9121/http is not on redis-replica (zone default)",
	)

	// Its own VIP from the 243/8 pool, answered for its default hostname.
	deadline := time.Now().Add(15 * time.Second)
	for len(st.VIPs) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		st, _ = getMultiZone(p.api, "redis")
	}
	if len(st.VIPs) == 0 || !strings.HasPrefix(st.VIPs[0].IP, "243.") {
		t.Fatalf("VIPs of the MeshMultiZoneService = %+v, want one from 243.0.0.0/8", st.VIPs)
	}
	answer := ""
	for deadline := time.Now().Add(15 * time.Second); answer != st.VIPs[0].IP && time.Now().Before(deadline); {
		if answer = answerA(query(t, p.dns, "redis.mzsvc.mesh.local", dns.TypeA)); answer != st.VIPs[0].IP {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if answer != st.VIPs[0].IP {
		t.Errorf("redis.mzsvc.mesh.local answers %q, want the VIP %s", answer, st.VIPs[0].IP)
	}

	out, stderr, err := run(t, ctx, nil, "get", "meshmultizoneservices", "-o", "wide", "--server", p.api)
	if err != nil {
		t.Fatalf("get -o wide: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "MESHSERVICES   ZONES") ||
		!strings.Contains(lines[1], "6379/tcp   "+st.VIPs[0].IP+"   2              default   redis.mzsvc.mesh.local") {
		t.Errorf("get meshmultizoneservices -o wide:\n%s", out)
	}
	out, stderr, err = run(t, ctx, nil, "inspect", "mzsvc", "-o", "json", "--server", p.api)
	if err != nil {
		t.Fatalf("inspect mzsvc: %v\n%s", err, stderr)
	}
	var listing struct {
		Services []struct {
			Name          string `json:"name"`
			Computed      bool   `json:"computed"`
			PortsDeclared bool   `json:"portsDeclared"`
			MeshServices  []struct{ Name string }
		} `json:"multiZoneServices"`
	}
	if err := json.Unmarshal([]byte(out), &listing); err != nil || len(listing.Services) != 1 ||
		!listing.Services[0].Computed || listing.Services[0].PortsDeclared || len(listing.Services[0].MeshServices) != 2 {
		t.Errorf("inspect mzsvc -o json (%v):\n%s", err, out)
	}

	// Relabelled away, redis-replica leaves; redis's ports are all common.
	replica := strings.Replace(strings.Split(multiZoneInput, "---\n")[1], "app: redis", "app: cache", 1)
	if _, stderr, err := run(t, ctx, []byte(replica), "apply", "-f", "-", "--server", p.api); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	waitMultiZone(t, p.api, "redis",
		"service redis ns= zone=default mesh=default",
		"zone default",
		"port 6379/tcp main",
		"port 9121/http metrics",
		"condition MeshServicesMatched True MatchesFound: 1 MeshService of mesh default matches",
	)
}
