package mzservice

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshnames/meshnames/internal/resource"
)

const (
	lSvc = resource.LabelServiceName
	lNS  = resource.LabelNamespace
	lDN  = resource.LabelDisplayName
)

// TestEngine_Status checks what the status of a MeshMultiZoneService shows
// for a given set of services, built both ways: MeshMultiZoneServices
// before services and after.
func TestEngine_Status(t *testing.T) {
	redis := map[string]string{lSvc: "redis"}
	tests := []struct {
		name string
		svcs []*resource.Object
		mzs  *resource.Object
		want Result
	}{{
		name: "LabelMatching",
		svcs: []*resource.Object{
			ms("default", "redis-east", zl("east", lSvc+"=redis", lNS+"=db", lDN+"=redis"), "6379/tcp"),
			ms("default", "redis-west", zl("west", lSvc+"=redis", lNS+"=db", lDN+"=redis"), "6379/tcp"),
			ms("default", "web", zl("east", lSvc+"=web"), "6379/tcp"),
		},
		mzs: mz("default", "redis", redis),
		want: Result{
			MeshServices: []resource.MeshServiceRef{ref("redis", "db", "east", "default"), ref("redis", "db", "west", "default")},
			Zones:        zones("east", "west"),
			Ports:        ports("6379/tcp"),
			Conditions:   []resource.Condition{matched("default", 2)},
		},
	}, {
		name: "EverySelectorLabelMustMatch",
		svcs: []*resource.Object{
			ms("default", "a", zl("east", lSvc+"=redis", lNS+"=db")),
			ms("default", "b", zl("east", lSvc+"=redis", lNS+"=cache")),
			ms("default", "c", zl("east", lSvc+"=redis")),
		},
		mzs: mz("default", "redis", map[string]string{lSvc: "redis", lNS: "db"}),
		want: Result{
			MeshServices: []resource.MeshServiceRef{ref("a", "db", "east", "default")},
			Zones:        zones("east"),
			Conditions:   []resource.Condition{matched("default", 1)},
		},
	}, {
		// Kuma reads a missing label as "" and matches it; we do not.
		name: "MissingLabelDoesNotMatchEmptyValue",
		svcs: []*resource.Object{
			ms("default", "with-empty", zl("east", lSvc+"=redis", "tier=")),
			ms("default", "without", zl("east", lSvc+"=redis")),
		},
		mzs: mz("default", "redis", map[string]string{lSvc: "redis", "tier": ""}),
		want: Result{
			MeshServices: []resource.MeshServiceRef{ref("with-empty", "", "east", "default")},
			Zones:        zones("east"),
			Conditions:   []resource.Condition{matched("default", 1)},
		},
	}, {
		// Kuma matches services of every mesh; we match the MeshMultiZoneService's own.
		name: "OtherMeshesDoNotMatch",
		svcs: []*resource.Object{
			ms("default", "redis", zl("east", lSvc+"=redis"), "6379/tcp"),
			ms("other", "redis", zl("west", lSvc+"=redis"), "6379/tcp"),
			ms("other", "redis-2", zl("south", lSvc+"=redis"), "6379/tcp"),
		},
		mzs: mz("default", "redis", redis),
		want: Result{
			MeshServices: []resource.MeshServiceRef{ref("redis", "", "east", "default")},
			Zones:        zones("east"),
			Ports:        ports("6379/tcp"),
			Conditions:   []resource.Condition{matched("default", 1)},
		},
	}, {
		name: "NoMatch",
		svcs: []*resource.Object{ms("default", "web", zl("east", lSvc+"=web"))},
		mzs:  mz("default", "redis", map[string]string{lSvc: "redis", lNS: "db"}),
		want: Result{Conditions: []resource.Condition{
			noMatch("no MeshService of mesh default matches the selector {k8s.kuma.io/namespace=db,k8s.kuma.io/service-name=redis}"),
		}},
	}, {
		name: "NoMatchKeepsDeclaredPorts",
		mzs:  mz("default", "redis", redis, "6379/tcp/main"),
		want: Result{Ports: ports("6379/tcp/main"), Conditions: []resource.Condition{
			noMatch("no MeshService of mesh default matches the selector {k8s.kuma.io/service-name=redis}"),
		}},
	}, {
		name: "CommonPorts",
		svcs: []*resource.Object{
			ms("default", "a", zl("east", lSvc+"=redis"), "6379/tcp/main", "9121/http/metrics", "26379/tcp"),
			ms("default", "b", zl("west", lSvc+"=redis"), "26379/tcp", "6379/tcp/main", "9121/http/metrics"),
		},
		mzs: mz("default", "redis", redis),
		want: Result{
			MeshServices: []resource.MeshServiceRef{ref("a", "", "east", "default"), ref("b", "", "west", "default")},
			Zones:        zones("east", "west"),
			Ports:        ports("6379/tcp/main", "9121/http/metrics", "26379/tcp"),
			Conditions:   []resource.Condition{matched("default", 2)},
		},
	}, {
		name: "PortMissingOnOneServiceIsLeftOut",
		svcs: []*resource.Object{
			ms("default", "a", zl("east", lSvc+"=redis"), "6379/tcp", "9121/http"),
			ms("default", "b", zl("west", lSvc+"=redis"), "6379/tcp"),
			ms("default", "c", zl("south", lSvc+"=redis"), "6379/tcp", "9121/http"),
		},
		mzs: mz("default", "redis", redis),
		want: Result{
			MeshServices: []resource.MeshServiceRef{ref("a", "", "east", "default"), ref("b", "", "west", "default"), ref("c", "", "south", "default")},
			Zones:        zones("east", "south", "west"),
			Ports:        ports("6379/tcp"),
			Conditions:   []resource.Condition{matched("default", 3), portsDiffer("9121/http is not on b (zone west)")},
		},
	}, {
		name: "SameNumberOtherProtocolIsLeftOut",
		svcs: []*resource.Object{
			ms("default", "a", zl("east", lSvc+"=web"), "80/http", "443/tcp"),
			ms("default", "b", zl("west", lSvc+"=web"), "80/tcp", "443/tcp"),
		},
		mzs: mz("default", "web", map[string]string{lSvc: "web"}),
		want: Result{
			MeshServices: []resource.MeshServiceRef{ref("a", "", "east", "default"), ref("b", "", "west", "default")},
			Zones:        zones("east", "west"),
			Ports:        ports("443/tcp"),
			Conditions: []resource.Condition{matched("default", 2), portsDiffer(
				"80/http is not on b (zone west, which has 80/tcp); 80/tcp is not on a (zone east, which has 80/http)")},
		},
	}, {
		name: "DeclaredPortsWinOverDisagreement",
		svcs: []*resource.Object{
			ms("default", "a", zl("east", lSvc+"=web"), "80/http"),
			ms("default", "b", zl("west", lSvc+"=web"), "8080/tcp"),
		},
		mzs: mz("default", "web", map[string]string{lSvc: "web"}, "80/HTTP/web", "9090/tcp"),
		want: Result{
			MeshServices: []resource.MeshServiceRef{ref("a", "", "east", "default"), ref("b", "", "west", "default")},
			Zones:        zones("east", "west"),
			Ports:        ports("80/http/web", "9090/tcp"),
			Conditions:   []resource.Condition{matched("default", 2)},
		},
	}, {
		name: "PortNamedOnlyWhenEveryServiceAgrees",
		svcs: []*resource.Object{
			ms("default", "a", zl("east", lSvc+"=web"), "80/http/web", "81/http/admin", "82/tcp"),
			ms("default", "b", zl("west", lSvc+"=web"), "80/http/web", "81/http/other", "82/tcp/x"),
		},
		mzs: mz("default", "web", map[string]string{lSvc: "web"}),
		want: Result{
			MeshServices: []resource.MeshServiceRef{ref("a", "", "east", "default"), ref("b", "", "west", "default")},
			Zones:        zones("east", "west"),
			Ports:        ports("80/http/web", "81/http", "82/tcp"),
			Conditions:   []resource.Condition{matched("default", 2)},
		},
	}, {
		name: "ServiceWithoutPortsLeavesNoCommonPort",
		svcs: []*resource.Object{
			ms("default", "a", zl("east", lSvc+"=web"), "80/http"),
			ms("default", "b", zl("west", lSvc+"=web")),
		},
		mzs: mz("default", "web", map[string]string{lSvc: "web"}),
		want: Result{
			MeshServices: []resource.MeshServiceRef{ref("a", "", "east", "default"), ref("b", "", "west", "default")},
			Zones:        zones("east", "west"),
			Conditions:   []resource.Condition{matched("default", 2), portsDiffer("80/http is not on b (zone west)")},
		},
	}, {
		name: "LeftOutListsAreBounded",
		svcs: []*resource.Object{
			ms("default", "a", zl("east", lSvc+"=web"), "1/tcp", "2/tcp", "3/tcp", "4/tcp", "5/tcp", "6/tcp", "7/tcp"),
			ms("default", "b", zl("east", lSvc+"=web")),
			ms("default", "c", zl("east", lSvc+"=web")),
			ms("default", "d", zl("east", lSvc+"=web")),
			ms("default", "e", zl("east", lSvc+"=web")),
			ms("default", "f", zl("east", lSvc+"=web")),
		},
		mzs: mz("default", "web", map[string]string{lSvc: "web"}),
		want: Result{
			MeshServices: []resource.MeshServiceRef{
				ref("a", "", "east", "default"), ref("b", "", "east", "default"), ref("c", "", "east", "default"),
				ref("d", "", "east", "default"), ref("e", "", "east", "default"), ref("f", "", "east", "default"),
			},
			Zones: zones("east"),
			Conditions: []resource.Condition{matched("default", 6), portsDiffer(
				"1/tcp is not on b (zone east), c (zone east), d (zone east) and 2 more; " +
					"2/tcp is not on b (zone east), c (zone east), d (zone east) and 2 more; " +
					"3/tcp is not on b (zone east), c (zone east), d (zone east) and 2 more; " +
					"4/tcp is not on b (zone east), c (zone east), d (zone east) and 2 more; " +
					"5/tcp is not on b (zone east), c (zone east), d (zone east) and 2 more; " +
					"and 2 more ports")},
		},
	}, {
		name: "SortedByDisplayNameNamespaceZone",
		svcs: []*resource.Object{
			ms("default", "z-first", zl("west", lSvc+"=x", lDN+"=alpha", lNS+"=b")),
			ms("default", "y", zl("east", lSvc+"=x", lDN+"=alpha", lNS+"=b")),
			ms("default", "x", zl("north", lSvc+"=x", lDN+"=alpha", lNS+"=a")),
			ms("default", "beta", zl("east", lSvc+"=x")),
			ms("default", "alpha", zl("south", lSvc+"=x", lNS+"=a")),
		},
		mzs: mz("default", "x", map[string]string{lSvc: "x"}),
		want: Result{
			MeshServices: []resource.MeshServiceRef{
				ref("alpha", "a", "north", "default"), ref("alpha", "a", "south", "default"),
				ref("alpha", "b", "east", "default"), ref("alpha", "b", "west", "default"),
				ref("beta", "", "east", "default"),
			},
			Zones:      zones("east", "north", "south", "west"),
			Conditions: []resource.Condition{matched("default", 5)},
		},
	}, {
		name: "ServiceWithoutZoneLabelIsInTheLocalZone",
		svcs: []*resource.Object{ms("default", "old", map[string]string{lSvc: "x"})},
		mzs:  mz("default", "x", map[string]string{lSvc: "x"}),
		want: Result{
			MeshServices: []resource.MeshServiceRef{ref("old", "", "local", "default")},
			Zones:        zones("local"),
			Conditions:   []resource.Condition{matched("default", 1)},
		},
	}, {
		name: "SelectorOnDisplayName",
		svcs: []*resource.Object{
			ms("default", "redis", zl("east", lDN+"=redis")),
			ms("default", "redis-7d8f", zl("west", lDN+"=redis")),
			ms("default", "redis2", zl("east")),
		},
		mzs: mz("default", "redis", map[string]string{lDN: "redis"}),
		want: Result{
			MeshServices: []resource.MeshServiceRef{ref("redis", "", "east", "default"), ref("redis", "", "west", "default")},
			Zones:        zones("east", "west"),
			Conditions:   []resource.Condition{matched("default", 2)},
		},
	}, {
		// Admission refuses an empty selector; one stored under other
		// rules matches every service of its mesh.
		name: "EmptySelectorMatchesEveryServiceOfItsMesh",
		svcs: []*resource.Object{
			ms("default", "a", zl("east"), "80/http"),
			ms("default", "b", nil, "80/http"),
			ms("other", "c", zl("east"), "80/http"),
		},
		mzs: mz("default", "all", map[string]string{}),
		want: Result{
			MeshServices: []resource.MeshServiceRef{ref("a", "", "east", "default"), ref("b", "", "local", "default")},
			Zones:        zones("east", "local"),
			Ports:        ports("80/http"),
			Conditions:   []resource.Condition{matched("default", 2)},
		},
	}, {
		name: "EmptySelectorInEmptyMesh",
		svcs: []*resource.Object{ms("other", "c", zl("east"))},
		mzs:  mz("default", "all", map[string]string{}),
		want: Result{Conditions: []resource.Condition{
			noMatch("mesh default has no MeshService (the empty selector matches every one)"),
		}},
	}, {
		name: "MissingSelectorMatchesNothing",
		svcs: []*resource.Object{ms("default", "a", zl("east"))},
		mzs:  mz("default", "none", nil),
		want: Result{Conditions: []resource.Condition{
			noMatch("no MeshService can match: spec.selector.meshService is not set"),
		}},
	}}
	for _, tt := range tests {
		for _, order := range []string{"ServicesFirst", "MultiZoneServiceFirst"} {
			t.Run(tt.name+"/"+order, func(t *testing.T) {
				c := NewEngine("local")
				if order == "MultiZoneServiceFirst" {
					c.SetMultiZoneService(tt.mzs)
				}
				for _, s := range tt.svcs {
					c.SetService(s)
				}
				if order == "ServicesFirst" {
					c.SetMultiZoneService(tt.mzs)
				}
				k := tt.mzs.Key()
				if d := cmp.Diff([]resource.Key{k}, c.TakeDirty()); d != "" {
					t.Errorf("TakeDirty (-want +got):\n%s", d)
				}
				got, ok := c.Status(k)
				if !ok {
					t.Fatalf("Status(%s): not found", k)
				}
				if d := cmp.Diff(tt.want, got); d != "" {
					t.Errorf("Status (-want +got):\n%s", d)
				}
			})
		}
	}
}

