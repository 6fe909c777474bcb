package dnsserver

import (
	"encoding/json"
	"flag"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/tools/txtar"

	"github.com/meshnames/meshnames/internal/decode"
	"github.com/meshnames/meshnames/internal/resource"
)

var update = flag.Bool("update", false, "rewrite the want section of testdata/table/*.txtar")

// cmpAddr compares addresses by value and ignores what entries keep for
// deriving SRV names (namesOf lists those).
var cmpAddr = cmp.Options{cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmpopts.IgnoreUnexported(Entry{})}

// TestExtract checks what one service contributes: which of its names, in
// which order, on which addresses, with which SRV ports.
func TestExtract(t *testing.T) {
	v4 := addrs("241.0.0.1")
	for _, tc := range []struct {
		name string
		obj  *resource.Object
		opts TableOptions
		want []wantName
		vips []netip.Addr
		// refused are the names not answered, as "name source: reason"
		// with the reason up to its first colon.
		refused []string
	}{
		{
			name: "OnlyAvailableHostnames",
			obj:  svc(resource.MeshService, "default", "web", 0, hosts("web.svc.mesh.local"), lostHosts("web.other.mesh.local"), hosts("Web.Alt.Mesh.Local"), vips("241.0.0.1")),
			want: []wantName{
				{Name: "web.svc.mesh.local.", Source: SourceHostname, Addrs: v4},
				{Name: "web.alt.mesh.local.", Source: SourceHostname, Addrs: v4}, // lower case, fully qualified
			},
			vips:    v4,
			refused: []string{"web.other.mesh.local. hostname: taken"},
		},
		{
			// A service tag names nothing until the hostnames controller
			// lists its names in the status.
			name: "NoStatusNoNames",
			obj:  &resource.Object{Kind: resource.MeshService, Mesh: "default", Name: "web", Spec: &resource.MeshServiceSpec{Identities: []resource.Identity{{Type: resource.IdentityServiceTag, Value: "web"}}}},
		},
		{
			// A service whose hostname is Available but has no VIP yet
			// has nothing to answer with; the reason says so.
			name: "NoVIPsNoNames",
			obj:  svc(resource.MeshService, "default", "web", 0, hosts("web.svc.mesh.local"), tags("web_default_svc_80")),
			refused: []string{
				"web.svc.mesh.local. hostname: the service has no VIP yet (the leader allocates one within milliseconds of the change)",
				"web_default_svc_80.mesh. serviceTag: the service has no VIP yet (the leader allocates one within milliseconds of the change)",
				"web-default-svc-80.mesh. alias: the service has no VIP yet (the leader allocates one within milliseconds of the change)",
				"web.default.svc.80.mesh. alias: the service has no VIP yet (the leader allocates one within milliseconds of the change)",
			},
		},
		{
			// An exhausted pool: the reason is the VIP controller's.
			name: "NoVIPsPoolExhausted",
			obj: svc(resource.MeshService, "default", "web", 0, hosts("web.svc.mesh.local"), func(o *resource.Object) {
				st := o.Status.(*resource.ServiceStatus)
				st.Conditions = []resource.Condition{{Type: resource.ConditionVIPsAllocated, Status: resource.ConditionFalse, Reason: "PoolExhausted", Message: "the MeshService pool 10.0.0.0/30 is exhausted"}}
			}),
			refused: []string{"web.svc.mesh.local. hostname: the service has no VIP: the MeshService pool 10.0.0.0/30 is exhausted"},
		},
		{
			// A global answers no names, even of a service whose status
			// (its zone's) holds a VIP: the reason says who does.
			name:    "NoNamesOnGlobal",
			obj:     svc(resource.MeshService, "default", "web", 0, hosts("web.svc.mesh.local"), vips("241.0.0.1")),
			opts:    TableOptions{Domains: []string{"mesh.local"}, Global: true},
			refused: []string{"web.svc.mesh.local. hostname: " + GlobalAnswersNoNames},
			vips:    addrs("241.0.0.1"),
		},
		{
			// A tag of 64 bytes makes a label DNS cannot carry: refused,
			// with the label named, and so are its aliases. The hostnames
			// controller lists such a name NotAvailable; a status an older
			// version wrote may list it Available.
			name: "ServiceTagLabelTooLong",
			obj:  svc(resource.MeshService, "default", "long", 0, vips("241.0.0.1"), tags(strings.Repeat("a", 56)+"_svc_800")),
			vips: v4,
			refused: []string{
				"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa_svc_800.mesh. serviceTag: not a valid DNS name: the label \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa_svc_800\" has 64 bytes, more than 63",
				"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-svc-800.mesh. alias: not a valid DNS name: the label \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-svc-800\" has 64 bytes, more than 63",
			},
			want: []wantName{{Name: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.svc.800.mesh.", Source: SourceAlias, Addrs: v4}},
		},
		{
			name: "UnparsableVIPIgnored",
			obj:  svc(resource.MeshService, "default", "web", 0, hosts("web.svc.mesh.local"), vips("not-an-ip", "241.0.0.1")),
			want: []wantName{{Name: "web.svc.mesh.local.", Source: SourceHostname, Addrs: v4}},
			vips: v4,
		},
		{
			name: "DualStack",
			obj:  svc(resource.MeshService, "default", "web", 0, hosts("web.svc.mesh.local"), vips("241.0.0.1", "fd00:241::1")),
			want: []wantName{{Name: "web.svc.mesh.local.", Source: SourceHostname, Addrs: addrs("241.0.0.1", "fd00:241::1")}},
			vips: addrs("241.0.0.1", "fd00:241::1"),
		},
		{
			// The names answer IPv4 first whatever the status's order; the
			// VIPs keep it.
			name: "IPv6VIPFirst",
			obj:  svc(resource.MeshService, "default", "web", 0, hosts("web.svc.mesh.local"), vips("fd00:241::1", "241.0.0.1"), tags("web")),
			want: []wantName{
				{Name: "web.svc.mesh.local.", Source: SourceHostname, Addrs: addrs("241.0.0.1", "fd00:241::1")},
				{Name: "web.mesh.", Source: SourceServiceTag, Addrs: addrs("241.0.0.1", "fd00:241::1")},
			},
			vips: addrs("fd00:241::1", "241.0.0.1"),
		},
		{
			name: "NamedPortsGetSRV",
			obj:  svc(resource.MeshService, "default", "web", 0, hosts("web.svc.mesh.local"), vips("241.0.0.1"), ports("HTTP:80", "8080", "grpc:9090")),
			want: []wantName{{Name: "web.svc.mesh.local.", Source: SourceHostname, Addrs: v4,
				Ports: []SRVPort{{Name: "http", Port: 80}, {Name: "grpc", Port: 9090}}}},
			vips: v4,
		},
		{
			// seed 004: the tag, then the dash alias, then the dot alias;
			// SRV on the tag name only.
			name: "ServiceTagAndAliases",
			obj:  svc(resource.MeshService, "default", "frontend", 0, vips("241.0.0.1"), ports("http:80"), tags("frontend_default_svc_80")),
			want: []wantName{
				{Name: "frontend_default_svc_80.mesh.", Source: SourceServiceTag, Addrs: v4, Ports: []SRVPort{{Name: "http", Port: 80}}},
				{Name: "frontend-default-svc-80.mesh.", Source: SourceAlias, Addrs: v4},
				{Name: "frontend.default.svc.80.mesh.", Source: SourceAlias, Addrs: v4},
			},
			vips: v4,
		},
		{
			// The seed's complex example: dashes in the name stay.
			name: "ServiceTagWithDashes",
			obj:  svc(resource.MeshService, "default", "complex", 0, vips("241.0.0.1"), tags("My-Complex-Service_default_svc_80")),
			want: []wantName{
				{Name: "my-complex-service_default_svc_80.mesh.", Source: SourceServiceTag, Addrs: v4},
				{Name: "my-complex-service-default-svc-80.mesh.", Source: SourceAlias, Addrs: v4},
				{Name: "my-complex-service.default.svc.80.mesh.", Source: SourceAlias, Addrs: v4},
			},
			vips: v4,
		},
		{
			// A compliant tag is its own alias: no duplicates.
			name: "AliasEqualToTag",
			obj:  svc(resource.MeshService, "default", "backend", 0, vips("241.0.0.1"), tags("backend")),
			want: []wantName{{Name: "backend.mesh.", Source: SourceServiceTag, Addrs: v4}},
			vips: v4,
		},
		{
			name: "OtherIdentitiesIgnored",
			obj: svc(resource.MeshService, "default", "backend", 0, vips("241.0.0.1"), func(o *resource.Object) {
				o.Spec.(*resource.MeshServiceSpec).Identities = []resource.Identity{{Type: resource.IdentitySpiffeID, Value: "spiffe://x/y"}, {Type: resource.IdentityServiceTag}}
			}),
			vips: v4,
		},
		{
			// A name another service holds is listed with the
			// controller's reason, whatever its source.
			name:    "LostServiceTagName",
			obj:     svc(resource.MeshService, "default", "frontend", 0, vips("241.0.0.1"), tags("backend"), lost("backend.mesh")),
			vips:    v4,
			refused: []string{"backend.mesh. serviceTag: taken"},
		},
		{
			// An origin this version does not know (a newer leader's) names
			// the service as a whole.
			name: "UnknownOrigin",
			obj: svc(resource.MeshService, "default", "web", 0, vips("241.0.0.1"), ports("http:80"), func(o *resource.Object) {
				status(o).Addresses = append(status(o).Addresses, resource.Address{Hostname: "web.new.mesh", Status: resource.AddressAvailable,
					Origin: resource.AddressOrigin{Kind: "SomethingNew", Name: "x"}})
			}),
			want: []wantName{{Name: "web.new.mesh.", Source: SourceHostname, Addrs: v4, Ports: []SRVPort{{Name: "http", Port: 80}}}},
			vips: v4,
		},
		{
			// InternalVIP values on their own VIPs; the generated hostname
			// on the VIPs of the service as a whole.
			name: "ExternalServiceInternalVIPs",
			obj: svc(resource.MeshExternalService, "default", "httpbin", 0, hosts("httpbin.extsvc.mesh.local"), vips("242.0.0.1"),
				internalVIP("HTTPBIN.org", "242.0.0.2", "fd00:242::2"), internalVIP("api.example.com", "242.0.0.3")),
			want: []wantName{
				{Name: "httpbin.extsvc.mesh.local.", Source: SourceHostname, Addrs: addrs("242.0.0.1")},
				{Name: "api.example.com.", Source: SourceInternalVIP, Addrs: addrs("242.0.0.3")},
				{Name: "httpbin.org.", Source: SourceInternalVIP, Addrs: addrs("242.0.0.2", "fd00:242::2")},
			},
			vips: addrs("242.0.0.1", "242.0.0.2", "fd00:242::2", "242.0.0.3"),
		},
		{
			// A value another service holds, or one the hostnames
			// controller has not listed yet, is not answered; its VIP
			// still names the service in PTR records.
			name: "ExternalServiceInternalVIPNotHeld",
			obj: svc(resource.MeshExternalService, "default", "httpbin", 0, lostInternalVIP("taken.example.com", "242.0.0.1"),
				pendingInternalVIP("new.example.com", "242.0.0.2"), internalVIP("httpbin.org", "242.0.0.3")),
			want:    []wantName{{Name: "httpbin.org.", Source: SourceInternalVIP, Addrs: addrs("242.0.0.3")}},
			vips:    addrs("242.0.0.1", "242.0.0.2", "242.0.0.3"),
			refused: []string{"taken.example.com. internalVIP: "},
		},
		{
			// Without a VIP of its own (before the VIP controller gave it
			// one), the generated hostname is not answered with the VIP of
			// an InternalVIP value.
			name: "ExternalServiceOnlyInternalVIPs",
			obj:  svc(resource.MeshExternalService, "default", "httpbin", 0, hosts("httpbin.extsvc.mesh.local"), internalVIP("httpbin.org", "242.0.0.2")),
			want: []wantName{
				{Name: "httpbin.org.", Source: SourceInternalVIP, Addrs: addrs("242.0.0.2")},
			},
			vips:    addrs("242.0.0.2"),
			refused: []string{"httpbin.extsvc.mesh.local. hostname: the service has no VIP yet (the leader allocates one within milliseconds of the change)"},
		},
		{
			name: "MultiZoneService",
			obj:  svc(resource.MeshMultiZoneService, "default", "web", 0, hosts("web.mzsvc.mesh.local"), vips("243.0.0.1"), ports("http:80")),
			want: []wantName{{Name: "web.mzsvc.mesh.local.", Source: SourceHostname, Addrs: addrs("243.0.0.1"), Ports: []SRVPort{{Name: "http", Port: 80}}}},
			vips: addrs("243.0.0.1"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			if o.Domains == nil {
				o = testOpts
			}
			got := Extract(tc.obj, o)
			var refused []string
			for _, r := range got.Refused() {
				if r.Service != tc.obj.Key() {
					t.Errorf("refusal %+v names another service", r)
				}
				refused = append(refused, r.Name+" "+r.Source+": "+r.Reason)
			}
			if diff := cmp.Diff(tc.refused, refused); diff != "" {
				t.Errorf("refused (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, listNames(got), cmpAddr); diff != "" {
				t.Errorf("Extract names (-want +got):\n%s", diff)
			}
			if tc.vips == nil {
				tc.vips = []netip.Addr{}
			}
			want := ServiceNames{Key: tc.obj.Key(), Created: tc.obj.CreationTime.UnixNano(), Revision: tc.obj.Revision, VIPs: tc.vips}
			// The names, ports and refusals are compared above.
			got.Names, got.Ports = nil, nil
			if diff := cmp.Diff(want, got, cmpAddr, cmpopts.IgnoreUnexported(ServiceNames{})); diff != "" {
				t.Errorf("Extract (-want +got):\n%s", diff)
			}
		})
	}
}

// wantName is a name of Extract's result with its source and SRV ports
// spelled out, as TestExtract lists them.
type wantName struct {
	Name, Source string
	Addrs        []netip.Addr
	Ports        []SRVPort
}

// listNames spells out the names of s.
func listNames(s ServiceNames) []wantName {
	var out []wantName
	for i := range s.Names {
		n := &s.Names[i]
		out = append(out, wantName{Name: n.Name, Source: n.Source(), Addrs: s.AddrsOf(n), Ports: s.PortsOf(n)})
	}
	return out
}

// buildView extracts objs and builds their view.
func buildView(objs ...*resource.Object) *View {
	var svcs []ServiceNames
	for _, o := range objs {
		svcs = append(svcs, Extract(o, testOpts))
	}
	return BuildView(svcs)
}

// answered returns name -> "service source" of a view, for short diffs.
func answered(v *View) map[string]string {
	out := map[string]string{}
	for n, e := range namesOf(v) {
		out[n] = e.Service.Name + " " + e.Source
	}
	return out
}

func rejected(v *View) []string {
	var out []string
	for _, r := range v.Rejections() {
		out = append(out, r.Name+" "+r.Service.Name+" "+r.Source+": "+r.Reason)
	}
	return out
}

// TestBuildView_Precedence checks who gets a name listed by several
// services: the hostnames controller decides every name once and writes
// the losers NotAvailable, so the view answers the service that lists it
// Available; two services list it only while the status of the one that
// lost lags behind, and then the later status (the higher revision) holds
// it, whatever the sources; equal revisions fall back to the older
// service, then the name. The input order does not matter.
func TestBuildView_Precedence(t *testing.T) {
	for _, tc := range []struct {
		name         string
		objs         []*resource.Object
		want         map[string]string
		wantRejected []string
	}{
		{
			// Both statuses claim the name (the loser's status lags behind
			// the winner's): the status written last is the hostnames
			// controller's latest decision, whatever the sources.
			name: "LaterDecisionHolds",
			objs: []*resource.Object{
				svc(resource.MeshService, "default", "old", 0, hosts("db.mesh.local"), vips("241.0.0.1"), revision(10)),
				svc(resource.MeshExternalService, "default", "young", 5, internalVIP("db.mesh.local", "242.0.0.1"), revision(12)),
			},
			want:         map[string]string{"db.mesh.local.": "young internalVIP"},
			wantRejected: []string{"db.mesh.local. old hostname: the name is answered for MeshExternalService default/young (internalVIP)"},
		},
		{
			name: "LaterDecisionHoldsTheOtherWay",
			objs: []*resource.Object{
				svc(resource.MeshService, "default", "old", 0, hosts("db.mesh.local"), vips("241.0.0.1"), revision(14)),
				svc(resource.MeshExternalService, "default", "young", 5, internalVIP("db.mesh.local", "242.0.0.1"), revision(12)),
			},
			want:         map[string]string{"db.mesh.local.": "old hostname"},
			wantRejected: []string{"db.mesh.local. young internalVIP: the name is answered for MeshService default/old (hostname)"},
		},
		{
			// A service-tag alias too: the later decision holds it, even
			// over a hostname (the controller would not give it so, but a
			// lagging status shows it until rewritten).
			name: "LaterDecisionHoldsATagName",
			objs: []*resource.Object{
				svc(resource.MeshService, "default", "old", 0, vips("241.0.0.1"), tags("frontend_default_svc_80"), revision(20)),
				svc(resource.MeshService, "default", "young", 5, vips("241.0.0.2"), hosts("frontend.default.svc.80.mesh"), revision(12)),
			},
			want: map[string]string{
				"frontend_default_svc_80.mesh.": "old serviceTag", "frontend-default-svc-80.mesh.": "old alias",
				"frontend.default.svc.80.mesh.": "old alias",
			},
			wantRejected: []string{"frontend.default.svc.80.mesh. young hostname: the name is answered for MeshService default/old (alias)"},
		},
		{
			// The settled state of a clash: the holder is answered, the
			// losers are not even candidates and are listed with the
			// controller's reasons.
			name: "InternalVIPLostToHostname",
			objs: []*resource.Object{
				svc(resource.MeshService, "default", "old", 0, lostHosts("db.mesh.local"), vips("241.0.0.1")),
				svc(resource.MeshExternalService, "default", "young", 5, internalVIP("db.mesh.local", "242.0.0.1")),
				svc(resource.MeshExternalService, "default", "younger", 6, lostInternalVIP("db.mesh.local", "242.0.0.2")),
			},
			want:         map[string]string{"db.mesh.local.": "young internalVIP"},
			wantRejected: []string{"db.mesh.local. younger internalVIP: ", "db.mesh.local. old hostname: taken"},
		},
		{
			name: "ServiceTagAliasLostToHostname",
			objs: []*resource.Object{
				svc(resource.MeshService, "default", "old", 0, vips("241.0.0.1"), tags("frontend_default_svc_80"), lost("frontend.default.svc.80.mesh")),
				svc(resource.MeshService, "default", "young", 5, vips("241.0.0.2"), hosts("frontend.default.svc.80.mesh")),
			},
			want: map[string]string{
				"frontend_default_svc_80.mesh.": "old serviceTag", "frontend-default-svc-80.mesh.": "old alias",
				"frontend.default.svc.80.mesh.": "young hostname",
			},
			wantRejected: []string{"frontend.default.svc.80.mesh. old alias: taken"},
		},
		{
			// Same revision: the older service, then the name, decides
			// (deterministic).
			name: "SameRevisionOlderServiceFirst",
			objs: []*resource.Object{
				svc(resource.MeshService, "default", "b-young", 5, vips("241.0.0.2"), tags("shared")),
				svc(resource.MeshService, "default", "a-old", 0, vips("241.0.0.1"), tags("shared")),
			},
			want:         map[string]string{"shared.mesh.": "a-old serviceTag"},
			wantRejected: []string{"shared.mesh. b-young serviceTag: the name is answered for MeshService default/a-old (serviceTag)"},
		},
		{
			name: "SameAgeByName",
			objs: []*resource.Object{
				svc(resource.MeshService, "default", "zz", 0, vips("241.0.0.2"), tags("shared")),
				svc(resource.MeshService, "default", "aa", 0, vips("241.0.0.1"), tags("shared")),
			},
			want:         map[string]string{"shared.mesh.": "aa serviceTag"},
			wantRejected: []string{"shared.mesh. zz serviceTag: the name is answered for MeshService default/aa (serviceTag)"},
		},
		{
			// A service without VIPs has nothing to answer with.
			name: "ServiceWithoutVIPsClaimsNothing",
			objs: []*resource.Object{
				svc(resource.MeshService, "default", "old", 0, hosts("x.mesh.local"), tags("shared")),
				svc(resource.MeshService, "default", "young", 5, vips("241.0.0.1"), tags("shared")),
			},
			want: map[string]string{"shared.mesh.": "young serviceTag"},
			wantRejected: []string{
				"shared.mesh. old serviceTag: the service has no VIP yet (the leader allocates one within milliseconds of the change)",
				"x.mesh.local. old hostname: the service has no VIP yet (the leader allocates one within milliseconds of the change)",
			},
		},
		{
			// Two identities with the same tag: one name, nothing rejected.
			name: "DuplicateTagOfOneService",
			objs: []*resource.Object{svc(resource.MeshService, "default", "web", 0, vips("241.0.0.1"), tags("web", "WEB"))},
			want: map[string]string{"web.mesh.": "web serviceTag"},
		},
		{
			// A service's own names never shut each other out: a status
			// listing one name twice (its hostname and its own alias,
			// which the controller lists once) is answered once, as the
			// first, and nothing is reported as not answered.
			name: "OwnNamesDoNotCollide",
			objs: []*resource.Object{svc(resource.MeshService, "default", "frontend", 0, vips("241.0.0.1"),
				hosts("frontend.default.svc.80.mesh"), tags("frontend_default_svc_80"))},
			want: map[string]string{
				"frontend.default.svc.80.mesh.": "frontend hostname",
				"frontend_default_svc_80.mesh.": "frontend serviceTag", "frontend-default-svc-80.mesh.": "frontend alias",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := slices.Clone(tc.objs)
			for range 3 { // the input order does not matter
				v := buildView(objs...)
				if diff := cmp.Diff(tc.want, answered(v)); diff != "" {
					t.Errorf("answered names (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.wantRejected, rejected(v)); diff != "" {
					t.Errorf("rejected (-want +got):\n%s", diff)
				}
				slices.Reverse(objs)
			}
		})
	}
}

// TestBuildView_Records checks the records of the names: A and AAAA split
// by family, SRV only for named ports and never for aliases, PTR to the
// first answered name of the service.
func TestBuildView_Records(t *testing.T) {
	v := buildView(
		svc(resource.MeshService, "default", "frontend", 0, vips("241.0.0.1", "fd00:241::1"), ports("http:80", "8080"),
			hosts("frontend.svc.mesh.local"), tags("frontend_default_svc_80")),
		// loser wants lost_tag too, which the hostnames controller gave
		// the older service old.
		svc(resource.MeshService, "default", "old", -5, vips("241.0.0.9"), tags("lost_tag")),
		svc(resource.MeshService, "default", "loser", 0, vips("241.0.0.2"), tags("lost_tag", "kept_tag"), lost("lost_tag.mesh", "lost-tag.mesh", "lost.tag.mesh")),
	)
	want := map[string]*Entry{
		"frontend.svc.mesh.local.": {Name: "frontend.svc.mesh.local.", Service: resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "frontend"},
			Source: SourceHostname, A: addrs("241.0.0.1"), AAAA: addrs("fd00:241::1")},
		"_http._tcp.frontend.svc.mesh.local.": {Name: "_http._tcp.frontend.svc.mesh.local.", Service: resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "frontend"},
			Source: SourceHostname, SRV: []SRV{{Target: "frontend.svc.mesh.local.", Port: 80}}},
		"frontend_default_svc_80.mesh.": {Name: "frontend_default_svc_80.mesh.", Service: resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "frontend"},
			Source: SourceServiceTag, A: addrs("241.0.0.1"), AAAA: addrs("fd00:241::1")},
		"_http._tcp.frontend_default_svc_80.mesh.": {Name: "_http._tcp.frontend_default_svc_80.mesh.", Service: resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "frontend"},
			Source: SourceServiceTag, SRV: []SRV{{Target: "frontend_default_svc_80.mesh.", Port: 80}}},
		"frontend-default-svc-80.mesh.": {Name: "frontend-default-svc-80.mesh.", Service: resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "frontend"},
			Source: SourceAlias, A: addrs("241.0.0.1"), AAAA: addrs("fd00:241::1")},
		"frontend.default.svc.80.mesh.": {Name: "frontend.default.svc.80.mesh.", Service: resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "frontend"},
			Source: SourceAlias, A: addrs("241.0.0.1"), AAAA: addrs("fd00:241::1")},
		"lost_tag.mesh.": {Name: "lost_tag.mesh.", Service: resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "old"},
			Source: SourceServiceTag, A: addrs("241.0.0.9")},
		"lost-tag.mesh.": {Name: "lost-tag.mesh.", Service: resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "old"},
			Source: SourceAlias, A: addrs("241.0.0.9")},
		"lost.tag.mesh.": {Name: "lost.tag.mesh.", Service: resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "old"},
			Source: SourceAlias, A: addrs("241.0.0.9")},
		"kept_tag.mesh.": {Name: "kept_tag.mesh.", Service: resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "loser"},
			Source: SourceServiceTag, A: addrs("241.0.0.2")},
		"kept-tag.mesh.": {Name: "kept-tag.mesh.", Service: resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "loser"},
			Source: SourceAlias, A: addrs("241.0.0.2")},
		"kept.tag.mesh.": {Name: "kept.tag.mesh.", Service: resource.Key{Kind: resource.MeshService, Mesh: "default", Name: "loser"},
			Source: SourceAlias, A: addrs("241.0.0.2")},
	}
	if diff := cmp.Diff(want, namesOf(v), cmpAddr); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	// No SRV for the unnamed port, nor for aliases.
	for n := range namesOf(v) {
		if strings.HasPrefix(n, "_") && (strings.Contains(n, "-default-") || strings.Contains(n, ".default.svc.80.") || strings.Contains(n, "8080")) {
			t.Errorf("unexpected SRV name %s", n)
		}
	}
	// Empty non-terminals: every ancestor that is not a name itself.
	wantParents := map[string]struct{}{
		"local.": {}, "mesh.local.": {}, "svc.mesh.local.": {}, "_tcp.frontend.svc.mesh.local.": {},
		"mesh.": {}, "80.mesh.": {}, "svc.80.mesh.": {}, "default.svc.80.mesh.": {}, "_tcp.frontend_default_svc_80.mesh.": {},
		"tag.mesh.": {},
	}
	if diff := cmp.Diff(wantParents, parentsOf(v)); diff != "" {
		t.Errorf("Parents (-want +got):\n%s", diff)
	}
	// PTR: each VIP names the first name its service answers; loser lost
	// its first tag, so its VIP names the second.
	wantPTR := map[string]string{
		"1.0.0.241.in-addr.arpa.": "frontend.svc.mesh.local.",
		"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.4.2.0.0.0.d.f.ip6.arpa.": "frontend.svc.mesh.local.",
		"9.0.0.241.in-addr.arpa.": "lost_tag.mesh.",
		"2.0.0.241.in-addr.arpa.": "kept_tag.mesh.",
	}
	if diff := cmp.Diff(wantPTR, ptrOf(v)); diff != "" {
		t.Errorf("PTR (-want +got):\n%s", diff)
	}
	wantRejected := []string{
		"lost-tag.mesh. loser alias: taken",
		"lost.tag.mesh. loser alias: taken",
		"lost_tag.mesh. loser serviceTag: taken",
	}
	if diff := cmp.Diff(wantRejected, rejected(v)); diff != "" {
		t.Errorf("rejected (-want +got):\n%s", diff)
	}
}

