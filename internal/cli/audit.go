package cli

import (
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/client"
)

func newAuditCmd(env Env, newClient func() (*client.Client, error)) *cobra.Command {
	var q client.AuditQuery
	var kind, output string
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log of writes through the API",
		Long: `Show the audit log, newest first: every request that may write (create,
update, delete, token issue and revoke), refused or not, with when, who
(subject and role), from where, what (verb, kind, mesh, name) and the result
(success, unchanged, refused, failed) with the status code and reason.

Admin, operator and read-only tokens may read it.`,
		Example: `  meshnames audit
  meshnames audit --kind meshservice --name redis --since 168h
  meshnames audit --subject alice -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := clientFor(output, newClient)
			if err != nil {
				return err
			}
			if kind != "" {
				d, err := kindArg(kind)
				if err != nil {
					return err
				}
				q.Kind = string(d.Kind)
			}
			entries, _, err := c.Audit(cmd.Context(), q)
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(env, entries)
			}
			if len(entries) == 0 {
				fmt.Fprintln(env.Out, "No audit entries match.")
				return nil
			}
			tw := tabwriter.NewWriter(env.Out, 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tSUBJECT\tROLE\tSOURCE\tVERB\tKIND\tMESH\tNAME\tRESULT\tCODE\tREASON")
			for _, e := range entries {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339), orNone(e.Subject), orNone(e.Role),
					orNone(e.Source), e.Verb, orNone(string(e.Kind)), orNone(e.Mesh), orNone(e.Name), e.Result, code(e.Code), orNone(shorten(e.Reason, 80)))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "", "only entries of this kind (meshservice, hostnamegenerator, ...)")
	cmd.Flags().StringVarP(&q.Mesh, "mesh", "m", "", "only entries in this mesh")
	cmd.Flags().StringVar(&q.Name, "name", "", "only entries of this name (a resource's, or a token's ID)")
	cmd.Flags().StringVar(&q.Subject, "subject", "", "only entries of this subject (who asked)")
	cmd.Flags().StringVar(&q.Since, "since", "24h", "only entries since this RFC 3339 time or duration before now")
	cmd.Flags().StringVar(&q.Until, "until", "", "only entries before this RFC 3339 time or duration before now")
	cmd.Flags().IntVar(&q.Limit, "limit", 100, "at most this many entries (up to 10000)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

func code(c int) string {
	if c == 0 {
		return "-"
	}
	return strconv.Itoa(c)
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func newInspectHistoryCmd(env Env, newClient func() (*client.Client, error)) *cobra.Command {
	var vip, hostname, output string
	var since time.Duration
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Show who held a VIP or hostname, from when to when",
		Long: `Show every service that held a VIP or a hostname, in any zone, from when
to when, and whether it released it or lost it to another service; then the
events this is computed from. A holder whose assignment is older than the
history kept (history.retention) has no start. Use it when a stale DNS
answer sent traffic to the wrong service.`,
		Example: `  meshnames inspect history --vip 241.0.0.7
  meshnames inspect history --hostname redis.svc.mesh.local -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (vip == "") == (hostname == "") {
				return fmt.Errorf("give exactly one of --vip IP and --hostname NAME")
			}
			c, err := clientFor(output, newClient)
			if err != nil {
				return err
			}
			r, err := c.History(cmd.Context(), vip, hostname, since)
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(env, r)
			}
			printHistory(env, r)
			return nil
		},
	}
	cmd.Flags().StringVar(&vip, "vip", "", "the VIP to trace")
	cmd.Flags().StringVar(&hostname, "hostname", "", "the hostname to trace")
	cmd.Flags().DurationVar(&since, "since", 0, "only events of this last while (default: all kept)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

func printHistory(env Env, r *api.HistoryReport) {
	what := r.VIP
	if what == "" {
		what = r.Hostname
	}
	if len(r.Events) == 0 {
		fmt.Fprintf(env.Out, "No service held %s in the history kept.\n", what)
		return
	}
	tw := tabwriter.NewWriter(env.Out, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "Holders of %s:\n", what)
	fmt.Fprintln(tw, "ZONE\tMESH\tKIND\tNAME\tFROM\tUNTIL\tEND\tREASON")
	for _, h := range r.Holders {
		from, until := "(before the history kept)", "(holds it)"
		if !h.From.IsZero() {
			from = h.From.UTC().Format(time.RFC3339)
		}
		if !h.Until.IsZero() {
			until = h.Until.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", orNone(h.Zone), h.Mesh, h.Kind, h.Name, from, until, orNone(h.End), orNone(h.Reason))
	}
	_ = tw.Flush()
	fmt.Fprintln(env.Out)
	tw = tabwriter.NewWriter(env.Out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tEVENT\tZONE\tMESH\tKIND\tNAME\tREASON")
	for _, e := range r.Events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339), e.Event, orNone(e.Zone), e.Mesh, e.Kind, e.Name, orNone(e.Reason))
	}
	if r.Truncated {
		fmt.Fprintln(tw, "(older events left out)")
	}
	_ = tw.Flush()
}