// op is one change fed to an engine.
type op struct {
	set *resource.Object
	del resource.Key
}

func set(o *resource.Object) op { return op{set: o} }
func del(k resource.Key) op     { return op{del: k} }
func apply(c *Engine, ops ...op) {
	for _, o := range ops {
		switch {
		case o.set != nil && o.set.Kind == resource.MeshService:
			c.SetService(o.set)
		case o.set != nil:
			c.SetMultiZoneService(o.set)
		case o.del.Kind == resource.MeshService:
			c.DeleteService(o.del)
		default:
			c.DeleteMultiZoneService(o.del)
		}
	}
}

// TestEngine_Changes checks which MeshMultiZoneServices a change marks dirty
// and what their status becomes.
func TestEngine_Changes(t *testing.T) {
	redis := map[string]string{lSvc: "redis"}
	web := map[string]string{lSvc: "web"}
	base := []op{
		set(mz("default", "redis", redis)),
		set(mz("default", "web", web)),
		set(mz("other", "redis", redis)),
		set(ms("default", "redis-east", zl("east", lSvc+"=redis"), "6379/tcp")),
		set(ms("default", "redis-west", zl("west", lSvc+"=redis"), "6379/tcp")),
		set(ms("default", "web-east", zl("east", lSvc+"=web"), "80/http")),
		set(ms("default", "lonely", zl("east", "app=lonely"), "80/http")),
	}
	type step struct {
		ops       []op
		wantDirty []resource.Key
		// want holds the status of some MeshMultiZoneServices after the step.
		want map[resource.Key]Result
	}
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "RelabelMovesAServiceBetweenMultiZoneServices",
		steps: []step{{
			ops:       []op{set(ms("default", "redis-west", zl("west", lSvc+"=web"), "6379/tcp"))},
			wantDirty: []resource.Key{mzKey("default", "redis"), mzKey("default", "web")},
			want: map[resource.Key]Result{
				mzKey("default", "redis"): {
					MeshServices: []resource.MeshServiceRef{ref("redis-east", "", "east", "default")},
					Zones:        zones("east"), Ports: ports("6379/tcp"),
					Conditions: []resource.Condition{matched("default", 1)},
				},
				mzKey("default", "web"): {
					MeshServices: []resource.MeshServiceRef{ref("redis-west", "", "west", "default"), ref("web-east", "", "east", "default")},
					Zones:        zones("east", "west"),
					Conditions:   []resource.Condition{matched("default", 2), portsDiffer("80/http is not on redis-west (zone west); 6379/tcp is not on web-east (zone east)")},
				},
			},
		}},
	}, {
		name: "LabelThatNoStatusShowsChangesNothing",
		steps: []step{{
			ops:       []op{set(ms("default", "redis-west", zl("west", lSvc+"=redis", "team=db"), "6379/tcp"))},
			wantDirty: []resource.Key{},
		}},
	}, {
		name: "SameServiceAgainChangesNothing",
		steps: []step{{
			ops:       []op{set(ms("default", "redis-west", zl("west", lSvc+"=redis"), "6379/tcp"))},
			wantDirty: []resource.Key{},
		}},
	}, {
		name: "NamespaceZoneDisplayNameOrPortsOfAMatchedServiceDirtyIt",
		steps: []step{{
			ops:       []op{set(ms("default", "redis-west", zl("west", lSvc+"=redis", lNS+"=db"), "6379/tcp"))},
			wantDirty: []resource.Key{mzKey("default", "redis")},
		}, {
			ops:       []op{set(ms("default", "redis-west", zl("south", lSvc+"=redis", lNS+"=db"), "6379/tcp"))},
			wantDirty: []resource.Key{mzKey("default", "redis")},
		}, {
			ops:       []op{set(ms("default", "redis-west", zl("south", lSvc+"=redis", lNS+"=db", lDN+"=redis"), "6379/tcp"))},
			wantDirty: []resource.Key{mzKey("default", "redis")},
		}, {
			ops:       []op{set(ms("default", "redis-west", zl("south", lSvc+"=redis", lNS+"=db", lDN+"=redis"), "6379/tcp", "6380/tcp"))},
			wantDirty: []resource.Key{mzKey("default", "redis")},
			want: map[resource.Key]Result{mzKey("default", "redis"): {
				MeshServices: []resource.MeshServiceRef{ref("redis", "db", "south", "default"), ref("redis-east", "", "east", "default")},
				Zones:        zones("east", "south"), Ports: ports("6379/tcp"),
				Conditions: []resource.Condition{matched("default", 2), portsDiffer("6380/tcp is not on redis-east (zone east)")},
			}},
		}},
	}, {
		name: "UnmatchedServiceChangesDirtyNothing",
		steps: []step{{
			ops: []op{
				set(ms("default", "lonely", zl("east", "app=lonelier"), "80/http")),
				set(ms("default", "new", zl("east", "app=new"))),
				del(msKey("default", "lonely")),
				del(msKey("default", "unknown")),
				del(msKey("nomesh", "unknown")),
			},
			wantDirty: []resource.Key{},
		}},
	}, {
		name: "ServiceInAnotherMeshDirtiesOnlyThatMesh",
		steps: []step{{
			ops:       []op{set(ms("other", "redis-east", zl("east", lSvc+"=redis"), "6379/tcp"))},
			wantDirty: []resource.Key{mzKey("other", "redis")},
			want: map[resource.Key]Result{mzKey("default", "redis"): {
				MeshServices: []resource.MeshServiceRef{ref("redis-east", "", "east", "default"), ref("redis-west", "", "west", "default")},
				Zones:        zones("east", "west"), Ports: ports("6379/tcp"),
				Conditions: []resource.Condition{matched("default", 2)},
			}},
		}},
	}, {
		name: "DeleteAndReAddAService",
		steps: []step{{
			ops:       []op{del(msKey("default", "redis-east"))},
			wantDirty: []resource.Key{mzKey("default", "redis")},
			want: map[resource.Key]Result{mzKey("default", "redis"): {
				MeshServices: []resource.MeshServiceRef{ref("redis-west", "", "west", "default")},
				Zones:        zones("west"), Ports: ports("6379/tcp"),
				Conditions: []resource.Condition{matched("default", 1)},
			}},
		}, {
			ops:       []op{set(ms("default", "redis-east", zl("east", lSvc+"=redis"), "6379/tcp"))},
			wantDirty: []resource.Key{mzKey("default", "redis")},
		}},
	}, {
		name: "SelectorChangeRematches",
		steps: []step{{
			ops:       []op{set(mz("default", "redis", map[string]string{"app": "lonely"}))},
			wantDirty: []resource.Key{mzKey("default", "redis")},
			want: map[resource.Key]Result{mzKey("default", "redis"): {
				MeshServices: []resource.MeshServiceRef{ref("lonely", "", "east", "default")},
				Zones:        zones("east"), Ports: ports("80/http"),
				Conditions: []resource.Condition{matched("default", 1)},
			}},
		}, {
			// The old anchor no longer finds it.
			ops:       []op{set(ms("default", "redis-north", zl("north", lSvc+"=redis"), "6379/tcp"))},
			wantDirty: []resource.Key{},
		}, {
			ops:       []op{set(ms("default", "lonely", zl("east", "app=lonely"), "81/http"))},
			wantDirty: []resource.Key{mzKey("default", "redis")},
		}},
	}, {
		name: "ChangesBeforeTheSelectorIsMatched",
		steps: []step{{
			ops: []op{
				set(mz("default", "redis", map[string]string{"app": "lonely"})),
				set(ms("default", "lonely", zl("east", "app=lonely"), "81/http")),
				set(ms("default", "second", zl("west", "app=lonely"), "81/http")),
				del(msKey("default", "second")),
				set(mz("default", "redis", map[string]string{"app": "lonely", resource.LabelZone: "east"})),
			},
			wantDirty: []resource.Key{mzKey("default", "redis")},
			want: map[resource.Key]Result{mzKey("default", "redis"): {
				MeshServices: []resource.MeshServiceRef{ref("lonely", "", "east", "default")},
				Zones:        zones("east"), Ports: ports("81/http"),
				Conditions: []resource.Condition{matched("default", 1)},
			}},
		}},
	}, {
		name: "DeclaredPortsChangeDirtiesOnlyThatService",
		steps: []step{{
			ops:       []op{set(mz("default", "redis", redis, "6379/tcp/main"))},
			wantDirty: []resource.Key{mzKey("default", "redis")},
			want: map[resource.Key]Result{mzKey("default", "redis"): {
				MeshServices: []resource.MeshServiceRef{ref("redis-east", "", "east", "default"), ref("redis-west", "", "west", "default")},
				Zones:        zones("east", "west"), Ports: ports("6379/tcp/main"),
				Conditions: []resource.Condition{matched("default", 2)},
			}},
		}, {
			ops:       []op{set(mz("default", "redis", redis, "6379/tcp/main"))},
			wantDirty: []resource.Key{},
		}},
	}, {
		name: "DeletedMultiZoneServiceIsNotDirtyNorKnown",
		steps: []step{{
			ops: []op{
				set(ms("default", "redis-west", zl("west", lSvc+"=web"), "6379/tcp")),
				del(mzKey("default", "redis")),
				del(mzKey("default", "unknown")),
				del(mzKey("nomesh", "unknown")),
			},
			wantDirty: []resource.Key{mzKey("default", "web")},
		}, {
			ops:       []op{set(mz("default", "redis", redis))},
			wantDirty: []resource.Key{mzKey("default", "redis")},
			want: map[resource.Key]Result{mzKey("default", "redis"): {
				MeshServices: []resource.MeshServiceRef{ref("redis-east", "", "east", "default")},
				Zones:        zones("east"), Ports: ports("6379/tcp"),
				Conditions: []resource.Condition{matched("default", 1)},
			}},
		}},
	}, {
		name: "SelectorRemovedThenEmptySelector",
		steps: []step{{
			ops:       []op{set(mz("default", "redis", nil))},
			wantDirty: []resource.Key{mzKey("default", "redis")},
			want: map[resource.Key]Result{mzKey("default", "redis"): {
				Conditions: []resource.Condition{noMatch("no MeshService can match: spec.selector.meshService is not set")},
			}},
		}, {
			ops:       []op{set(ms("default", "any", zl("east")))},
			wantDirty: []resource.Key{},
		}, {
			ops:       []op{set(mz("default", "redis", map[string]string{}))},
			wantDirty: []resource.Key{mzKey("default", "redis")},
		}, {
			ops:       []op{set(ms("default", "any2", zl("east")))},
			wantDirty: []resource.Key{mzKey("default", "redis")},
		}, {
			ops:       []op{del(msKey("default", "any2"))},
			wantDirty: []resource.Key{mzKey("default", "redis")},
		}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewEngine("local")
			apply(c, base...)
			c.TakeDirty()
			for i, st := range tt.steps {
				apply(c, st.ops...)
				if d := cmp.Diff(st.wantDirty, c.TakeDirty(), cmpopts.EquateEmpty()); d != "" {
					t.Errorf("step %d: TakeDirty (-want +got):\n%s", i, d)
				}
				for k, want := range st.want {
					got, ok := c.Status(k)
					if !ok {
						t.Fatalf("step %d: Status(%s): not found", i, k)
					}
					if d := cmp.Diff(want, got); d != "" {
						t.Errorf("step %d: Status(%s) (-want +got):\n%s", i, k, d)
					}
				}
			}
		})
	}
}