// TestBuildView_NoAnsweredNameNoPTR: a service that lost every name gets
// no PTR for its VIPs.
func TestBuildView_NoAnsweredNameNoPTR(t *testing.T) {
	v := buildView(
		svc(resource.MeshService, "default", "old", 0, vips("241.0.0.1"), tags("shared")),
		svc(resource.MeshService, "default", "young", 5, vips("241.0.0.2"), tags("shared"), lost("shared.mesh")),
	)
	if diff := cmp.Diff(map[string]string{"1.0.0.241.in-addr.arpa.": "shared.mesh."}, ptrOf(v)); diff != "" {
		t.Errorf("PTR (-want +got):\n%s", diff)
	}
}

func TestSources(t *testing.T) {
	got := maps.Collect(Sources([]*resource.Object{
		dataplane("b", "young", 5, "10.0.0.1"),
		dataplane("a", "old", 0, "10.0.0.1"),       // the oldest wins a shared address
		dataplane("c", "byname", 0, "backend.svc"), // a DNS name: ignored
		dataplane("c", "v6", 0, "fd00::1"),
		dataplane("b", "other", 1, "10.0.0.2"),
	}).All())
	want := map[netip.Addr]string{
		netip.MustParseAddr("10.0.0.1"): "a",
		netip.MustParseAddr("10.0.0.2"): "b",
		netip.MustParseAddr("fd00::1"):  "c",
	}
	if diff := cmp.Diff(want, got, cmpAddr); diff != "" {
		t.Errorf("Sources (-want +got):\n%s", diff)
	}
}

