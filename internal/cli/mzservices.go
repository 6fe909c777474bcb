package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/meshnames/meshnames/internal/client"
	"github.com/meshnames/meshnames/internal/resource"
)

// multiZoneColumns are the kind columns of MeshMultiZoneServices in `get`:
// the ports offered (status.ports, else the declared ports while the zone
// has not computed them), and in the wide table how many MeshServices
// match and their zones.
func multiZoneColumns() []column {
	return []column{
		{name: "SELECTOR", value: func(o *resource.Object) string {
			if s := o.Spec.(*resource.MeshMultiZoneServiceSpec).Selector.MeshService; s != nil {
				return formatSelector(s.MatchLabels)
			}
			return ""
		}},
		{name: "PORTS", value: func(o *resource.Object) string {
			if st := multiZoneStatus(o); st != nil && len(st.Ports) > 0 {
				return formatPorts(st.Ports)
			}
			return formatPorts(o.Spec.(*resource.MeshMultiZoneServiceSpec).Ports)
		}},
		{name: "VIPS", value: vips},
		{name: "MESHSERVICES", wide: true, value: matchedCount},
		{name: "ZONES", wide: true, value: func(o *resource.Object) string { return formatZones(multiZoneStatus(o)) }},
		{name: "HOSTNAMES", wide: true, value: hostnames},
	}
}

// multiZoneStatus returns the status of a MeshMultiZoneService, or nil.
func multiZoneStatus(o *resource.Object) *resource.MultiZoneServiceStatus {
	st, _ := o.Status.(*resource.MultiZoneServiceStatus)
	return st
}

// matchedCount is the number of MeshServices the zone found, or "" while
// it has not looked (no MeshServicesMatched condition yet).
func matchedCount(o *resource.Object) string {
	st := multiZoneStatus(o)
	if st == nil || !slices.ContainsFunc(st.Conditions, func(c resource.Condition) bool {
		return c.Type == resource.ConditionMeshServicesMatched
	}) {
		return ""
	}
	return strconv.Itoa(len(st.MeshServices))
}

func formatZones(st *resource.MultiZoneServiceStatus) string {
	if st == nil {
		return ""
	}
	var out []string
	for _, z := range st.Zones {
		out = append(out, z.Name)
	}
	return strings.Join(out, ",")
}

