package cli

import (
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/client"
)

// Environment variables of the client commands' credentials.
const (
	TokenEnv  = "MESHNAMES_TOKEN"
	CAFileEnv = "MESHNAMES_CA_FILE"
)

// maxCredentialBytes bounds a token or CA file.
const maxCredentialBytes = 1 << 20

// clientOptions reads the token (--token-file, else $MESHNAMES_TOKEN) and
// the CA (--ca-file, else $MESHNAMES_CA_FILE) the client sends and trusts.
func clientOptions(env Env, tokenFile, caFile string) ([]client.Option, error) {
	var opts []client.Option
	switch {
	case tokenFile != "":
		b, err := readCredential(tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return nil, fmt.Errorf("--token-file: %s is empty", tokenFile)
		}
		opts = append(opts, client.WithToken(tok))
	default:
		if v, ok := env.Getenv(TokenEnv); ok && strings.TrimSpace(v) != "" {
			opts = append(opts, client.WithToken(strings.TrimSpace(v)))
		}
	}
	if caFile == "" {
		caFile, _ = env.Getenv(CAFileEnv)
	}
	if caFile != "" {
		b, err := readCredential(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--ca-file: %s holds no PEM certificate", caFile)
		}
		opts = append(opts, client.WithCA(b))
	}
	return opts, nil
}

func readCredential(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > maxCredentialBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxCredentialBytes)
	}
	return os.ReadFile(path)
}