// TestEngine_StatusOfUnknownKeys checks that Status answers only for
// MeshMultiZoneServices the engine holds.
func TestEngine_StatusOfUnknownKeys(t *testing.T) {
	c := NewEngine("local")
	apply(c, set(mz("default", "redis", map[string]string{lSvc: "redis"})), set(ms("default", "redis", zl("east", lSvc+"=redis"))))
	for _, k := range []resource.Key{
		mzKey("default", "nope"), mzKey("nomesh", "redis"), msKey("default", "redis"),
	} {
		if r, ok := c.Status(k); ok {
			t.Errorf("Status(%s) = %+v, true; want false", k, r)
		}
	}
	apply(c, del(mzKey("default", "redis")))
	if _, ok := c.Status(mzKey("default", "redis")); ok {
		t.Errorf("Status of a deleted MeshMultiZoneService: found")
	}
	if svcs, mzs := c.Sizes(); svcs != 1 || mzs != 0 {
		t.Errorf("Sizes() = %d, %d; want 1, 0", svcs, mzs)
	}
	apply(c, del(msKey("default", "redis")))
	if len(c.meshes) != 0 {
		t.Errorf("an empty mesh is kept: %d meshes", len(c.meshes))
	}
}

// TestEngine_KeepsNoReferenceToCallerData checks that changing the maps and
// slices of objects after setting them changes nothing in the engine.
func TestEngine_KeepsNoReferenceToCallerData(t *testing.T) {
	c := NewEngine("local")
	sel := map[string]string{lSvc: "redis"}
	m := mz("default", "redis", sel, "6379/tcp")
	labels := zl("east", lSvc+"=redis")
	s := ms("default", "a", labels, "6379/tcp")
	apply(c, set(m), set(s))
	want, _ := c.Status(m.Key())
	sel[lSvc] = "other"
	m.Spec.(*resource.MeshMultiZoneServiceSpec).Ports[0].Port = 1
	labels[resource.LabelZone] = "west"
	s.Spec.(*resource.MeshServiceSpec).Ports[0].Port = 2
	got, _ := c.Status(m.Key())
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("status changed with the caller's data (-before +after):\n%s", d)
	}
}

