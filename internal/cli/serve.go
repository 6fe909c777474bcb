package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/server"
	"github.com/meshnames/meshnames/internal/validate"
)

// configFlags are the flags that override configuration fields, and the
// field each one sets.
var configFlags = []struct {
	flag, path, usage string
	boolean           bool
}{
	{"mode", "mode", "standalone, zone or global", false},
	{"zone", "zone", "zone name of this control plane", false},
	{"store", "store.url", `"embedded" (the default) or a PostgreSQL URL: postgres://user@host:5432/db`, false},
	{"data-dir", "store.dataDir", "directory of the embedded store", false},
	{"store-engine", "store.engine", "engine of the embedded store: pebble (the default; migrates a SQLite data dir) or sqlite", false},
	{"api-addr", "api.addr", "address of the REST API (off loopback it needs --api-tls-cert and --api-tls-key, or --api-insecure)", false},
	{"api-tls-cert", "api.tls.cert", "PEM certificate (chain) of the REST API: serve HTTPS", false},
	{"api-tls-key", "api.tls.key", "PEM private key of --api-tls-cert", false},
	{"api-insecure", "api.insecure", "allow a non-loopback --api-addr without TLS (tokens then cross the network in clear)", true},
	{"api-loopback-admin", "api.auth.loopbackAdmin", "requests without a token on a loopback API address are admin (default true; --api-loopback-admin=false requires tokens there too)", true},
	{"dns-addr", "dns.addr", "address of the DNS server (UDP and TCP)", false},
	{"xds-addr", "xds.addr", "address of the xDS control plane (Envoy v3 ADS over gRPC; off loopback it needs --api-tls-cert and --api-tls-key); empty serves none", false},
	{"xds-dns-filter", "xds.dnsFilter.enabled", "give every Envoy proxy a DNS listener (Envoy's DNS filter) that answers its mesh's names; without it, proxies whose node metadata has dataplane.dns.port get one", true},
	{"xds-dns-filter-addr", "xds.dnsFilter.addr", "address of the proxies' DNS listener on each proxy's host; a proxy's dataplane.dns.port replaces the port", false},
	{"log-level", "log.level", "debug, info, warn or error", false},
	{"log-format", "log.format", "text or json", false},
	{"skip-default-generators", "defaults.skipHostnameGenerators", "do not create the default HostnameGenerators", true},
	{"vip-quarantine", "vips.quarantine", "how long a released VIP is not handed out again", false},
	{"vip-cidr-mesh-service", "vips.meshService.cidr", "IPv4 VIP pool of MeshServices", false},
	{"vip-cidr-v6-mesh-service", "vips.meshService.cidrV6", "IPv6 VIP pool of MeshServices (optional)", false},
	{"vip-cidr-mesh-external-service", "vips.meshExternalService.cidr", "IPv4 VIP pool of MeshExternalServices", false},
	{"vip-cidr-v6-mesh-external-service", "vips.meshExternalService.cidrV6", "IPv6 VIP pool of MeshExternalServices (optional)", false},
	{"vip-cidr-mesh-multi-zone-service", "vips.meshMultiZoneService.cidr", "IPv4 VIP pool of MeshMultiZoneServices", false},
	{"vip-cidr-v6-mesh-multi-zone-service", "vips.meshMultiZoneService.cidrV6", "IPv6 VIP pool of MeshMultiZoneServices (optional)", false},
	{"dns-ttl", "dns.ttl", "TTL of DNS answers", false},
	{"services-export-default", "services.exportDefault", "spec.export.mode (All or None) of MeshServices synthesised from Dataplanes without a kuma.io/export-mode tag", false},
	{"services-deletion-grace-period", "services.deletionGracePeriod", "how long a MeshService synthesised from Dataplanes outlives its last Dataplane", false},
	{"leader-lease-duration", "leader.leaseDuration", "how long the leader lease lasts after each renewal (PostgreSQL store, env kubernetes)", false},
	{"leader-renew-interval", "leader.renewInterval", "how often the leader renews its lease", false},
	{"leader-retry-interval", "leader.retryInterval", "how often other instances try to take the lease", false},
	{"sync-addr", "sync.addr", "where a global serves its zones' sync streams (gRPC over TLS)", false},
	{"sync-tls-cert", "sync.tlsCert", "certificate of the global's sync server, instead of the one it creates and keeps in its store", false},
	{"sync-tls-key", "sync.tlsKey", "key of --sync-tls-cert", false},
	{"global-address", "sync.globalAddress", "where a zone reaches its global: grpcs://HOST:PORT", false},
	{"zone-token-file", "sync.zoneTokenFile", "file holding the zone token (meshnames token zone on the global)", false},
	{"global-ca-file", "sync.globalCAFile", "CA to verify the global's sync certificate with, instead of the pin in the zone token", false},
	{"sync-insecure", "sync.insecure", "let a zone use grpc:// without TLS (tokens and resources travel in the clear)", true},
	{"sync-heartbeat", "sync.heartbeat", "how often an idle sync stream shows each side is there", false},
	{"env", "env", "universal, or kubernetes: the Kubernetes API is the store and Services become MeshServices", false},
	{"kubeconfig", "kubernetes.kubeconfig", "kubeconfig file of env kubernetes (default $KUBECONFIG, the in-cluster configuration in a Pod, ~/.kube/config)", false},
	{"system-namespace", "kubernetes.systemNamespace", "the control plane's namespace in env kubernetes", false},
}