func newTokenCmd(env Env, newClient func() (*client.Client, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Issue, list and revoke tokens (admin)",
		Long: `Manage the tokens of the control plane's API and of zones. Every subcommand
needs an admin: a request from the control plane's host without a token (on a
loopback API address, unless api.auth.loopbackAdmin is false), or an admin
token (--token-file FILE or $MESHNAMES_TOKEN). The first start of a control
plane writes one to <data-dir>/admin.token. docs/security.md lists what each
role may do.`,
	}
	var name, role, validFor string
	var meshes []string
	user := &cobra.Command{
		Use:   "user",
		Short: "Issue a token for a user",
		Long: `Issue a token for a user with a role: admin (everything, tokens included),
operator (Meshes, Zones, HostnameGenerators, MeshMultiZoneServices and what a
service owner may), service-owner (MeshServices, MeshExternalServices and
Dataplanes) or read-only. --mesh limits the token to those meshes.

The token alone goes to standard output, so "> alice.token" keeps it; what it
says goes to standard error. It cannot be shown again: the control plane keeps
a record of it, not the token.`,
		Example: `  meshnames token user --name alice --role operator > alice.token
  meshnames token user --name ci --role service-owner --mesh payments,orders --valid-for 720h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			t, err := c.IssueToken(cmd.Context(), api.TokenRequest{Name: name, Role: role, Meshes: meshes, ValidFor: validFor})
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Out, t.Token)
			fmt.Fprintf(env.Err, "Issued token %s for %s, valid until %s.\n", t.Info.ID, describe(t.Info), t.Info.ExpiresAt.UTC().Format(time.RFC3339))
			return nil
		},
	}
	user.Flags().StringVar(&name, "name", "", "who holds the token (its subject), such as alice")
	user.Flags().StringVar(&role, "role", "", "admin, operator, service-owner or read-only")
	user.Flags().StringSliceVar(&meshes, "mesh", nil, "limit the token to these meshes (comma-separated; default all)")
	user.Flags().StringVar(&validFor, "valid-for", "24h", "how long the token is valid (at most 87600h)")
	_ = user.MarkFlagRequired("name")
	_ = user.MarkFlagRequired("role")

	var zone, zoneValidFor string
	zoneCmd := &cobra.Command{
		Use:   "zone",
		Short: "Issue a zone control plane's token (on the global)",
		Long: `Issue the token a zone control plane presents to its global. It names the zone
and carries the fingerprint of the global's sync certificate, so the zone can
verify the global with no other file. Only a global control plane (--mode
global) issues zone tokens. The token alone goes to standard output.`,
		Example: `  meshnames token zone --zone east --server http://global:5681 > east.token`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			t, err := c.IssueZoneToken(cmd.Context(), zone, zoneValidFor)
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Out, t.Token)
			fmt.Fprintf(env.Err, "Issued token %s for zone %s, valid until %s.\n", t.Info.ID, t.Info.Zone, t.Info.ExpiresAt.UTC().Format(time.RFC3339))
			return nil
		},
	}
	zoneCmd.Flags().StringVar(&zone, "zone", "", "the zone the token is for")
	zoneCmd.Flags().StringVar(&zoneValidFor, "valid-for", "8760h", "how long the token is valid (at most 87600h)")
	_ = zoneCmd.MarkFlagRequired("zone")

	var dpMesh, dpName, dpValidFor string
	dpCmd := &cobra.Command{
		Use:   "dataplane",
		Short: "Issue a proxy's token for the xDS control plane",
		Long: `Issue the token a proxy presents to the xDS control plane (ADS, port 5678):
it names one Dataplane of one mesh, and a stream that presents it may fetch
that Dataplane's configuration and nothing else. Its node id must be
<mesh>.<name>. The proxy sends it as the gRPC header authorization: Bearer
<token>, or as the node metadata key token (grpc-go's bootstrap file). The
token alone goes to standard output.`,
		Example: `  meshnames token dataplane --mesh default --name web-1 > web-1.token`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			t, err := c.IssueDataplaneToken(cmd.Context(), dpMesh, dpName, dpValidFor)
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Out, t.Token)
			fmt.Fprintf(env.Err, "Issued token %s for dataplane %s of mesh %s, valid until %s.\n", t.Info.ID, t.Info.Subject, dpMesh, t.Info.ExpiresAt.UTC().Format(time.RFC3339))
			return nil
		},
	}
	dpCmd.Flags().StringVarP(&dpMesh, "mesh", "m", "default", "the mesh of the Dataplane")
	dpCmd.Flags().StringVar(&dpName, "name", "", "the Dataplane the token is for")
	dpCmd.Flags().StringVar(&dpValidFor, "valid-for", "8760h", "how long the token is valid (at most 87600h)")
	dpCmd.Flags().StringVar(&dpValidFor, "ttl", "8760h", "the same as --valid-for (kumactl's spelling)")
	_ = dpCmd.MarkFlagRequired("name")

	var ingName, ingValidFor string
	ingCmd := &cobra.Command{
		Use:   "ingress",
		Short: "Issue a ZoneIngress proxy's token for the xDS control plane of its zone",
		Long: `Issue the token a ZoneIngress proxy presents to the xDS control plane of its
zone: it names one ZoneIngress, and a stream that presents it may fetch that
ingress's configuration and nothing else. The proxy's node id is the
ZoneIngress's name, with the node metadata proxyType: ingress. The token
alone goes to standard output.`,
		Example: `  meshnames token ingress --name ingress-1 > ingress-1.token`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			t, err := c.IssueIngressToken(cmd.Context(), ingName, ingValidFor)
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Out, t.Token)
			fmt.Fprintf(env.Err, "Issued token %s for ZoneIngress %s, valid until %s.\n", t.Info.ID, t.Info.Subject, t.Info.ExpiresAt.UTC().Format(time.RFC3339))
			return nil
		},
	}
	ingCmd.Flags().StringVar(&ingName, "name", "", "the ZoneIngress the token is for")
	ingCmd.Flags().StringVar(&ingValidFor, "valid-for", "8760h", "how long the token is valid (at most 87600h)")
	_ = ingCmd.MarkFlagRequired("name")

	var output string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the tokens issued",
		Long: `List the tokens issued (never the tokens themselves): ID, subject, role,
meshes, when issued and by whom, when they expire, and whether they are
active, expired or revoked. Records are kept until a day after their token
expired.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := clientFor(output, newClient)
			if err != nil {
				return err
			}
			items, err := c.Tokens(cmd.Context())
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(env, items)
			}
			tw := tabwriter.NewWriter(env.Out, 0, 8, 3, ' ', 0)
			fmt.Fprintln(tw, "ID\tSUBJECT\tROLE\tMESHES\tISSUED\tBY\tEXPIRES\tSTATE")
			now := env.Now()
			for _, t := range items {
				state := "active"
				switch {
				case !t.RevokedAt.IsZero():
					state = "revoked by " + orNone(t.RevokedBy)
				case !now.Before(t.ExpiresAt):
					state = "expired"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Subject, t.Role, orAll(t.Meshes),
					t.IssuedAt.UTC().Format(time.RFC3339), orNone(t.IssuedBy), t.ExpiresAt.UTC().Format(time.RFC3339), state)
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")

	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token",
		Long: `Revoke the token with this ID (see "token list"). The control plane that
revokes it refuses the token at once; every other instance sharing its store
within api.auth.refreshInterval (250 ms by default).`,
		Example: `  meshnames token revoke 3f2a9c0d81b4e675`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			t, err := c.RevokeToken(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Out, "Token %s of %s revoked.\n", t.ID, describe(*t))
			return nil
		},
	}

	rotate := &cobra.Command{
		Use:   "rotate-key",
		Short: "Add a signing key that signs new tokens",
		Long: `Add a new signing key. New tokens are signed with it (on every instance
sharing the store, after its next refresh); tokens signed by the older keys
stay valid until they expire.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			kid, err := c.RotateKey(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Out, "Signing key %s signs new tokens from now on; tokens of older keys stay valid until they expire.\n", kid)
			return nil
		},
	}
	cmd.AddCommand(user, zoneCmd, dpCmd, ingCmd, list, revoke, rotate)
	return cmd
}

// describe says whose a token is: "alice (operator, meshes m1,m2)".
func describe(t api.TokenInfo) string {
	s := t.Subject + " (" + t.Role
	if len(t.Meshes) > 0 {
		s += ", meshes " + strings.Join(t.Meshes, ",")
	}
	return s + ")"
}

func orAll(meshes []string) string {
	if len(meshes) == 0 {
		return "(all)"
	}
	return strings.Join(meshes, ",")
}
