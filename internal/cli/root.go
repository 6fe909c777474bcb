// Package cli holds the cobra commands of the meshnames binary: serve runs
// a control plane (through server); apply, get, delete and version talk to
// one through client; config show prints the effective configuration.
//
// Commands write their output to the streams in Env, read the environment
// through Env.Getenv and the time through Env.Now, so that tests run them
// in-process and compare output with golden files.
package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshnames/meshnames/internal/client"
	"github.com/meshnames/meshnames/internal/resource"
)

// Version is the version of this build, set with
// -ldflags "-X github.com/meshnames/meshnames/internal/cli.Version=v1.2.3".
var Version = "0.1.0-dev"

// Env is what commands see of the world.
type Env struct {
	In       io.Reader
	Out, Err io.Writer
	Getenv   func(string) (string, bool)
	Now      func() time.Time
}

// OSEnv is the real process environment.
func OSEnv() Env {
	return Env{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Getenv: os.LookupEnv, Now: time.Now}
}

// ServerEnv is the environment variable naming the server for client commands.
const ServerEnv = "MESHNAMES_SERVER"

// New returns the root command.
func New(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "meshnames",
		Short: "Hostnames, virtual IPs and DNS for service meshes",
		Long: `meshnames is the naming-and-addressing plane of a service mesh: it stores
MeshService, MeshExternalService, MeshMultiZoneService, HostnameGenerator,
Dataplane and Mesh resources (Kuma-compatible), gives services hostnames and
virtual IPs, and answers their names over DNS.

"meshnames serve" runs a control plane; "meshnames config show" prints the
configuration it would run with; "meshnames install crds" prints the CRDs of
the Kubernetes mode. The other commands are clients of a running
control plane: apply, diff, get, delete, inspect, token, audit, backup and
version talk to the server named by their --server flag or $` + ServerEnv + `
(default ` + client.DefaultServer + `), sending the token of --token-file
or $` + TokenEnv + ` (without one, requests from the server's own host are
admin).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(env.In)
	root.SetOut(env.Out)
	root.SetErr(env.Err)
	var server, tokenFile, caFile string
	newClient := func() (*client.Client, error) {
		s := server
		if s == "" {
			if v, ok := env.Getenv(ServerEnv); ok && v != "" {
				s = v
			} else {
				s = client.DefaultServer
			}
		}
		opts, err := clientOptions(env, tokenFile, caFile)
		if err != nil {
			return nil, err
		}
		return client.New(s, opts...)
	}
	// The client commands take --server; serve and config have nothing
	// to connect to.
	serverUsage := "URL of the meshnames server (default $" + ServerEnv + " or " + client.DefaultServer + ")"
	clients := []*cobra.Command{
		newApplyCmd(env, newClient),
		newDiffCmd(env, newClient),
		newGetCmd(env, newClient),
		newDeleteCmd(env, newClient),
		newInspectCmd(env, newClient),
		newVersionCmd(env, newClient),
		newTokenCmd(env, newClient),
		newAuditCmd(env, newClient),
		newBackupCmd(env, newClient),
	}
	for _, c := range clients {
		c.PersistentFlags().StringVar(&server, "server", "", serverUsage)
		c.PersistentFlags().StringVar(&tokenFile, "token-file", "", "file holding the token to send (default $"+TokenEnv+"; none: admin on the server's host)")
		c.PersistentFlags().StringVar(&caFile, "ca-file", "", "PEM CA certificate to trust for an https:// server (default $"+CAFileEnv+")")
	}
	root.AddCommand(newServeCmd(env), newConfigCmd(env), newInstallCmd(env))
	root.AddCommand(clients...)
	strictTree(root)
	return root
}

// Main runs the command line with the process environment and returns the
// exit code.
func Main(args []string) int {
	env := OSEnv()
	root := New(env)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		code, show := exitCode(err)
		if show {
			fmt.Fprintln(env.Err, "Error:", err)
		}
		return code
	}
	return 0
}

// kindArg resolves what users type for a kind: the plural (meshservices),
// the singular (meshservice), the Kuma short name (msvc) or the kind itself.
func kindArg(s string) (*resource.Descriptor, error) {
	l := strings.ToLower(s)
	for _, d := range resource.Descriptors() {
		if l == d.Plural || l == strings.ToLower(string(d.Kind)) || l == d.ShortName {
			return d, nil
		}
	}
	var names []string
	for _, d := range resource.Descriptors() {
		names = append(names, d.Plural)
	}
	return nil, fmt.Errorf("unknown kind %q: use one of %s", s, strings.Join(names, ", "))
}

// kindsHelp lists the kinds by plural with the other names kindArg takes,
// each once.
func kindsHelp() string {
	var b strings.Builder
	for _, d := range resource.Descriptors() {
		names := []string{strings.ToLower(string(d.Kind))}
		if d.ShortName != "" && d.ShortName != names[0] && d.ShortName != d.Plural {
			names = append(names, d.ShortName)
		}
		fmt.Fprintf(&b, "  %-22s (%s)\n", d.Plural, strings.Join(names, ", "))
	}
	return b.String()
}
