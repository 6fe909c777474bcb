package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/client"
)

func newInspectXDSCmd(env Env, newClient func() (*client.Client, error)) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "xds MESH/DATAPLANE | xds zoneingress NAME",
		Short: "Show what a proxy gets from the xDS control plane, and its streams",
		Long: `Show the configuration the proxy of a Dataplane gets from the xDS control plane
(clusters, endpoints, outbound and API listeners, in the shape of Envoy's
/config_dump), notes on what it lacks (a cluster without endpoints and why),
and the proxy's ADS streams on the instance that answers: since when, its
protocol (sotw or delta), per type the last version sent and ACKed, a
response waiting for its ACK, and the last rejected one (NACK) with the
proxy's reason. With zoneingress NAME, the same of the proxy of a
ZoneIngress of the server's zone: its listener, one filter chain per SNI,
and the clusters of the exported services of every mesh.`,
		Example: `  meshnames inspect xds default/web-1
  meshnames inspect xds default/web-1 -o json
  meshnames inspect xds zoneingress ingress-1`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 2 && args[0] == "zoneingress":
			case len(args) == 2:
				return fmt.Errorf("give MESH/DATAPLANE, or zoneingress NAME; %q is neither", strings.Join(args, " "))
			case len(args) != 1:
				return fmt.Errorf("give MESH/DATAPLANE, such as default/web-1, or zoneingress NAME")
			default:
				if m, n, ok := strings.Cut(args[0], "/"); !ok || m == "" || n == "" {
					return fmt.Errorf("%q is not MESH/DATAPLANE, such as default/web-1 (a ZoneIngress: zoneingress NAME)", args[0])
				}
			}
			if output != "yaml" && output != "json" {
				return fmt.Errorf("--output must be yaml or json, got %q", output)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := clientFor("json", newClient)
			if err != nil {
				return err
			}
			var in *api.XDSInspection
			if len(args) == 2 {
				in, err = c.XDSIngress(cmd.Context(), args[1])
			} else {
				mesh, name, _ := strings.Cut(args[0], "/")
				in, err = c.XDS(cmd.Context(), mesh, name)
			}
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(env, in)
			}
			b, err := json.Marshal(in)
			if err != nil {
				return err
			}
			y, err := jsonToYAML(b)
			if err != nil {
				return err
			}
			_, err = env.Out.Write(y)
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	return cmd
}

// jsonToYAML re-encodes a JSON document as block YAML, keeping the order
// of its keys.
func jsonToYAML(b []byte) ([]byte, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	var plain func(*yaml.Node)
	plain = func(n *yaml.Node) {
		n.Style = 0
		for _, c := range n.Content {
			plain(c)
		}
	}
	plain(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}