func newInspectMultiZoneCmd(env Env, newClient func() (*client.Client, error)) *cobra.Command {
	var mesh, output string
	c := &cobra.Command{
		Use:     "multizoneservices",
		Aliases: []string{"meshmultizoneservices", "mzsvc"},
		Short:   "Show what the MeshMultiZoneServices of a mesh group",
		Long: `List every MeshMultiZoneService of the mesh with what this zone computed for
it: how many MeshServices of the mesh its selector matches, their zones and
the ports it offers: the declared spec.ports, or else the ports every matched
MeshService has (same number and protocol). Then list the matched
MeshServices (name is the display name) and the conditions: MeshServicesMatched,
and PortsConsistent when a port is left out because not every matched
MeshService has it. A "-" in MATCHED means the zone has not computed the
status yet.`,
		Example: `  meshnames inspect multizoneservices
  meshnames inspect mzsvc -m prod -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := clientFor(output, newClient)
			if err != nil {
				return err
			}
			return inspectMultiZone(cmd.Context(), env, c, mesh, output)
		},
	}
	c.Flags().StringVarP(&mesh, "mesh", "m", defaultMesh, "mesh to inspect")
	c.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return c
}

// MultiZoneRow is one MeshMultiZoneService of `inspect multizoneservices`.
type MultiZoneRow struct {
	Name     string            `json:"name"`
	Selector map[string]string `json:"selector"`
	// Computed is false until the zone has computed the status.
	Computed      bool                      `json:"computed"`
	MeshServices  []resource.MeshServiceRef `json:"meshServices"`
	Zones         []resource.ZoneRef        `json:"zones"`
	Ports         []resource.Port           `json:"ports"`
	PortsDeclared bool                      `json:"portsDeclared"`
	Conditions    []resource.Condition      `json:"conditions"`
}

func inspectMultiZone(ctx context.Context, env Env, c *client.Client, mesh, output string) error {
	objs, err := c.ListAll(ctx, resource.MustLookup(resource.MeshMultiZoneService), mesh, nil)
	if err != nil {
		return err
	}
	return printMultiZone(env, mesh, objs, output)
}

func printMultiZone(env Env, mesh string, objs []*resource.Object, output string) error {
	rows := []MultiZoneRow{}
	for _, o := range objs {
		spec := o.Spec.(*resource.MeshMultiZoneServiceSpec)
		r := MultiZoneRow{Name: o.Name, PortsDeclared: len(spec.Ports) > 0, Computed: matchedCount(o) != "",
			MeshServices: []resource.MeshServiceRef{}, Zones: []resource.ZoneRef{}, Ports: spec.Ports, Conditions: []resource.Condition{}}
		if s := spec.Selector.MeshService; s != nil {
			r.Selector = s.MatchLabels
			if r.Selector == nil {
				r.Selector = map[string]string{}
			}
		}
		if st := multiZoneStatus(o); st != nil {
			r.MeshServices = append(r.MeshServices, st.MeshServices...)
			r.Zones = append(r.Zones, st.Zones...)
			r.Conditions = append(r.Conditions, st.Conditions...)
			if r.Computed {
				r.Ports = st.Ports
			}
		}
		if r.Ports == nil {
			r.Ports = []resource.Port{}
		}
		rows = append(rows, r)
	}
	if output == "json" {
		return printJSON(env, struct {
			Mesh     string         `json:"mesh"`
			Services []MultiZoneRow `json:"multiZoneServices"`
		}{mesh, rows})
	}
	if len(rows) == 0 {
		fmt.Fprintf(env.Err, "No meshmultizoneservices found in mesh %s.\n", mesh)
		return nil
	}
	tw := tabwriter.NewWriter(env.Out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tSELECTOR\tMATCHED\tZONES\tPORTS")
	anyMatch, anyCond := false, false
	for _, r := range rows {
		matched, zones := "-", "-"
		if r.Computed {
			matched = strconv.Itoa(len(r.MeshServices))
			var zs []string
			for _, z := range r.Zones {
				zs = append(zs, z.Name)
			}
			zones = orNone(strings.Join(zs, ","))
		}
		ports := orNone(formatPorts(r.Ports))
		switch {
		case r.PortsDeclared:
			ports += " (declared)"
		case r.Computed:
			ports += " (common)"
		}
		sel := "-"
		if r.Selector != nil {
			sel = formatSelector(r.Selector)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, sel, matched, zones, ports)
		anyMatch = anyMatch || len(r.MeshServices) > 0
		anyCond = anyCond || len(r.Conditions) > 0
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if anyMatch {
		fmt.Fprintln(env.Out, "\nMatched MeshServices:")
		tw := tabwriter.NewWriter(env.Out, 0, 8, 3, ' ', 0)
		fmt.Fprintln(tw, "SERVICE\tNAME\tNAMESPACE\tZONE")
		for _, r := range rows {
			for _, m := range r.MeshServices {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, m.Name, orNone(m.Namespace), orNone(m.Zone))
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if anyCond {
		fmt.Fprintln(env.Out, "\nConditions:")
		tw := tabwriter.NewWriter(env.Out, 0, 8, 3, ' ', 0)
		fmt.Fprintln(tw, "SERVICE\tTYPE\tSTATUS\tREASON\tMESSAGE")
		for _, r := range rows {
			for _, c := range r.Conditions {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, c.Type, c.Status, orNone(c.Reason), orNone(c.Message))
			}
		}
		return tw.Flush()
	}
	return nil
}
