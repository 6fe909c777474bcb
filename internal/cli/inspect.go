package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/client"
	"github.com/meshnames/meshnames/internal/resource"
)

func newInspectCmd(env Env, newClient func() (*client.Client, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inspect",
		Short: "Explain what the control plane computed",
	}
	var mesh, output string
	hostnames := &cobra.Command{
		Use:   "hostnames [KIND NAME]",
		Short: "List the hostnames of a mesh, or explain one service's",
		Long: `Without arguments, list every hostname of the mesh: the service it belongs
to, the HostnameGenerator that made it (InternalVIP for the value of a
MeshExternalService's InternalVIP match), whether the service holds it
(Available) or not (NotAvailable, with the reason: a collision names the
service that holds the name; a template that could not render names the
missing label or the broken rule).

With KIND NAME (a meshservice, meshexternalservice or meshmultizoneservice),
show what every HostnameGenerator makes of that one service, in precedence
order, including the generators that do not select it and why.`,
		Example: `  meshnames inspect hostnames
  meshnames inspect hostnames -m prod -o json
  meshnames inspect hostnames meshservice redis`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 && len(args) != 2 {
				return fmt.Errorf("give no arguments, or KIND NAME")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := clientFor(output, newClient)
			if err != nil {
				return err
			}
			if len(args) == 2 {
				return explainService(cmd.Context(), env, c, args[0], args[1], mesh, output)
			}
			return listHostnames(cmd.Context(), env, c, mesh, output)
		},
	}
	hostnames.Flags().StringVarP(&mesh, "mesh", "m", defaultMesh, "mesh to inspect")
	hostnames.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	cmd.AddCommand(hostnames, newInspectXDSCmd(env, newClient))

	var dnsMesh, dnsOutput string
	dnsCmd := &cobra.Command{
		Use:   "dns",
		Short: "List every name the DNS server answers in a mesh",
		Long: `List every name the server's DNS answers in the mesh: generated hostnames,
MeshExternalService InternalVIP values, service-tag names and their
DNS-compliant aliases (the DNS-compliant names design record), with the record types, the addresses and the
service each belongs to. Then list the names that are not answered and why: a
hostname lost to another service, a service with no VIP yet, an alias that
would collide with another service's name.`,
		Example: `  meshnames inspect dns
  meshnames inspect dns -m prod -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := clientFor(dnsOutput, newClient)
			if err != nil {
				return err
			}
			l, err := c.DNS(cmd.Context(), dnsMesh)
			if err != nil {
				return err
			}
			if dnsOutput == "json" {
				return printJSON(env, l)
			}
			if len(l.Names) == 0 {
				fmt.Fprintf(env.Err, "No names are answered in mesh %s.\n", dnsMesh)
			} else {
				tw := tabwriter.NewWriter(env.Out, 0, 8, 3, ' ', 0)
				fmt.Fprintln(tw, "NAME\tTYPES\tANSWER\tSERVICE\tSOURCE")
				for _, n := range l.Names {
					answer := append(append(append([]string{}, n.A...), n.AAAA...), n.SRV...)
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s\t%s\n", n.Name, strings.Join(n.Types, ","), strings.Join(answer, ","), n.Kind, n.Service, n.Source)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			if len(l.NotAnswered) > 0 {
				fmt.Fprintln(env.Out, "\nNot answered:")
				tw := tabwriter.NewWriter(env.Out, 0, 8, 3, ' ', 0)
				fmt.Fprintln(tw, "NAME\tSERVICE\tSOURCE\tREASON")
				for _, n := range l.NotAnswered {
					fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\n", n.Name, n.Kind, n.Service, orNone(n.Source), n.Reason)
				}
				return tw.Flush()
			}
			return nil
		},
	}
	dnsCmd.Flags().StringVarP(&dnsMesh, "mesh", "m", defaultMesh, "mesh to inspect")
	dnsCmd.Flags().StringVarP(&dnsOutput, "output", "o", "table", "output format: table or json")
	cmd.AddCommand(dnsCmd)

	var extMesh, extOutput string
	extCmd := &cobra.Command{
		Use:     "externalservices",
		Aliases: []string{"meshexternalservices", "extsvc"},
		Short:   "List the clusters and conditions of the external services of a mesh",
		Long: `List every MeshExternalService of the mesh by cluster: a MeshExternalService has one
cluster per matched port, named <name>_<port>, with the port's protocol and the
matches it captures. Then list the services' conditions, such as the IP ranges
they share with another external service on a port (Overlapping) or a VIP pool
that is exhausted.`,
		Example: `  meshnames inspect externalservices
  meshnames inspect extsvc -m prod -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if extOutput != "table" && extOutput != "json" {
				return fmt.Errorf("invalid --output %q: use table or json", extOutput)
			}
			c, err := newClient()
			if err != nil {
				return err
			}
			return listExternalServices(cmd.Context(), env, c, extMesh, extOutput)
		},
	}
	extCmd.Flags().StringVarP(&extMesh, "mesh", "m", defaultMesh, "mesh to inspect")
	extCmd.Flags().StringVarP(&extOutput, "output", "o", "table", "output format: table or json")
	cmd.AddCommand(extCmd)
	cmd.AddCommand(newInspectServiceTagsCmd(env, newClient))
	cmd.AddCommand(newInspectMultiZoneCmd(env, newClient))
	cmd.AddCommand(newInspectLeaderCmd(env, newClient))
	cmd.AddCommand(newInspectHistoryCmd(env, newClient))
	return cmd
}

