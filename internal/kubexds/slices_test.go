package kubexds

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/kubeapi"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// sliceJSON is an EndpointSlice of Service svc in namespace shop with
// the given ports and endpoints (JSON fragments).
func sliceJSON(name, svc, addressType, ports string, endpoints ...string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"metadata":{"name":%q,"namespace":"shop","labels":{"kubernetes.io/service-name":%q}},
		"addressType":%q,"ports":[%s],"endpoints":[%s]}`, name, svc, addressType, ports, strings.Join(endpoints, ",")))
}

// epJSON is an endpoint of Pod pod at addr with conditions (JSON, or "").
func epJSON(pod, addr, conditions string) string {
	c := ""
	if conditions != "" {
		c = `,"conditions":` + conditions
	}
	return fmt.Sprintf(`{"addresses":[%q],"targetRef":{"kind":"Pod","name":%q,"namespace":"shop"}%s}`, addr, pod, c)
}

// show renders endpoints as "address:port" and "address:port draining".
func show(eps []Endpoint) []string {
	out := []string{}
	for _, e := range eps {
		s := e.Addr.String()
		if e.Draining {
			s += " draining"
		}
		out = append(out, s)
	}
	return out
}

// TestDecodeSlice_Conditions: the API's rules for the conditions (nil
// ready and serving are true, nil terminating false) decide which
// endpoints take traffic and which drain.
func TestDecodeSlice_Conditions(t *testing.T) {
	for _, tc := range []struct {
		name, conditions string
		want             []string
	}{
		{"none-given", ``, []string{"10.0.0.1:8080"}},
		{"ready", `{"ready":true,"serving":true,"terminating":false}`, []string{"10.0.0.1:8080"}},
		{"ready-nil-serving", `{"ready":true}`, []string{"10.0.0.1:8080"}},
		{"ready-while-terminating", `{"ready":true,"serving":true,"terminating":true}`, []string{"10.0.0.1:8080"}},
		{"terminating-serving", `{"ready":false,"serving":true,"terminating":true}`, []string{"10.0.0.1:8080 draining"}},
		{"terminating-nil-serving", `{"ready":false,"terminating":true}`, []string{"10.0.0.1:8080 draining"}},
		{"terminating-not-serving", `{"ready":false,"serving":false,"terminating":true}`, []string{}},
		{"not-ready", `{"ready":false,"serving":false,"terminating":false}`, []string{}},
		{"not-ready-but-serving", `{"ready":false,"serving":true}`, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSlices(nil, discard)
			handler{s}.Replace([]json.RawMessage{sliceJSON("web-1", "web", "IPv4", `{"name":"http","port":8080}`, epJSON("web-a", "10.0.0.1", tc.conditions))}, "1")
			got := show(s.Endpoints(ServiceName{"shop", "web"}, "", "http"))
			if !slices.Equal(got, tc.want) {
				t.Errorf("endpoints %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSlices_Endpoints: ports by the Service port's name with each
// slice's number (a named targetPort resolves Pod by Pod), dual stack,
// duplicates across slices, the Pod filter, and what is not an endpoint.
func TestSlices_Endpoints(t *testing.T) {
	s := NewSlices(nil, discard)
	web := ServiceName{"shop", "web"}
	handler{s}.Replace([]json.RawMessage{
		sliceJSON("web-1", "web", "IPv4", `{"name":"http","port":8080,"protocol":"TCP"},{"name":"admin","port":9901}`,
			epJSON("web-a", "10.0.0.1", ""), epJSON("web-b", "10.0.0.2", `{"ready":false,"serving":true,"terminating":true}`)),
		// Pods whose container port named http is another number.
		sliceJSON("web-2", "web", "IPv4", `{"name":"http","port":8081}`, epJSON("web-c", "10.0.0.3", "")),
		sliceJSON("web-3", "web", "IPv6", `{"name":"http","port":8080}`, epJSON("web-a", "fd00::1", "")),
		// During a move between slices an endpoint is in two: ready wins.
		sliceJSON("web-4", "web", "IPv4", `{"name":"http","port":8080}`, epJSON("web-b", "10.0.0.2", "")),
		// No number, another protocol, an FQDN slice: no endpoint.
		sliceJSON("web-5", "web", "IPv4", `{"name":"http"}`, epJSON("web-d", "10.0.0.4", "")),
		sliceJSON("web-6", "web", "IPv4", `{"name":"http","port":8080,"protocol":"UDP"}`, epJSON("web-e", "10.0.0.5", "")),
		sliceJSON("web-7", "web", "FQDN", `{"name":"http","port":8080}`, `{"addresses":["web.example.com"]}`),
		sliceJSON("other-1", "other", "IPv4", `{"name":"http","port":7000}`, epJSON("other-a", "10.0.9.1", "")),
		sliceJSON("db-1", "db", "IPv4", `{"port":5432}`, epJSON("db-0", "10.0.1.1", ""), `{"addresses":["10.0.1.2","10.0.1.99"]}`),
	}, "1")
	for _, tc := range []struct {
		name      string
		svc       ServiceName
		pod, port string
		want      []string
	}{
		{"named-port", web, "", "http", []string{"10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8081", "[fd00::1]:8080"}},
		{"other-port", web, "", "admin", []string{"10.0.0.1:9901", "10.0.0.2:9901 draining"}},
		{"one-pod", web, "web-a", "http", []string{"10.0.0.1:8080", "[fd00::1]:8080"}},
		{"no-such-port", web, "", "metrics", []string{}},
		{"unnamed-port-first-address-only", ServiceName{"shop", "db"}, "", "", []string{"10.0.1.1:5432", "10.0.1.2:5432"}},
		{"another-namespace", ServiceName{"lab", "web"}, "", "http", []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := show(s.Endpoints(tc.svc, tc.pod, tc.port)); !slices.Equal(got, tc.want) {
				t.Errorf("endpoints %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSlices_Notifies: every change names the Services it touches, the
// old one too when a slice moves to another Service; a relist names
// those it dropped.
func TestSlices_Notifies(t *testing.T) {
	s := NewSlices(nil, discard)
	var got []string
	cancel := s.Subscribe(func(n ServiceName) { got = append(got, n.String()) })
	h := handler{s}
	take := func() []string {
		out := got
		got = nil
		slices.Sort(out)
		return out
	}
	select {
	case <-s.Synced():
		t.Fatal("synced before the first list")
	default:
	}
	h.Replace([]json.RawMessage{sliceJSON("web-1", "web", "IPv4", `{"name":"http","port":8080}`, epJSON("web-a", "10.0.0.1", ""))}, "1")
	<-s.Synced()
	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"list", func() {}, []string{"shop/web"}},
		{"added", func() {
			h.Event(kubeapi.Event{Type: kubeapi.Added, Object: sliceJSON("api-1", "api", "IPv4", `{"port":80}`)})
		}, []string{"shop/api"}},
		{"moved", func() {
			h.Event(kubeapi.Event{Type: kubeapi.Modified, Object: sliceJSON("api-1", "web", "IPv4", `{"port":80}`)})
		}, []string{"shop/api", "shop/web"}},
		{"bookmark", func() { h.Event(kubeapi.Event{Type: kubeapi.Bookmark, Object: json.RawMessage(`{"metadata":{}}`)}) }, nil},
		{"deleted", func() {
			h.Event(kubeapi.Event{Type: kubeapi.Deleted, Object: sliceJSON("web-1", "web", "IPv4", `{"port":80}`)})
		}, []string{"shop/web"}},
		{"relist", func() {
			h.Replace([]json.RawMessage{sliceJSON("db-1", "db", "IPv4", `{"port":5432}`)}, "9")
		}, []string{"shop/db", "shop/web"}},
	}
	for _, st := range steps {
		st.do()
		if d := cmp.Diff(st.want, take()); d != "" {
			t.Errorf("%s: notified (-want +got):\n%s", st.name, d)
		}
	}
	if s.Len() != 1 {
		t.Errorf("%d slices kept after the relist, want 1", s.Len())
	}
	cancel()
	h.Event(kubeapi.Event{Type: kubeapi.Added, Object: sliceJSON("x-1", "x", "IPv4", `{"port":80}`)})
	if len(got) != 0 {
		t.Errorf("notified %v after cancel", got)
	}
}

// FuzzDecodeSlice: decoding any JSON never panics, and what it keeps is
// a TCP port with a number and endpoints with IP addresses.
func FuzzDecodeSlice(f *testing.F) {
	f.Add([]byte(sliceJSON("web-1", "web", "IPv4", `{"name":"http","port":8080}`, epJSON("web-a", "10.0.0.1", `{"ready":false,"terminating":true}`))))
	f.Add([]byte(`{"addressType":"IPv6","ports":[{"port":-1},{"port":70000}],"endpoints":[{"addresses":[]},{"addresses":["::ffff:10.0.0.1"]}]}`))
	f.Add([]byte(`{"ports":null,"endpoints":[{"conditions":{"ready":null}}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, sl, err := decodeSlice(raw)
		if err != nil {
			return
		}
		for _, p := range sl.ports {
			if p.number == 0 {
				t.Errorf("kept port %+v without a number", p)
			}
		}
		for _, e := range sl.endpoints {
			if !e.addr.IsValid() || e.addr != e.addr.Unmap() {
				t.Errorf("kept endpoint %+v", e)
			}
		}
	})
}
