package gui

import (
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/resource"
)

// pageFiles are the templates of the pages, each rendered inside
// templates/layout.html.
var pageFiles = []string{"overview.html", "services.html", "service.html", "generators.html", "dns.html", "search.html", "zones.html", "zoneingresses.html", "dataplanes.html", "dataplane.html", "error.html"}

func parsePages() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, f := range pageFiles {
		out[f] = parsePage(f)
	}
	return out
}

func parsePage(name string) *template.Template {
	return template.Must(template.New(name).Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/parts.html", "templates/"+name))
}

var funcs = template.FuncMap{
	"serviceHref": serviceHref,
	"dataplaneHref": func(k resource.Key) string {
		return Prefix + "dataplanes/" + url.PathEscape(k.Mesh) + "/" + url.PathEscape(k.Name)
	},
	"protocol": protocolName,
	"plural":   func(k resource.Kind) string { return resource.MustLookup(k).Plural },
	"generatorHref": func(name string) string {
		return Prefix + "generators#" + generatorID(name)
	},
	"generatorID": generatorID,
	"searchHref":  func(q string) string { return Prefix + "search?" + url.Values{"q": {q}}.Encode() },
	"servicesHref": func(q string) string {
		return Prefix + "services?" + url.Values{"q": {q}}.Encode()
	},
	"num":       num,
	"time":      formatTime,
	"ago":       ago,
	"percent":   func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) },
	"share":     share,
	"available": func(status string) bool { return status == resource.AddressAvailable },
	"join":      strings.Join,
	"labels": func(m map[string]string) string {
		return formatLabels(sortedLabels(m))
	},
	"isService": func(k resource.Kind) bool { return kindRank(k) < len(serviceKinds) },
	"add":       func(a, b int) int { return a + b },
	"deref":     func(k *resource.Key) resource.Key { return *k },
	"holderKey": func(h api.HistoryHolding) resource.Key { return resource.Key{Kind: h.Kind, Mesh: h.Mesh, Name: h.Name} },
}

// share is n of size as a percentage, with two decimals ("<0.01%" for a
// share too small to show as more than none).
func share(n, size uint64) string {
	if size == 0 || n == 0 {
		return "0%"
	}
	p := 100 * float64(n) / float64(size)
	if p < 0.01 {
		return "<0.01%"
	}
	return strconv.FormatFloat(p, 'f', 2, 64) + "%"
}

// serviceHref is the GUI path of a service.
func serviceHref(k resource.Key) string {
	return Prefix + "services/" + resource.MustLookup(k.Kind).Plural + "/" + url.PathEscape(k.Mesh) + "/" + url.PathEscape(k.Name)
}

// generatorID is the HTML id of a generator's section.
func generatorID(name string) string { return "gen-" + name }

func formatLabels(kvs []keyValue) string {
	parts := make([]string, len(kvs))
	for i, kv := range kvs {
		parts[i] = kv.Key + "=" + kv.Value
	}
	return strings.Join(parts, ", ")
}

// num writes n with thousands separators.
func num(n any) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}