// ClusterRow is one cluster of `inspect externalservices`.
type ClusterRow struct {
	Service  string   `json:"service"`
	Cluster  string   `json:"cluster"`
	Port     int      `json:"port"`
	Protocol string   `json:"protocol"`
	Matches  []string `json:"matches"`
}

// ConditionRow is one condition of `inspect externalservices`.
type ConditionRow struct {
	Service string `json:"service"`
	resource.Condition
}

func listExternalServices(ctx context.Context, env Env, c *client.Client, mesh, output string) error {
	objs, err := c.ListAll(ctx, resource.MustLookup(resource.MeshExternalService), mesh, nil)
	if err != nil {
		return err
	}
	clusters := []ClusterRow{}
	conditions := []ConditionRow{}
	for _, o := range objs {
		clusters = append(clusters, externalClusters(o)...)
		if st := serviceStatus(o); st != nil {
			for _, cond := range st.Conditions {
				conditions = append(conditions, ConditionRow{Service: o.Name, Condition: cond})
			}
		}
	}
	if output == "json" {
		return printJSON(env, struct {
			Mesh       string         `json:"mesh"`
			Clusters   []ClusterRow   `json:"clusters"`
			Conditions []ConditionRow `json:"conditions"`
		}{mesh, clusters, conditions})
	}
	if len(objs) == 0 {
		fmt.Fprintf(env.Err, "No meshexternalservices found in mesh %s.\n", mesh)
		return nil
	}
	tw := tabwriter.NewWriter(env.Out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tCLUSTER\tPORT\tPROTOCOL\tMATCHES")
	for _, r := range clusters {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.Service, r.Cluster, r.Port, r.Protocol, strings.Join(r.Matches, ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(conditions) > 0 {
		fmt.Fprintln(env.Out, "\nConditions:")
		tw := tabwriter.NewWriter(env.Out, 0, 8, 3, ' ', 0)
		fmt.Fprintln(tw, "SERVICE\tTYPE\tSTATUS\tREASON\tMESSAGE")
		for _, r := range conditions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Service, r.Type, r.Status, orNone(r.Reason), orNone(r.Message))
		}
		return tw.Flush()
	}
	return nil
}

// externalClusters lists the clusters of one external service in port
// order, each with the matches on its port in spec order.
func externalClusters(o *resource.Object) []ClusterRow {
	spec := o.Spec.(*resource.MeshExternalServiceSpec)
	names := spec.ClusterNames(o.Name)
	rows := make([]ClusterRow, 0, len(names))
	for i, port := range spec.Ports() {
		r := ClusterRow{Service: o.Name, Cluster: names[i], Port: port}
		for _, m := range spec.Match {
			if m.Port == port {
				r.Protocol = m.Protocol // one per port (validation)
				r.Matches = append(r.Matches, m.Type+":"+m.Value)
			}
		}
		rows = append(rows, r)
	}
	return rows
}

func newInspectLeaderCmd(env Env, newClient func() (*client.Client, error)) *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "leader",
		Short: "Show which control-plane instance leads",
		Long: `Show which instance leads, that is runs the controllers that write status
(hostnames, VIPs, MeshServices from Dataplanes), as the server asked sees it.

With a PostgreSQL store the instances elect a leader with a lease: the holder,
its term (which increases with every change of leader) and when the lease runs
out unless renewed, by the database's clock. With the embedded store the one
process always leads. The last line says whether the server asked leads.`,
		Example: `  meshnames inspect leader
  meshnames inspect leader --server http://cp-2:5681 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := clientFor(output, newClient)
			if err != nil {
				return err
			}
			l, err := c.Leader(cmd.Context())
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(env, l)
			}
			printLeader(env, l)
			return nil
		},
	}
	c.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return c
}

func printLeader(env Env, l *api.LeaderStatus) {
	tw := tabwriter.NewWriter(env.Out, 0, 8, 1, ' ', 0)
	defer tw.Flush()
	switch l.Election {
	case "local":
		fmt.Fprintln(tw, "Election:\tlocal (embedded store: the one process leads)")
	case "kubernetes":
		fmt.Fprintln(tw, "Election:\tkubernetes (instances on one cluster: the Lease meshnames-leader)")
	default:
		fmt.Fprintln(tw, "Election:\tlease (instances sharing PostgreSQL)")
	}
	now := env.Now()
	switch {
	case l.Holder == "":
		fmt.Fprintln(tw, "Leader:\tnone")
	case l.Election == "local":
		fmt.Fprintf(tw, "Leader:\t%s\n", l.Holder)
	case !l.ExpiresAt.After(now):
		fmt.Fprintf(tw, "Leader:\tnone (the lease of %s, term %d, ran out %s ago)\n", l.Holder, l.Term, now.Sub(l.ExpiresAt).Round(time.Millisecond))
	default:
		fmt.Fprintf(tw, "Leader:\t%s\n", l.Holder)
		fmt.Fprintf(tw, "Term:\t%d\n", l.Term)
		fmt.Fprintf(tw, "Expires:\t%s (in %s unless renewed)\n", l.ExpiresAt.UTC().Format(time.RFC3339Nano), l.ExpiresAt.Sub(now).Round(time.Millisecond))
	}
	role := "follower"
	if l.Leading {
		role = "leader"
	}
	fmt.Fprintf(tw, "This server:\t%s (%s)\n", l.Self, role)
}

func newInspectServiceTagsCmd(env Env, newClient func() (*client.Client, error)) *cobra.Command {
	var mesh, output string
	c := &cobra.Command{
		Use:   "service-tags",
		Short: "List the kuma.io/service tags of a mesh's Dataplanes and their MeshServices",
		Long: `List every kuma.io/service tag on the inbounds of the mesh's Dataplanes with
the MeshService synthesised for it (universal mode): its name (the tag, or a
DNS-compliant form of it), the Dataplanes carrying the tag, the ports, the
export mode and its state. Then explain every problem: a tag whose name is
held by a MeshService an operator created (it is left alone, so the tag has
no MeshService), Dataplanes that disagree on ports or export mode, and
synthesised MeshServices without Dataplanes waiting for their deletion.`,
		Example: `  meshnames inspect service-tags
  meshnames inspect service-tags -m prod -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := clientFor(output, newClient)
			if err != nil {
				return err
			}
			r, err := c.ServiceTags(cmd.Context(), mesh)
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(env, r)
			}
			if len(r.Tags) == 0 {
				fmt.Fprintf(env.Err, "No Dataplane in mesh %s has a kuma.io/service tag.\n", mesh)
				return nil
			}
			tw := tabwriter.NewWriter(env.Out, 0, 8, 3, ' ', 0)
			fmt.Fprintln(tw, "TAG\tMESHSERVICE\tDATAPLANES\tPORTS\tEXPORT\tSTATE")
			var details []string
			for _, t := range r.Tags {
				state := "ok"
				switch {
				case t.Blocked != "":
					state = "blocked"
					details = append(details, fmt.Sprintf("%s: %s", t.Tag, t.Blocked))
				case !t.DeletionAt.IsZero():
					state = "deleting at " + t.DeletionAt.UTC().Format(time.RFC3339)
				case t.Retiring:
					state = "no Dataplane: grace period starting"
				case len(t.Conditions) > 0:
					var reasons []string
					for _, c := range t.Conditions {
						reasons = append(reasons, c.Reason)
					}
					state = strings.Join(reasons, ",")
				}
				for _, c := range t.Conditions {
					details = append(details, fmt.Sprintf("%s: %s", t.Tag, c.Message))
				}
				var ports []string
				for _, p := range t.Ports {
					ports = append(ports, fmt.Sprintf("%d/%s", p.Port, p.AppProtocol))
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", t.Tag, orNone(t.Name), len(t.Dataplanes), orNone(strings.Join(ports, ",")), orNone(t.ExportMode), state)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(details) > 0 {
				fmt.Fprintln(env.Out, "\nProblems:")
				for _, d := range details {
					fmt.Fprintln(env.Out, "  "+d)
				}
			}
			return nil
		},
	}
	c.Flags().StringVarP(&mesh, "mesh", "m", defaultMesh, "mesh to inspect")
	c.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return c
}