// addConfigFlags adds configFlags to fs. A flag has no default of its own
// (only a flag that is set overrides the file and the environment); its
// usage shows the configuration's default instead.
func addConfigFlags(fs *pflag.FlagSet) *string {
	defaults := configDefaults()
	for _, f := range configFlags {
		d := ""
		for _, field := range config.Fields() {
			if field.Path == f.path {
				d = fmt.Sprintf("config %s, env %s", f.path, field.Env)
			}
		}
		if v := defaults[f.path]; v != "" && !f.boolean {
			d = "default " + strconv.Quote(v) + "; " + d
		}
		d = " (" + d + ")"
		if f.boolean {
			fs.Bool(f.flag, false, f.usage+d)
		} else {
			fs.String(f.flag, "", f.usage+d)
		}
	}
	return fs.String("config", "", "YAML configuration file (unknown keys are errors)")
}

// configDefaults returns the text of every non-empty leaf of
// config.Default() by its path (api.addr: 127.0.0.1:5681).
func configDefaults() map[string]string {
	b, err := json.Marshal(config.Default())
	if err != nil {
		panic(err) // the configuration is plain data
	}
	var tree map[string]any
	if err := json.Unmarshal(b, &tree); err != nil {
		panic(err)
	}
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, c := range t {
				if prefix != "" {
					k = prefix + "." + k
				}
				walk(k, c)
			}
		case []any:
			var items []string
			for _, i := range t {
				items = append(items, fmt.Sprint(i))
			}
			out[prefix] = strings.Join(items, ",")
		case nil:
		default:
			out[prefix] = fmt.Sprint(t)
		}
	}
	walk("", tree)
	return out
}

// loadConfig layers defaults, the file, the environment and the flags, and
// validates the result.
func loadConfig(env Env, fs *pflag.FlagSet, file string) (config.Config, error) {
	if file == "" {
		if v, ok := env.Getenv("MESHNAMES_CONFIG"); ok {
			file = v
		}
	}
	cfg, err := config.Load(file, env.Getenv)
	errs, _ := validate.From(err)
	if err != nil && errs == nil {
		return cfg, err
	}
	for _, f := range configFlags {
		fl := fs.Lookup(f.flag)
		if fl == nil || !fl.Changed {
			continue
		}
		v := fl.Value.String()
		if f.path == "store.url" && v == "embedded" {
			v = ""
		}
		if err := cfg.Set(f.path, v); err != nil {
			ferrs, _ := validate.From(err)
			for _, e := range ferrs {
				errs.Addf(validate.Path(e.Field), "--%s: %s", f.flag, e.Message)
			}
		}
	}
	errs.Append(cfg.Validate())
	if len(errs) > 0 {
		var b strings.Builder
		b.WriteString("invalid configuration:")
		for _, e := range errs {
			fmt.Fprintf(&b, "\n  %s: %s", e.Field, e.Message)
		}
		return cfg, fmt.Errorf("%s", b.String())
	}
	return cfg, nil
}

