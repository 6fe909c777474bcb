package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/meshnames/meshnames/internal/resource"
)

// This file tests the lists: pages, filters by label and by name, across
// meshes, and bodies that are what encoding/json writes.

func TestList_PagesAndFilters(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	for i := range 25 {
		team := "a"
		if i%5 == 0 {
			team = "b"
		}
		body := fmt.Sprintf("type: MeshService\nlabels:\n  team: %s\nspec: {}\n", team)
		if r := e.put(fmt.Sprintf("/meshes/default/meshservices/svc-%02d", i), body); r.code != http.StatusCreated {
			t.Fatalf("PUT = %d %s", r.code, r.body)
		}
	}
	var names []string
	path := "/meshes/default/meshservices?size=10"
	for pages := 0; path != ""; pages++ {
		if pages > 3 {
			t.Fatal("too many pages")
		}
		r := e.do(http.MethodGet, path, "", "")
		var page ListPage
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		if page.Total != 25 {
			t.Errorf("total = %d, want 25", page.Total)
		}
		for _, o := range page.Items {
			names = append(names, o.Name)
		}
		path = ""
		if page.Next != nil {
			path = strings.TrimPrefix(*page.Next, e.srv.URL)
		}
	}
	if len(names) != 25 || !slices.IsSorted(names) || names[0] != "svc-00" {
		t.Errorf("paged names = %v; want svc-00..svc-24 in order", names)
	}

	r := e.do(http.MethodGet, "/meshes/default/meshservices?filter%5Blabels.team%5D=b", "", "")
	var page ListPage
	_ = json.Unmarshal(r.body, &page)
	if page.Total != 5 || page.Next != nil {
		t.Errorf("filtered: total %d next %v; want 5 and no next", page.Total, page.Next)
	}
	for _, o := range page.Items {
		if o.Labels["team"] != "b" {
			t.Errorf("filter returned %s with team %q", o.Name, o.Labels["team"])
		}
	}
}

// TestList_BodyIsWhatJSONMarshalWrites pins the hand-assembled list body
// (ListPage.appendJSON) to what json.Marshal writes for the page: with a
// next link (escaped &), an empty page and a page of objects with status.
func TestList_BodyIsWhatJSONMarshalWrites(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	for i := range 3 {
		body := "type: MeshService\nlabels:\n  team: a\nspec:\n  ports:\n  - port: 80\n"
		if r := e.put(fmt.Sprintf("/meshes/default/meshservices/svc-%d", i), body); r.code != http.StatusCreated {
			t.Fatalf("PUT = %d %s", r.code, r.body)
		}
	}
	for _, path := range []string{"/meshes/default/meshservices?size=2", "/meshes/default/meshservices?offset=2",
		"/meshes/default/meshexternalservices", "/meshservices"} {
		r := e.do(http.MethodGet, path, "", "")
		if r.code != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, r.code, r.body)
		}
		var page ListPage
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		if page.Items == nil {
			page.Items = []*resource.Object{}
		}
		want, err := json.Marshal(page)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.body) != string(want)+"\n" {
			t.Errorf("GET %s:\n%s\nwant what json.Marshal writes\n%s", path, r.body, want)
		}
	}
}

// Kuma's ?name= filter keeps the names that contain the value; the
// collection of a mesh-scoped kind at the top lists every mesh.
func TestList_NameFilterAndCrossMesh(t *testing.T) {
	e := newEnv(t, resource.ModeStandalone)
	if r := e.put("/meshes/other", "type: Mesh\n"); r.code != http.StatusCreated {
		t.Fatalf("PUT mesh = %d %s", r.code, r.body)
	}
	for _, p := range []string{"/meshes/default/meshservices/redis", "/meshes/default/meshservices/redis-cache",
		"/meshes/default/meshservices/web", "/meshes/other/meshservices/redis"} {
		if r := e.put(p, "type: MeshService\nspec: {}\n"); r.code != http.StatusCreated {
			t.Fatalf("PUT %s = %d %s", p, r.code, r.body)
		}
	}
	tests := []struct {
		path string
		want []string
	}{
		{"/meshes/default/meshservices?name=redis", []string{"default/redis", "default/redis-cache"}},
		{"/meshes/default/meshservices?name=cache", []string{"default/redis-cache"}},
		{"/meshes/default/meshservices?name=nope", nil},
		{"/meshservices", []string{"default/redis", "default/redis-cache", "default/web", "other/redis"}},
		{"/meshservices?name=redis&size=2", []string{"default/redis", "default/redis-cache"}},
		{"/meshservices?name=redis&offset=2", []string{"other/redis"}},
		{"/meshes?name=oth", []string{"/other"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := e.do(http.MethodGet, tt.path, "", "")
			if r.code != http.StatusOK {
				t.Fatalf("GET = %d %s", r.code, r.body)
			}
			var page ListPage
			if err := json.Unmarshal(r.body, &page); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range page.Items {
				got = append(got, o.Mesh+"/"+o.Name)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("items (-want +got):\n%s", d)
			}
		})
	}
}