// HostnameRow is one line of `inspect hostnames`.
type HostnameRow struct {
	Hostname  string        `json:"hostname"`
	Kind      resource.Kind `json:"kind"`
	Service   string        `json:"service"`
	Generator string        `json:"generator"`
	Status    string        `json:"status"`
	Reason    string        `json:"reason,omitempty"`
}

func listHostnames(ctx context.Context, env Env, c *client.Client, mesh, output string) error {
	var rows []HostnameRow
	for _, k := range []resource.Kind{resource.MeshService, resource.MeshExternalService, resource.MeshMultiZoneService} {
		objs, err := c.ListAll(ctx, resource.MustLookup(k), mesh, nil)
		if err != nil {
			return err
		}
		for _, o := range objs {
			st := serviceStatus(o)
			if st == nil {
				continue
			}
			for _, a := range st.Addresses {
				gen := a.Origin.Name
				switch a.Origin.Kind {
				case resource.OriginInternalVIP:
					// The service's own InternalVIP value; generator
					// names are lower case, so this cannot be one.
					gen = resource.MatchInternalVIP
				case resource.OriginServiceTag, resource.OriginServiceTagAlias:
					gen = a.Origin.Kind // a service-tag name (seed 004)
				}
				rows = append(rows, HostnameRow{Hostname: a.Hostname, Kind: o.Kind, Service: o.Name, Generator: gen, Status: a.Status, Reason: a.Reason})
			}
		}
	}
	// By name; the holder of a name before those who lost it.
	slices.SortFunc(rows, func(a, b HostnameRow) int {
		return cmp.Or(cmp.Compare(a.Hostname, b.Hostname), cmp.Compare(a.Status, b.Status),
			cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Service, b.Service), cmp.Compare(a.Generator, b.Generator))
	})
	if output == "json" {
		return printJSON(env, struct {
			Mesh      string        `json:"mesh"`
			Hostnames []HostnameRow `json:"hostnames"`
		}{mesh, append([]HostnameRow{}, rows...)})
	}
	if len(rows) == 0 {
		fmt.Fprintf(env.Err, "No hostnames in mesh %s.\n", mesh)
		return nil
	}
	tw := tabwriter.NewWriter(env.Out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "HOSTNAME\tKIND\tSERVICE\tGENERATOR\tSTATUS\tREASON")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", orNone(r.Hostname), r.Kind, r.Service, r.Generator, r.Status, orNone(r.Reason))
	}
	return tw.Flush()
}