func newLogger(w io.Writer, cfg config.LogConfig) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func newServeCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a control plane",
		Long: `Run a meshnames control plane.

It runs in the foreground, logging to standard error, until it is stopped.
With no flags it runs a standalone zone named "default" on the embedded store
in ./meshnames-data (created in the current directory when missing), with the
REST API on 127.0.0.1:5681 and DNS on 127.0.0.1:5653. Settings come from
defaults, then the --config file, then MESHNAMES_* environment variables,
then flags; "meshnames config show" prints the result.

With --mode global it serves zones' sync streams on --sync-addr; with
--mode zone --zone NAME it connects to its global at --global-address with
the zone token in --zone-token-file (docs/multizone.md).

Only one process may use a data directory at a time. With --store
postgres://... several instances share one PostgreSQL database. With --env
kubernetes the Kubernetes API is the store (install the CRDs first with
"meshnames install crds | kubectl apply -f -"), Services of meshed namespaces
become MeshServices, and several instances elect a leader with a Lease
(docs/kubernetes.md).

Requests from this host to a loopback API address are admin without a
token; others need one (docs/security.md). Off loopback the API needs
--api-tls-cert and --api-tls-key (or --api-insecure). The first start writes
an admin token to <data-dir>/admin.token.

SIGINT or SIGTERM stops the server cleanly: requests in flight finish, then
the store is closed.`,
		Example: `  meshnames serve
  meshnames serve --data-dir /var/lib/meshnames --api-addr 0.0.0.0:5681 --api-tls-cert api.pem --api-tls-key api-key.pem
  meshnames serve --store postgres://meshnames@db:5432/meshnames
  meshnames serve --env kubernetes --kubeconfig ~/.kube/config
  meshnames serve --mode global --sync-addr 0.0.0.0:5685
  meshnames serve --mode zone --zone east --global-address grpcs://global:5685 --zone-token-file east.token`,
		Args: cobra.NoArgs,
	}
	file := addConfigFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(env, cmd.Flags(), *file)
		if err != nil {
			return err
		}
		log := newLogger(env.Err, cfg.Log)
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		log.Info("starting meshnames", "version", Version, "mode", cfg.Mode, "zone", cfg.Zone, "store", storeName(cfg))
		return server.New(cfg, log, Version).Run(ctx)
	}
	return cmd
}

func storeName(cfg config.Config) string {
	if cfg.KubernetesEnv() {
		return "kubernetes"
	}
	if cfg.Postgres() {
		return "postgres"
	}
	return "embedded (" + cfg.Store.DataDir + ")"
}

func newConfigCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Inspect the configuration",
	}
	show := &cobra.Command{
		Use:   "show",
		Short: "Print the effective configuration of serve",
		Long: `Print the configuration "meshnames serve" would run with, given the same
--config file, MESHNAMES_* environment and flags. Passwords in the store URL
are masked. Every field, its environment variable and its meaning are listed
in docs/configuration.md.`,
		Args: cobra.NoArgs,
	}
	file := addConfigFlags(show.Flags())
	show.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(env, cmd.Flags(), *file)
		if err != nil {
			return err
		}
		out, err := cfg.Redacted().YAML()
		if err != nil {
			return err
		}
		_, err = env.Out.Write(out)
		return err
	}
	cmd.AddCommand(show)
	return cmd
}
