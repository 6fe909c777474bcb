package cli

import (
	"github.com/spf13/cobra"

	"github.com/meshnames/meshnames/internal/crd"
	"github.com/meshnames/meshnames/internal/install"
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
	cmd.AddCommand(crds, newInstallControlPlaneCmd(env), newInstallMCSCmd(env))
	return cmd
}

func newInstallControlPlaneCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "control-plane",
		Short: "Print everything a cluster needs to run meshnames",
		Long: `Print every manifest of a meshnames control plane in Kubernetes mode: the
system namespace (Pod Security "restricted"), the CRDs and admission policy
of "meshnames install crds", the service account meshnames runs as with the
least RBAC it needs, a Deployment running "meshnames serve --env kubernetes"
(its replicas elect a leader with the Lease meshnames-leader), the Services
meshnames-api (5681) and meshnames-dns (53, UDP and TCP), and a
PodDisruptionBudget. With --api-tls-secret the REST API serves that
certificate, and so does xDS (ADS) on 5678, behind the Service
meshnames-xds: off loopback ADS needs TLS.

meshnames publishes no container image: --image names one that holds the
meshnames binary as its entrypoint. Without --api-tls-secret the REST API
serves plain HTTP inside the cluster. docs/kubernetes.md explains each
object and how to send the mesh domains from CoreDNS to meshnames-dns.`,
		Example: `  meshnames install control-plane --image registry.example/meshnames:` + Version + ` | kubectl apply -f -
  meshnames install control-plane --replicas 3 --namespace mesh-system --zone east > meshnames.yaml`,
		Args: cobra.NoArgs,
	}
	o := install.Options{Version: Version}
	f := cmd.Flags()
	f.StringVar(&o.Namespace, "namespace", crd.DefaultSystemNamespace, "the control plane's namespace (its kubernetes.systemNamespace)")
	f.IntVar(&o.Replicas, "replicas", 2, "instances of the control plane; more than one elect a leader")
	f.StringVar(&o.Image, "image", "meshnames:"+Version, "container image holding the meshnames binary as its entrypoint")
	f.StringVar(&o.Zone, "zone", "default", "the zone name of the control plane")
	f.StringVar(&o.APITLSSecret, "api-tls-secret", "", "Secret (type kubernetes.io/tls, in --namespace) whose certificate the REST API serves; none: plain HTTP")
	cmd.RunE = func(*cobra.Command, []string) error {
		out, err := install.Manifests(o)
		if err != nil {
			return err
		}
		_, err = env.Out.Write(out)
		return err
	}
	return cmd
}

func newInstallMCSCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "mcs-crds",
		Short: "Print the CRDs of the Multi-Cluster Services API",
		Long: `Print the CustomResourceDefinitions of the Multi-Cluster Services API
(KEP-1645, API group multicluster.x-k8s.io, version v1alpha1): ServiceExport
and ServiceImport, for a cluster that has no MCS implementation installing
them. When they are served, meshnames exports the MeshService of every
Service a ServiceExport names and writes ServiceImports for the services of
other zones (docs/kubernetes.md).`,
		Example: `  meshnames install mcs-crds | kubectl apply -f -`,
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			out, err := crd.MCSManifests()
			if err != nil {
				return err
			}
			_, err = env.Out.Write(out)
			return err
		},
	}
}