// TestResult_Apply checks that Apply writes the fields the engine decides,
// replaces only its own conditions, and reports whether anything changed.
func TestResult_Apply(t *testing.T) {
	vips := resource.Condition{Type: "VIPsAllocated", Status: resource.ConditionFalse, Reason: "PoolExhausted"}
	r := Result{
		MeshServices: []resource.MeshServiceRef{ref("redis", "", "east", "default")},
		Zones:        zones("east"),
		Ports:        ports("6379/tcp"),
		Conditions:   []resource.Condition{matched("default", 1)},
	}
	tests := []struct {
		name        string
		st          resource.MultiZoneServiceStatus
		r           Result
		want        resource.MultiZoneServiceStatus
		wantChanged bool
	}{{
		name: "IntoEmpty",
		r:    r,
		want: resource.MultiZoneServiceStatus{
			ServiceStatus: resource.ServiceStatus{Conditions: r.Conditions},
			MeshServices:  r.MeshServices, Zones: r.Zones, Ports: r.Ports,
		},
		wantChanged: true,
	}, {
		name: "KeepsOtherFieldsAndConditions",
		st: resource.MultiZoneServiceStatus{
			ServiceStatus: resource.ServiceStatus{
				VIPs:       []resource.VIP{{IP: "243.0.0.1", Type: resource.VIPKuma}},
				Conditions: []resource.Condition{vips, portsDiffer("old"), noMatch("old")},
			},
			Zones: zones("west"),
		},
		r: r,
		want: resource.MultiZoneServiceStatus{
			ServiceStatus: resource.ServiceStatus{
				VIPs:       []resource.VIP{{IP: "243.0.0.1", Type: resource.VIPKuma}},
				Conditions: []resource.Condition{vips, matched("default", 1)},
			},
			MeshServices: r.MeshServices, Zones: r.Zones, Ports: r.Ports,
		},
		wantChanged: true,
	}, {
		name: "Unchanged",
		st: resource.MultiZoneServiceStatus{
			ServiceStatus: resource.ServiceStatus{Conditions: []resource.Condition{matched("default", 1), vips}},
			MeshServices:  r.MeshServices, Zones: r.Zones, Ports: ports("6379/tcp"),
		},
		r: r,
		// Unchanged: the conditions are not even reordered.
		want: resource.MultiZoneServiceStatus{
			ServiceStatus: resource.ServiceStatus{Conditions: []resource.Condition{matched("default", 1), vips}},
			MeshServices:  r.MeshServices, Zones: r.Zones, Ports: r.Ports,
		},
	}, {
		name: "EmptyResultClearsFields",
		st: resource.MultiZoneServiceStatus{
			ServiceStatus: resource.ServiceStatus{Conditions: []resource.Condition{matched("default", 1)}},
			MeshServices:  r.MeshServices, Zones: r.Zones, Ports: r.Ports,
		},
		r:           Result{},
		want:        resource.MultiZoneServiceStatus{},
		wantChanged: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.st
			if got := tt.r.Apply(&st); got != tt.wantChanged {
				t.Errorf("Apply reported a change: %t; want %t", got, tt.wantChanged)
			}
			if d := cmp.Diff(tt.want, st, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("status (-want +got):\n%s", d)
			}
		})
	}
}
