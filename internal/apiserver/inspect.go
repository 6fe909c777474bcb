package apiserver

import (
	"fmt"
	"net/http"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/hostname"
	"github.com/meshnames/meshnames/internal/resource"
)

// hostnames answers the _hostnames inspection.
func (s *Server) hostnames(w http.ResponseWriter, r *http.Request, req request) {
	if !req.d.ServiceKind {
		writeError(w, newError(http.StatusBadRequest, "Invalid path",
			"only meshservices, meshexternalservices and meshmultizoneservices have hostnames"))
		return
	}
	report, err := HostnamesReport(s.opts.Cache, s.opts.Admission.Mode(), s.opts.Admission.Zone(), req.key())
	if err != nil {
		writeError(w, asError(err))
		return
	}
	writeJSON(w, http.StatusOK, report)
}

// HostnamesReport is the body of the _hostnames inspection of the service
// k on a control plane of mode in zone, as the API answers it (the GUI
// shows the same): what every HostnameGenerator makes of it. Rendering is
// computed here, with the engine's own rules; whether a name is held or
// lost to another service comes from the status the leader's controller
// wrote, because only it sees every service of the mesh. A global control
// plane computes no hostnames (each zone names what it holds), so there
// the report holds what the service's zone gives it, as its status says,
// and nothing for a service no zone reports on (globalReport). The error
// is an *Error (404 when k does not exist).
func HostnamesReport(c *cache.Cache, mode, zone string, k resource.Key) (api.HostnamesReport, error) {
	obj, ok := c.Get(k)
	if !ok {
		return api.HostnamesReport{}, notFound(k)
	}
	if mode == resource.ModeGlobal {
		return globalReport(obj), nil
	}
	objs, _ := c.List(cache.Query{Kind: resource.HostnameGenerator})
	var gens []hostname.Generator
	var unusable []api.HostnameOutcome
	for _, o := range objs {
		g, err := resource.HostnameGeneratorOf(o)
		if err != nil {
			unusable = append(unusable, api.HostnameOutcome{Generator: o.Name, Reason: "the generator cannot be used: " + err.Error()})
			continue
		}
		gens = append(gens, g)
	}
	var addrs []resource.Address
	if st, ok := obj.Status.(resource.ServiceStatusOf); ok && st != nil {
		addrs = st.Service().Addresses
	}
	report := api.HostnamesReport{Kind: obj.Kind, Mesh: obj.Mesh, Name: obj.Name, Items: []api.HostnameOutcome{}}
	for _, o := range hostname.Explain(gens, resource.HostnameServiceOf(obj), zone) {
		report.Items = append(report.Items, outcome(o, addrs))
	}
	report.Items = append(report.Items, unusable...)
	return report, nil
}

// globalReport is the _hostnames inspection of obj on a global control
// plane: the names the generators of the service's zone give it, as the
// zone wrote them into the status it synced (in the status's precedence
// order), each with that zone. The global's own generators are not
// rendered: they would name the service after its global name
// (<name>-<hash>), which no zone gives it, and the name would stay
// Pending forever, since no controller here decides it. A service created
// on the global has no such status (every zone names its own copy), and
// gets no items.
func globalReport(obj *resource.Object) api.HostnamesReport {
	report := api.HostnamesReport{Kind: obj.Kind, Mesh: obj.Mesh, Name: obj.Name, Items: []api.HostnameOutcome{}}
	st, ok := obj.Status.(resource.ServiceStatusOf)
	zone := obj.Labels[resource.LabelZone]
	if !ok || st == nil || zone == "" || obj.Labels[resource.LabelOrigin] != resource.OriginZone {
		return report
	}
	for _, a := range st.Service().Addresses {
		if a.Origin.Kind != resource.OriginHostnameGenerator {
			continue // the service's own names: no generator's outcome
		}
		report.Items = append(report.Items, api.HostnameOutcome{Generator: a.Origin.Name, Selects: true,
			Hostname: a.Hostname, Status: a.Status, Reason: a.Reason, Zone: zone})
	}
	return report
}

func outcome(o hostname.Outcome, addrs []resource.Address) api.HostnameOutcome {
	out := api.HostnameOutcome{Generator: o.Generator, Selects: o.Selects, Hostname: o.Hostname}
	switch {
	case !o.Selects:
		out.Reason = o.NotSelected
		return out
	case o.Err != "":
		out.Status, out.Reason = resource.AddressNotAvailable, o.Err
		return out
	}
	for _, a := range addrs {
		if a.Origin.Name == o.Generator && a.Hostname == o.Hostname {
			out.Status, out.Reason = a.Status, a.Reason
			return out
		}
	}
	for _, a := range addrs {
		if a.Hostname == o.Hostname {
			out.Status = a.Status
			out.Reason = fmt.Sprintf("the same name as generator %s gives this service, which precedes it", a.Origin.Name)
			return out
		}
	}
	out.Status = api.StatusPending
	out.Reason = "the controller has not written this result into the service's status yet"
	return out
}