func explainService(ctx context.Context, env Env, c *client.Client, kind, name, mesh, output string) error {
	d, err := kindArg(kind)
	if err != nil {
		return err
	}
	if !d.ServiceKind {
		return fmt.Errorf("%s have no hostnames: use meshservices, meshexternalservices or meshmultizoneservices", d.Plural)
	}
	items, err := c.Hostnames(ctx, d, mesh, name)
	if err != nil {
		return err
	}
	if output == "json" {
		return printJSON(env, items)
	}
	if len(items) == 0 {
		// A zone lists every generator, selecting or not; a global lists
		// what the service's zone gives it, and nothing for the rest.
		fmt.Fprintln(env.Err, "No HostnameGenerator gives this service a name here.")
		return nil
	}
	tw := tabwriter.NewWriter(env.Out, 0, 8, 3, ' ', 0)
	// On a global control plane, which computes no hostnames, each name is
	// the one a zone gives the service: that zone is shown.
	if slices.ContainsFunc(items, func(it api.HostnameOutcome) bool { return it.Zone != "" }) {
		fmt.Fprintln(tw, "ZONE\tGENERATOR\tHOSTNAME\tSTATUS\tREASON")
		for _, it := range items {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", it.Zone, it.Generator, orNone(it.Hostname), orNone(it.Status), orNone(it.Reason))
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "GENERATOR\tSELECTS\tHOSTNAME\tSTATUS\tREASON")
	for _, it := range items {
		fmt.Fprintf(tw, "%s\t%t\t%s\t%s\t%s\n", it.Generator, it.Selects, orNone(it.Hostname), orNone(it.Status), orNone(it.Reason))
	}
	return tw.Flush()
}

// clientFor checks the --output value of an inspect command and returns
// the client.
func clientFor(output string, newClient func() (*client.Client, error)) (*client.Client, error) {
	if output != "table" && output != "json" {
		return nil, fmt.Errorf("invalid --output %q: use table or json", output)
	}
	return newClient()
}

func printJSON(env Env, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(env.Out, string(b))
	return nil
}