// TestBuild_Deterministic: the same objects in any order give the same table.
func TestBuild_Deterministic(t *testing.T) {
	objs := []*resource.Object{
		svc(resource.MeshService, "default", "a", 0, vips("241.0.0.1"), tags("x_y"), hosts("a.mesh.local")),
		svc(resource.MeshService, "default", "b", 0, vips("241.0.0.2"), tags("x-y", "x.y")),
		svc(resource.MeshService, "default", "c", 0, vips("241.0.0.3"), tags("x_y")),
		svc(resource.MeshExternalService, "default", "d", 0, internalVIP("x-y.mesh", "242.0.0.1")),
		svc(resource.MeshService, "other", "a", 0, vips("241.0.0.1"), tags("x_y")),
		dataplane("default", "dp1", 0, "10.0.0.1"),
		dataplane("other", "dp2", 0, "10.0.0.1"),
	}
	want := render(Build(objs, testOpts))
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		r.Shuffle(len(objs), func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
		if got := render(Build(objs, testOpts)); got != want {
			t.Fatalf("table depends on input order:\n%s", cmp.Diff(want, got))
		}
	}
}

// TestBuild_Golden builds the table of each testdata/table/*.txtar: the
// "input.yaml" section holds the objects (documents with status and
// creationTime), the optional "options.json" section the TableOptions
// (default testOpts), and "want" the table as render writes it. Run with
// -update to rewrite "want".
func TestBuild_Golden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "table", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var input, want []byte
			opts := testOpts
			for _, f := range ar.Files {
				switch f.Name {
				case "input.yaml":
					input = f.Data
				case "options.json":
					if err := json.Unmarshal(f.Data, &opts); err != nil {
						t.Fatalf("options.json: %v", err)
					}
				case "want":
					want = f.Data
				}
			}
			got := render(Build(decodeObjects(t, input), opts))
			if *update {
				replaced := false
				for i := range ar.Files {
					if ar.Files[i].Name == "want" {
						ar.Files[i].Data, replaced = []byte(got), true
					}
				}
				if !replaced {
					ar.Files = append(ar.Files, txtar.File{Name: "want", Data: []byte(got)})
				}
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("table (-want +got):\n%s\n(run with -update to accept)", diff)
			}
		})
	}
}

// decodeObjects reads a YAML stream of documents the way the API returns
// them (status and creationTime included).
func decodeObjects(t *testing.T, data []byte) []*resource.Object {
	t.Helper()
	var out []*resource.Object
	for _, doc := range resource.SplitYAML(data) {
		g, err := decode.YAMLGeneric(doc.Data)
		if err != nil {
			t.Fatalf("line %d: %v", doc.Line, err)
		}
		j, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		var o resource.Object
		if err := o.UnmarshalJSON(j); err != nil {
			t.Fatalf("line %d: %v", doc.Line, err)
		}
		out = append(out, &o)
	}
	return out
}
