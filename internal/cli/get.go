package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshnames/meshnames/internal/client"
	"github.com/meshnames/meshnames/internal/resource"
)

const defaultMesh = "default"

func newGetCmd(env Env, newClient func() (*client.Client, error)) *cobra.Command {
	var mesh, output string
	cmd := &cobra.Command{
		Use:   "get KIND [NAME]",
		Short: "Show resources",
		Long: `Show one resource, or list the resources of a kind.

KIND is one of:
` + kindsHelp() + `
Output formats: table (default), wide (more columns), yaml (documents that
"meshnames apply" accepts), json.

On a global control plane, "get zones" shows each zone's sync stream:
online or offline, when the global last heard from it, the revisions sent,
acknowledged and received, resources and bytes each way, and refusals.`,
		Example: `  meshnames get meshservices
  meshnames get meshservice redis -m default -o yaml
  meshnames get hostnamegenerators -o wide
  meshnames get zones --server http://global:5681   # each zone's sync stream`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains([]string{"table", "wide", "yaml", "json"}, output) {
				return fmt.Errorf("invalid --output %q: use table, wide, yaml or json", output)
			}
			d, c, m, err := target(args[0], mesh, newClient)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if len(args) == 2 {
				obj, err := c.Get(ctx, d, m, args[1])
				if err != nil {
					return meshMissing(ctx, c, d, m, err)
				}
				return printObjects(env, d, []*resource.Object{obj}, output, true)
			}
			objs, err := c.ListAll(ctx, d, m, nil)
			if err != nil {
				return meshMissing(ctx, c, d, m, err)
			}
			if len(objs) == 0 && d.MeshScoped {
				// An empty list of a mesh that does not exist is a typo
				// in -m, not an empty mesh.
				if err := meshMissing(ctx, c, d, m, nil); err != nil {
					return err
				}
			}
			if len(objs) == 0 && (output == "table" || output == "wide") {
				where := ""
				if d.MeshScoped {
					where = " in mesh " + m
				}
				fmt.Fprintf(env.Err, "No %s found%s.\n", d.Plural, where)
				return nil
			}
			if d.Kind == resource.Zone && (output == "table" || output == "wide") {
				if info, err := c.Info(ctx); err == nil && info.Mode == resource.ModeGlobal {
					return printZones(ctx, env, c, objs, output == "wide")
				}
			}
			return printObjects(env, d, objs, output, false)
		},
	}
	cmd.Flags().StringVarP(&mesh, "mesh", "m", defaultMesh, "mesh of mesh-scoped kinds")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, wide, yaml or json")
	return cmd
}

// meshMissing returns an error saying that mesh does not exist when d is
// mesh-scoped and the server has no such mesh; otherwise it returns err (a
// failed read of the mesh itself is reported as err, or that failure when
// err is nil).
func meshMissing(ctx context.Context, c *client.Client, d *resource.Descriptor, mesh string, err error) error {
	if !d.MeshScoped || (err != nil && !client.IsNotFound(err)) {
		return err
	}
	_, merr := c.Get(ctx, resource.MustLookup(resource.Mesh), "", mesh)
	switch {
	case client.IsNotFound(merr):
		return fmt.Errorf("mesh %q does not exist (meshnames get meshes lists the meshes)", mesh)
	case err == nil:
		return merr
	}
	return err
}

// target resolves a KIND argument and the -m flag (which only mesh-scoped
// kinds use) and makes the client.
func target(kind, mesh string, newClient func() (*client.Client, error)) (*resource.Descriptor, *client.Client, string, error) {
	d, err := kindArg(kind)
	if err != nil {
		return nil, nil, "", err
	}
	c, err := newClient()
	if err != nil {
		return nil, nil, "", err
	}
	if !d.MeshScoped {
		mesh = ""
	}
	return d, c, mesh, nil
}

