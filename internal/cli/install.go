package cli

import (
	"github.com/spf13/cobra"

	"github.com/meshnames/meshnames/internal/crd"
)

func newInstallCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Print Kubernetes manifests of meshnames",
	}
	crds := &cobra.Command{
		Use:   "crds",
		Short: "Print the CRDs of the Kubernetes mode",
		Long: `Print the CustomResourceDefinitions of the Kubernetes mode (serve --env
kubernetes): Mesh, Zone, Dataplane, MeshService, MeshExternalService,
MeshMultiZoneService and HostnameGenerator in the API group kuma.io, version
v1alpha1, with Kuma's kind names. Their OpenAPI schemas are generated from
meshnames' own resource types; every CRD has a status subresource, where
meshnames writes hostnames, VIPs and why it does not use an invalid object.

The output ends with a ValidatingAdmissionPolicy and its binding that keep
HostnameGenerators and MeshExternalServices in the control plane's system
namespace (the CRD schemas cannot see namespaces). docs/kubernetes.md shows
the rest of an installation.`,
		Example: `  meshnames install crds | kubectl apply -f -
  meshnames install crds --system-namespace kuma-system > crds.yaml`,
		Args: cobra.NoArgs,
	}
	ns := crds.Flags().String("system-namespace", crd.DefaultSystemNamespace, "the control plane's namespace (config kubernetes.systemNamespace)")
	crds.RunE = func(cmd *cobra.Command, _ []string) error {
		out, err := crd.Manifests(*ns)
		if err != nil {
			return err
		}
		_, err = env.Out.Write(out)
		return err
	}
	cmd.AddCommand(crds)
	return cmd
}
