package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/zonesync"
)

// zoneIngresses lists the ZoneIngresses p holds with kuma.io/zone: zone,
// the query xDS makes for "the ingresses of zone".
func zoneIngresses(t *testing.T, p *proc, zone string) []*resource.Object {
	t.Helper()
	resp, err := http.Get(p.api + "/zoneingresses?" + url.Values{"filter[labels.kuma.io/zone]": {zone}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Items []*resource.Object `json:"items"`
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/zoneingresses = %d", p.name, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	return page.Items
}

// TestMultizone_ZoneIngress: a ZoneIngress created in zone b reaches the
// global and zone a with kuma.io/zone: b, under the global's name, read
// only there; the global refuses its own; a change in b follows; a
// deletion in b removes it from both.
func TestMultizone_ZoneIngress(t *testing.T) {
	g, zones := startZones(t, "a", "b")
	a, b := zones[0], zones[1]
	ingress := func(advertised string) string {
		n := `"address":"192.168.0.1","port":10001`
		if advertised != "" {
			n += `,"advertisedAddress":"` + advertised + `","advertisedPort":443`
		}
		return `{"type":"ZoneIngress","name":"ingress-1","networking":{` + n + `}}`
	}
	if code := put(t, b.api, "/zoneingresses/ingress-1", ingress("")); code != http.StatusCreated {
		t.Fatalf("PUT the ingress in b = %d", code)
	}
	synced := zonesync.HashedName(resource.ZoneIngress, "", "ingress-1", "b", "")
	for _, p := range []*proc{g.proc, a} {
		var got []*resource.Object
		waitFor(t, 20*time.Second, p.name+" has b's ingress", func() bool { got = zoneIngresses(t, p, "b"); return len(got) == 1 })
		o := got[0]
		if o.Name != synced || o.Labels[resource.LabelZone] != "b" || o.Labels[resource.LabelDisplayName] != "ingress-1" {
			t.Errorf("%s holds %s with labels %v; want %s of zone b", p.name, o.Name, o.Labels, synced)
		}
		if n := o.Spec.(*resource.ZoneIngressSpec).Networking; n.Address != "192.168.0.1" || n.Port != 10001 {
			t.Errorf("%s: networking %+v", p.name, n)
		}
	}
	if got := zoneIngresses(t, b, "b"); len(got) != 1 || got[0].Name != "ingress-1" || got[0].Labels[resource.LabelOrigin] != resource.OriginZone {
		t.Errorf("b's own ingresses: %v; want ingress-1 only, of origin zone", got)
	}

	// Read-only where it was synced to; the global writes none of its own.
	path := "/zoneingresses/" + synced
	if code := put(t, a.api, path, strings.Replace(ingress(""), `"ingress-1"`, `"`+synced+`"`, 1)); code != http.StatusConflict {
		t.Errorf("PUT of b's ingress in a = %d, want 409", code)
	}
	if code := del(t, a.api, path); code != http.StatusConflict {
		t.Errorf("DELETE of b's ingress in a = %d, want 409", code)
	}
	if code := del(t, g.api, path); code != http.StatusMethodNotAllowed {
		t.Errorf("DELETE of b's ingress on the global = %d, want 405", code)
	}
	if code := put(t, g.api, "/zoneingresses/global-ingress", strings.Replace(ingress(""), "ingress-1", "global-ingress", 1)); code != http.StatusMethodNotAllowed {
		t.Errorf("PUT of an ingress on the global = %d, want 405", code)
	}
	out, errOut, err := run(t, context.Background(), nil, "get", "zoneingresses", "--server", a.api)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME ZONE ADDRESS ADVERTISED AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), synced+" b 192.168.0.1:10001 - ") {
		t.Errorf("get zoneingresses in a: %v %s\n%s", err, errOut, out)
	}

	// A change in b follows; the deletion in b removes it everywhere.
	if code := put(t, b.api, "/zoneingresses/ingress-1", ingress("ingress.b.example.com")); code != http.StatusOK {
		t.Fatalf("PUT the advertised ingress in b = %d", code)
	}
	waitFor(t, 20*time.Second, "a has b's advertised address", func() bool {
		got := zoneIngresses(t, a, "b")
		return len(got) == 1 && got[0].Spec.(*resource.ZoneIngressSpec).Networking.AdvertisedAddress == "ingress.b.example.com"
	})
	if code := del(t, b.api, "/zoneingresses/ingress-1"); code != http.StatusOK {
		t.Fatalf("DELETE the ingress in b = %d", code)
	}
	for _, p := range []*proc{g.proc, a} {
		waitFor(t, 20*time.Second, p.name+" no longer has b's ingress", func() bool { return len(zoneIngresses(t, p, "b")) == 0 })
	}
}