func printObjects(env Env, d *resource.Descriptor, objs []*resource.Object, output string, single bool) error {
	switch output {
	case "yaml":
		for i, o := range objs {
			b, err := resource.EncodeYAML(o)
			if err != nil {
				return err
			}
			if i > 0 {
				fmt.Fprintln(env.Out, "---")
			}
			_, _ = env.Out.Write(b)
		}
		return nil
	case "json":
		var v any = objs[0]
		if !single {
			v = struct {
				Total int                `json:"total"`
				Items []*resource.Object `json:"items"`
			}{len(objs), objs}
		}
		return printJSON(env, v)
	}
	return printTable(env.Out, d, objs, output == "wide", env.Now())
}

type column struct {
	name  string
	wide  bool
	value func(o *resource.Object) string
}

func printTable(w io.Writer, d *resource.Descriptor, objs []*resource.Object, wide bool, now time.Time) error {
	var cols []column
	if d.MeshScoped {
		cols = append(cols, column{name: "MESH", value: func(o *resource.Object) string { return o.Mesh }})
	}
	cols = append(cols, column{name: "NAME", value: func(o *resource.Object) string { return o.Name }})
	cols = append(cols, kindColumns(d.Kind)...)
	cols = append(cols, column{name: "AGE", value: func(o *resource.Object) string { return age(now.Sub(o.CreationTime)) }})
	if wide {
		cols = append(cols, column{name: "LABELS", wide: true, value: func(o *resource.Object) string { return formatMap(userLabels(o.Labels)) }})
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	var header []string
	for _, c := range cols {
		if !c.wide || wide {
			header = append(header, c.name)
		}
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, o := range objs {
		var row []string
		for _, c := range cols {
			if !c.wide || wide {
				row = append(row, orNone(c.value(o)))
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

func kindColumns(k resource.Kind) []column {
	switch k {
	case resource.Zone:
		return []column{{name: "ENABLED", value: func(o *resource.Object) string {
			s := o.Spec.(*resource.ZoneSpec)
			return strconv.FormatBool(s.Enabled == nil || *s.Enabled)
		}}}
	case resource.HostnameGenerator:
		return []column{
			{name: "SELECTOR", value: func(o *resource.Object) string {
				kind, sel := o.Spec.(*resource.HostnameGeneratorSpec).Selector.Target()
				if sel == nil {
					return ""
				}
				return string(kind) + formatSelector(sel.MatchLabels)
			}},
			{name: "TEMPLATE", value: func(o *resource.Object) string { return o.Spec.(*resource.HostnameGeneratorSpec).Template }},
		}
	case resource.Dataplane:
		return []column{
			{name: "ADDRESS", value: func(o *resource.Object) string { return o.Spec.(*resource.DataplaneSpec).Networking.Address }},
			{name: "SERVICES", value: func(o *resource.Object) string {
				var svcs []string
				for _, in := range o.Spec.(*resource.DataplaneSpec).Networking.Inbound {
					svcs = append(svcs, fmt.Sprintf("%s:%d", in.Tags[resource.TagService], in.Port))
				}
				return strings.Join(svcs, ",")
			}},
		}
	case resource.MeshService:
		return []column{
			{name: "PORTS", value: func(o *resource.Object) string { return formatPorts(o.Spec.(*resource.MeshServiceSpec).Ports) }},
			{name: "VIPS", value: vips},
			{name: "HOSTNAMES", wide: true, value: hostnames},
		}
	case resource.MeshExternalService:
		return []column{
			{name: "MATCH", value: func(o *resource.Object) string {
				var ms []string
				for _, m := range o.Spec.(*resource.MeshExternalServiceSpec).Match {
					ms = append(ms, fmt.Sprintf("%s:%s:%d/%s", m.Type, m.Value, m.Port, m.Protocol))
				}
				return strings.Join(ms, ",")
			}},
			{name: "DESTINATION", value: func(o *resource.Object) string {
				if d := o.Spec.(*resource.MeshExternalServiceSpec).Destination; d != nil {
					return d.Type
				}
				return ""
			}},
			{name: "VIPS", value: vips},
			{name: "HOSTNAMES", wide: true, value: hostnames},
			{name: "CLUSTERS", wide: true, value: func(o *resource.Object) string {
				return strings.Join(o.Spec.(*resource.MeshExternalServiceSpec).ClusterNames(o.Name), ",")
			}},
		}
	case resource.MeshMultiZoneService:
		return multiZoneColumns()
	case resource.ZoneIngress:
		n := func(o *resource.Object) resource.ZoneIngressNetworking {
			return o.Spec.(*resource.ZoneIngressSpec).Networking
		}
		return []column{
			{name: "ZONE", value: func(o *resource.Object) string { return o.Labels[resource.LabelZone] }},
			{name: "ADDRESS", value: func(o *resource.Object) string { return resource.HostPort(n(o).Address, n(o).Port) }},
			{name: "ADVERTISED", value: func(o *resource.Object) string {
				return resource.HostPort(n(o).AdvertisedAddress, n(o).AdvertisedPort)
			}},
		}
	}
	return nil
}

func serviceStatus(o *resource.Object) *resource.ServiceStatus {
	if s, ok := o.Status.(resource.ServiceStatusOf); ok && s != nil {
		return s.Service()
	}
	return nil
}

func vips(o *resource.Object) string {
	s := serviceStatus(o)
	if s == nil {
		return ""
	}
	var out []string
	for _, v := range s.VIPs {
		out = append(out, v.IP)
	}
	return strings.Join(out, ",")
}

func hostnames(o *resource.Object) string {
	s := serviceStatus(o)
	if s == nil {
		return ""
	}
	var out []string
	for _, a := range s.Addresses {
		if a.Status == resource.AddressAvailable {
			out = append(out, a.Hostname)
		}
	}
	return strings.Join(out, ",")
}

func formatPorts(ports []resource.Port) string {
	var out []string
	for _, p := range ports {
		s := strconv.Itoa(p.Port)
		if p.TargetPort != nil {
			if p.TargetPort.IsName {
				s += ":" + p.TargetPort.String
			} else {
				s += ":" + strconv.Itoa(p.TargetPort.Int)
			}
		}
		out = append(out, s+"/"+p.AppProtocol)
	}
	return strings.Join(out, ",")
}

func formatSelector(m map[string]string) string { return "{" + formatMap(m) + "}" }

func formatMap(m map[string]string) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return strings.Join(out, ",")
}

// userLabels drops the labels the control plane sets on every resource.
func userLabels(l map[string]string) map[string]string {
	out := maps.Clone(l)
	for _, k := range []string{resource.LabelOrigin, resource.LabelZone, resource.LabelDisplayName, resource.LabelMesh} {
		delete(out, k)
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// age formats a duration the way kubectl does: 45s, 12m, 5h, 3d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

func newDeleteCmd(env Env, newClient func() (*client.Client, error)) *cobra.Command {
	var mesh string
	cmd := &cobra.Command{
		Use:   "delete KIND NAME",
		Short: "Delete a resource",
		Long: `Delete one resource. KIND is one of:
` + kindsHelp() + `
A mesh that still holds resources cannot be deleted: delete its resources first.`,
		Example: `  meshnames delete meshservice redis -m default`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, c, m, err := target(args[0], mesh, newClient)
			if err != nil {
				return err
			}
			if err := c.Delete(cmd.Context(), d, m, args[1]); err != nil {
				return meshMissing(cmd.Context(), c, d, m, err)
			}
			fmt.Fprintf(env.Out, "%s deleted\n", resource.Key{Kind: d.Kind, Mesh: m, Name: args[1]})
			return nil
		},
	}
	cmd.Flags().StringVarP(&mesh, "mesh", "m", defaultMesh, "mesh of mesh-scoped kinds")
	return cmd
}

func newVersionCmd(env Env, newClient func() (*client.Client, error)) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary and of the server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(env.Out, "Client: meshnames %s\n", Version)
			c, err := newClient()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
			defer cancel()
			info, err := c.Info(ctx)
			if err != nil {
				fmt.Fprintf(env.Out, "Server: unavailable (%s)\n", firstLine(err.Error()))
				return nil
			}
			zone := ""
			if info.Zone != "" {
				zone = ", zone " + info.Zone
			}
			fmt.Fprintf(env.Out, "Server: %s %s (%s mode%s) at %s\n", info.Product, info.Version, info.Mode, zone, c.Server())
			return nil
		},
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
