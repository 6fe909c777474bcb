// Package config owns meshnames' one configuration tree: its defaults, the
// YAML file (unknown keys are errors), MESHNAMES_* environment variables and
// the validation of the result with field paths. Flags are applied by the
// cli package on top of what Load returns, then Validate runs.
//
// Every leaf has an environment variable named after its path:
// api.addr is MESHNAMES_API_ADDR, store.dataDir is MESHNAMES_STORE_DATA_DIR.
//
// It imports validate and decode only.
package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/meshnames/meshnames/internal/validate"
)

// Modes a control plane runs in.
const (
	ModeStandalone = "standalone"
	ModeZone       = "zone"
	ModeGlobal     = "global"
)

// Environments a control plane runs in.
const (
	EnvUniversal  = "universal"
	EnvKubernetes = "kubernetes"
)

// Config is the whole configuration of `meshnames serve`.
type Config struct {
	// Mode is standalone (one zone, no global), zone (a zone of a
	// multi-zone deployment) or global.
	Mode string `json:"mode"`
	// Zone is this control plane's zone name (standalone and zone modes).
	Zone     string         `json:"zone"`
	Store    StoreConfig    `json:"store"`
	API      APIConfig      `json:"api"`
	DNS      DNSConfig      `json:"dns"`
	Log      LogConfig      `json:"log"`
	Defaults DefaultsConfig `json:"defaults"`
	VIPs     VIPsConfig     `json:"vips"`
	Services ServicesConfig `json:"services"`
	Leader   LeaderConfig   `json:"leader"`
	Sync     SyncConfig     `json:"sync"`
	XDS      XDSConfig      `json:"xds"`
	Audit    AuditConfig    `json:"audit"`
	History  HistoryConfig  `json:"history"`

	// Env is universal (meshnames keeps its own store) or kubernetes (the
	// Kubernetes API is the store: custom resources, and Services become
	// MeshServices).
	Env string `json:"env"`
	// Kubernetes configures env kubernetes.
	Kubernetes KubernetesConfig `json:"kubernetes"`
}

// KubernetesConfig configures the Kubernetes mode (env kubernetes).
type KubernetesConfig struct {
	// Kubeconfig is the kubeconfig file; when empty, $KUBECONFIG, then the
	// in-cluster configuration of a Pod, then ~/.kube/config.
	Kubeconfig string `json:"kubeconfig"`
	// SystemNamespace holds HostnameGenerators, MeshExternalServices,
	// resources synced from global and the leases.
	SystemNamespace string `json:"systemNamespace"`
}

// AuditConfig configures the audit log of the API's writes
// (docs/security.md).
type AuditConfig struct {
	// Retention is how long audit entries are kept.
	Retention Duration `json:"retention"`
}

// HistoryConfig configures the history of hostnames and VIPs.
type HistoryConfig struct {
	// Retention is how long history events are kept.
	Retention Duration `json:"retention"`
}

// SyncConfig configures the sync between a global control plane and its
// zones (ARCHITECTURE.md section 7; docs/multizone.md).
type SyncConfig struct {
	// Addr is where a global serves its zones' sync streams (gRPC over TLS).
	Addr string `json:"addr"`
	// TLSCert and TLSKey, when set, are the certificate and key the
	// global's sync server presents instead of the ones it creates at first
	// start and keeps in its store.
	TLSCert string `json:"tlsCert"`
	TLSKey  string `json:"tlsKey"`
	// GlobalAddress is where a zone reaches its global:
	// grpcs://HOST:PORT (grpc:// only with Insecure).
	GlobalAddress string `json:"globalAddress"`
	// ZoneTokenFile holds the zone's token, issued on the global with
	// meshnames token zone; it carries the pin of the global's certificate.
	ZoneTokenFile string `json:"zoneTokenFile"`
	// GlobalCAFile, when set, verifies the global's certificate against
	// this CA instead of the pin in the zone token.
	GlobalCAFile string `json:"globalCAFile"`
	// Insecure lets a zone use grpc:// (no TLS): tokens and resources
	// travel in the clear.
	Insecure bool `json:"insecure"`
	// Heartbeat is how often the global and a zone show each other they
	// are there on an idle stream; three missed ones end the stream.
	Heartbeat Duration `json:"heartbeat"`
}

// LeaderConfig configures leader election among instances that share a
// PostgreSQL store (ARCHITECTURE.md section 3). The embedded store's single
// process always leads and ignores it.
type LeaderConfig struct {
	// LeaseDuration is how long the leader lease lasts after each renewal
	// (by the database's clock): how long the other instances wait for a
	// silent leader before one takes over. A leader that cannot renew stops
	// its controllers when a fifth of it is left.
	LeaseDuration Duration `json:"leaseDuration"`
	// RenewInterval is how often the leader renews the lease.
	RenewInterval Duration `json:"renewInterval"`
	// RetryInterval is how often the other instances try to take the lease,
	// and how soon a leader retries a failed renewal.
	RetryInterval Duration `json:"retryInterval"`
}

// ServicesConfig configures the MeshServices synthesised from Dataplanes
// (universal mode; seeds 002 and 004).
type ServicesConfig struct {
	// ExportDefault is spec.export.mode of a synthesised MeshService whose
	// Dataplanes carry no kuma.io/export-mode tag: All or None.
	ExportDefault string `json:"exportDefault"`
	// DeletionGracePeriod is how long a synthesised MeshService outlives
	// its last Dataplane, so that a restarting workload keeps its VIP.
	DeletionGracePeriod Duration `json:"deletionGracePeriod"`
}

// Engines of the embedded store (StoreConfig.Engine).
const (
	EngineSQLite = "sqlite"
	EnginePebble = "pebble"
)

// StoreConfig selects and tunes the store.
type StoreConfig struct {
	// URL is empty for the embedded store, or a postgres:// URL.
	URL string `json:"url"`
	// DataDir holds the embedded store.
	DataDir string `json:"dataDir"`
	// Engine is the embedded store's engine: sqlite or pebble. Pebble
	// migrates a data directory that SQLite wrote; SQLite refuses one that
	// pebble wrote.
	Engine string `json:"engine"`
	// TombstoneRetention is how long deletions stay in the change feed, so
	// that readers that were away can resume without a full relist.
	TombstoneRetention Duration `json:"tombstoneRetention"`
}

// APIConfig configures the REST API server.
type APIConfig struct {
	Addr string `json:"addr"`
	// ShutdownTimeout bounds how long SIGTERM waits for in-flight requests.
	ShutdownTimeout Duration `json:"shutdownTimeout"`
	// TLS serves the API over HTTPS. An Addr that is not a loopback
	// address needs it, unless Insecure.
	TLS APITLSConfig `json:"tls"`
	// Insecure allows a non-loopback Addr without TLS: tokens then cross
	// the network in clear.
	Insecure bool          `json:"insecure"`
	Auth     APIAuthConfig `json:"auth"`
	// Limits bound what one request may ask of the server.
	Limits APILimitsConfig `json:"limits"`
}

// APILimitsConfig bounds what one request may ask of the API, so that no
// client can make the server hold more than that in memory (413 past
// each, naming the setting).
type APILimitsConfig struct {
	// MaxBodyBytes bounds the body of a request (a resource's PUT, the
	// Kuma adapter's): 1 MiB holds the largest resource the store keeps.
	MaxBodyBytes int `json:"maxBodyBytes"`
	// MaxApplyBytes and MaxApplyDocuments bound one POST /_apply, which
	// `meshnames apply` sends with every document of its file.
	MaxApplyBytes     int `json:"maxApplyBytes"`
	MaxApplyDocuments int `json:"maxApplyDocuments"`
}

// The limits' defaults and bounds.
const (
	DefaultMaxBodyBytes      = 1 << 20
	DefaultMaxApplyBytes     = 64 << 20
	DefaultMaxApplyDocuments = 100_000
	minBodyBytes             = 4 << 10
	maxBodyBytes             = 1 << 30
	maxApplyDocuments        = 1_000_000
)

// APITLSConfig names the API's certificate and key (PEM files).
type APITLSConfig struct {
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

// APIAuthConfig configures who may use the API (docs/security.md).
type APIAuthConfig struct {
	// LoopbackAdmin makes a request without a token on a loopback
	// listener admin (Kuma's convention). A non-loopback listener always
	// needs tokens.
	LoopbackAdmin bool `json:"loopbackAdmin"`
	// RateLimit is how many requests per second one token may make (0:
	// no limit); RateBurst how many it may make at once.
	RateLimit int `json:"rateLimit"`
	RateBurst int `json:"rateBurst"`
	// RefreshInterval is how often an instance reads the signing keys and
	// revocations, so a token revoked on another instance sharing the
	// store is refused here within it (where the store does not tell when
	// they change: token.Keys.Run).
	RefreshInterval Duration `json:"refreshInterval"`
}

// XDSConfig configures the xDS control plane (Envoy v3 ADS) that zone and
// standalone control planes serve to proxies; a global serves none.
type XDSConfig struct {
	// Addr is where ADS is served (gRPC); empty serves none. Off loopback
	// it needs the API's TLS certificate (api.tls), which it serves too.
	Addr string `json:"addr"`
	// MaxStreamsPerClient bounds the ADS streams one client address may
	// hold open.
	MaxStreamsPerClient int `json:"maxStreamsPerClient"`
	// DNSFilter configures the DNS listener that proxies get with their
	// mesh's names (Envoy's DNS filter).
	DNSFilter DNSFilterConfig `json:"dnsFilter"`
}

// DNSFilterConfig configures the DNS listener of proxies.
type DNSFilterConfig struct {
	// Enabled gives every Envoy proxy the listener. Without it, a proxy
	// gets one when its node metadata dataplane.dns.port names a port
	// (Kuma's data plane sends it).
	Enabled bool `json:"enabled"`
	// Addr is where the listener listens on the proxy's host: an IP
	// address and a port; dataplane.dns.port replaces the port.
	Addr string `json:"addr"`
}

// ProxyDNSMinTTL is the shortest TTL a proxy's DNS listener answers with:
// Envoy's DNS filter takes no shorter one, so a shorter dns.ttl is
// answered with it there.
const ProxyDNSMinTTL = Duration(30 * time.Second)

// DNSConfig configures the DNS server.
type DNSConfig struct {
	Addr string `json:"addr"`
	// TTL of answers; the VIP quarantine is never shorter than it plus 5 s.
	TTL Duration `json:"ttl"`
	// Domains the server is authoritative for: unknown names under them
	// are NXDOMAIN rather than forwarded.
	Domains []string `json:"domains"`
	// ServiceTagDomain is the domain of service-tag names (seed 004:
	// frontend_default_svc_80.mesh).
	ServiceTagDomain string `json:"serviceTagDomain"`
	// Upstreams receive the queries for other names (host:port); with
	// none, such queries are refused.
	Upstreams []string `json:"upstreams"`
	// UpstreamTimeout bounds a forwarded query.
	UpstreamTimeout Duration `json:"upstreamTimeout"`
	// DefaultMesh answers queries from addresses that are not a
	// Dataplane's; empty refuses them.
	DefaultMesh string `json:"defaultMesh"`
}

// VIPsConfig configures virtual IP allocation (ARCHITECTURE.md section 5).
type VIPsConfig struct {
	// Quarantine is how long a released VIP is not handed out again: at
	// least the DNS TTL plus 5 s, so that no client still resolving the
	// old service reaches a new one.
	Quarantine           Duration   `json:"quarantine"`
	MeshService          PoolConfig `json:"meshService"`
	MeshExternalService  PoolConfig `json:"meshExternalService"`
	MeshMultiZoneService PoolConfig `json:"meshMultiZoneService"`
}

// PoolConfig is the address pool of one kind. All meshes share it.
type PoolConfig struct {
	// CIDR is the IPv4 pool.
	CIDR string `json:"cidr"`
	// CIDRv6, when set, is an IPv6 pool: services then get one VIP of each family.
	CIDRv6 string `json:"cidrV6"`
}

// LogConfig configures structured logging.
type LogConfig struct {
	Level  string `json:"level"`
	Format string `json:"format"`
}

// DefaultsConfig controls the resources created at start.
type DefaultsConfig struct {
	// SkipMesh turns off creating the mesh "default" at start.
	SkipMesh bool `json:"skipMesh"`
	// SkipHostnameGenerators turns off creating the default
	// HostnameGenerators of seed 001 at start.
	SkipHostnameGenerators bool `json:"skipHostnameGenerators"`
}

// Default returns the configuration used when nothing is set.
func Default() Config {
	return Config{
		Mode: ModeStandalone,
		Zone: "default",
		Store: StoreConfig{
			DataDir:            "./meshnames-data",
			Engine:             EnginePebble,
			TombstoneRetention: Duration(24 * time.Hour),
		},
		API: APIConfig{Addr: "127.0.0.1:5681", ShutdownTimeout: Duration(10 * time.Second),
			Auth:   APIAuthConfig{LoopbackAdmin: true, RateLimit: 1000, RateBurst: 2000, RefreshInterval: Duration(250 * time.Millisecond)},
			Limits: APILimitsConfig{MaxBodyBytes: DefaultMaxBodyBytes, MaxApplyBytes: DefaultMaxApplyBytes, MaxApplyDocuments: DefaultMaxApplyDocuments}},
		Audit:   AuditConfig{Retention: Duration(90 * 24 * time.Hour)},
		History: HistoryConfig{Retention: Duration(365 * 24 * time.Hour)},
		DNS: DNSConfig{
			Addr: "127.0.0.1:5653", TTL: Duration(10 * time.Second),
			Domains: []string{"mesh.local", "mesh"}, ServiceTagDomain: "mesh",
			UpstreamTimeout: Duration(2 * time.Second), DefaultMesh: "default",
		},
		VIPs: VIPsConfig{
			Quarantine:           Duration(60 * time.Second),
			MeshService:          PoolConfig{CIDR: "241.0.0.0/8"},
			MeshExternalService:  PoolConfig{CIDR: "242.0.0.0/8"},
			MeshMultiZoneService: PoolConfig{CIDR: "243.0.0.0/8"},
		},
		Services: ServicesConfig{ExportDefault: "All", DeletionGracePeriod: Duration(time.Hour)},
		Leader: LeaderConfig{
			LeaseDuration: Duration(15 * time.Second), RenewInterval: Duration(5 * time.Second), RetryInterval: Duration(time.Second),
		},
		Log:  LogConfig{Level: "info", Format: "text"},
		Sync: SyncConfig{Addr: "127.0.0.1:5685", Heartbeat: Duration(5 * time.Second)},
		XDS:  XDSConfig{Addr: "127.0.0.1:5678", MaxStreamsPerClient: 1024, DNSFilter: DNSFilterConfig{Addr: "127.0.0.1:15053"}},

		Env:        EnvUniversal,
		Kubernetes: KubernetesConfig{SystemNamespace: "meshnames-system"},
	}
}

// KubernetesEnv reports whether the Kubernetes API is the store.
func (c *Config) KubernetesEnv() bool { return c.Env == EnvKubernetes }

// Postgres reports whether the store is PostgreSQL.
func (c *Config) Postgres() bool {
	return strings.HasPrefix(c.Store.URL, "postgres://") || strings.HasPrefix(c.Store.URL, "postgresql://")
}

// Validate reports every problem with field paths.
func (c *Config) Validate() validate.Errors {
	var errs validate.Errors
	errs.Check("mode", validate.OneOf(c.Mode, ModeStandalone, ModeZone, ModeGlobal))
	if c.Mode != ModeGlobal {
		errs.Check("zone", validate.DNS1123Label(c.Zone))
	}
	errs.Check("env", validate.OneOf(c.Env, EnvUniversal, EnvKubernetes))
	if c.KubernetesEnv() {
		if c.Store.URL != "" {
			errs.Add("store.url", "must be empty with env kubernetes: the Kubernetes API is the store")
		}
		errs.Check("kubernetes.systemNamespace", validate.DNS1123Label(c.Kubernetes.SystemNamespace))
	}
	if c.Store.URL != "" && !c.Postgres() {
		errs.Add("store.url", `must be empty (the embedded store) or a PostgreSQL URL starting with "postgres://"`)
	}
	if c.Store.URL == "" && c.Store.DataDir == "" {
		errs.Add("store.dataDir", "must not be empty when the embedded store is used")
	}
	errs.Check("store.engine", validate.OneOf(c.Store.Engine, EngineSQLite, EnginePebble))
	if c.Store.TombstoneRetention < Duration(time.Minute) {
		errs.Add("store.tombstoneRetention", "must be at least 1m")
	}
	checkAddr(&errs, "api.addr", c.API.Addr)
	checkAddr(&errs, "dns.addr", c.DNS.Addr)
	if c.XDS.Addr != "" {
		checkAddr(&errs, "xds.addr", c.XDS.Addr)
		if c.API.TLS.Cert == "" && !LoopbackAddr(c.XDS.Addr) && c.Mode != ModeGlobal {
			errs.Addf("xds.addr", "%s is not a loopback address: off loopback ADS needs TLS (--api-tls-cert and --api-tls-key, which it serves too) so that dataplane tokens do not cross the network in clear", c.XDS.Addr)
		}
	}
	if c.XDS.MaxStreamsPerClient < 1 {
		errs.Addf("xds.maxStreamsPerClient", "must be at least 1, got %d", c.XDS.MaxStreamsPerClient)
	}
	if a, err := netip.ParseAddrPort(c.XDS.DNSFilter.Addr); err != nil || a.Port() == 0 || a.Addr().Zone() != "" {
		errs.Addf("xds.dnsFilter.addr", "must be an IP address and a port from 1 to 65535, such as 127.0.0.1:15053 ([::1]:15053 for IPv6), got %q: it is the address of a listener on the proxy's host", c.XDS.DNSFilter.Addr)
	}
	if c.API.ShutdownTimeout <= 0 {
		errs.Add("api.shutdownTimeout", "must be positive")
	}
	c.validateSecurity(&errs)
	if c.DNS.TTL < Duration(time.Second) || c.DNS.TTL > Duration(time.Hour) {
		errs.Addf("dns.ttl", "must be between 1s and 1h, got %s", c.DNS.TTL)
	}
	if len(c.DNS.Domains) == 0 {
		errs.Add("dns.domains", "must name at least one domain, such as mesh.local")
	}
	for i, d := range c.DNS.Domains {
		errs.Check(validate.Path("dns.domains").Index(i), validate.DNS1123Subdomain(d))
	}
	errs.Check("dns.serviceTagDomain", validate.DNS1123Subdomain(c.DNS.ServiceTagDomain))
	for i, u := range c.DNS.Upstreams {
		checkAddr(&errs, validate.Path("dns.upstreams").Index(i), u)
	}
	if c.DNS.UpstreamTimeout <= 0 {
		errs.Add("dns.upstreamTimeout", "must be positive")
	}
	if c.DNS.DefaultMesh != "" {
		errs.Check("dns.defaultMesh", validate.DNS1123Subdomain(c.DNS.DefaultMesh))
	}
	c.validateVIPs(&errs)
	errs.Check("services.exportDefault", validate.OneOf(c.Services.ExportDefault, "All", "None"))
	if c.Services.DeletionGracePeriod < 0 {
		errs.Addf("services.deletionGracePeriod", "must not be negative, got %s", c.Services.DeletionGracePeriod)
	}
	c.validateLeader(&errs)
	c.validateSync(&errs)
	errs.Check("log.level", validate.OneOf(c.Log.Level, "debug", "info", "warn", "error"))
	errs.Check("log.format", validate.OneOf(c.Log.Format, "text", "json"))
	return errs
}

// validateSync checks what each mode needs to sync.
func (c *Config) validateSync(errs *validate.Errors) {
	s := c.Sync
	if s.Heartbeat < Duration(100*time.Millisecond) || s.Heartbeat > Duration(time.Minute) {
		errs.Addf("sync.heartbeat", "must be between 100ms and 1m, got %s", s.Heartbeat)
	}
	if (s.TLSCert == "") != (s.TLSKey == "") {
		errs.Add("sync.tlsCert", "sync.tlsCert and sync.tlsKey must be given together")
	}
	switch c.Mode {
	case ModeGlobal:
		checkAddr(errs, "sync.addr", s.Addr)
	case ModeZone:
		if s.GlobalAddress == "" {
			errs.Add("sync.globalAddress", "a zone needs its global's address, such as grpcs://global:5685 (a zone without a global is --mode standalone)")
		} else if msg := checkGlobalAddress(s.GlobalAddress, s.Insecure); msg != "" {
			errs.Add("sync.globalAddress", msg)
		}
		if s.ZoneTokenFile == "" {
			errs.Add("sync.zoneTokenFile", "a zone needs its zone token (meshnames token zone --zone "+c.Zone+" on the global)")
		}
	}
}

// checkGlobalAddress checks grpcs://HOST:PORT (grpc:// when insecure).
func checkGlobalAddress(addr string, insecure bool) string {
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Sprintf("must be grpcs://HOST:PORT, got %q", addr)
	}
	if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" {
		return fmt.Sprintf("must name a port: grpcs://HOST:PORT, got %q", addr)
	}
	switch {
	case u.Scheme == "grpcs":
	case u.Scheme == "grpc" && !insecure:
		return "grpc:// sends the zone token and every synced resource in the clear: use grpcs://, or allow it with sync.insecure (--sync-insecure)"
	case u.Scheme != "grpc":
		return fmt.Sprintf("must start with grpcs:// (or grpc:// with --sync-insecure), got %q", addr)
	}
	return ""
}

// validateSecurity checks TLS, authentication and the retention of the
// audit log and history.
func (c *Config) validateSecurity(errs *validate.Errors) {
	a := c.API
	if (a.TLS.Cert == "") != (a.TLS.Key == "") {
		errs.Add("api.tls", "set both cert and key (--api-tls-cert and --api-tls-key), or neither")
	}
	if a.TLS.Cert == "" && !a.Insecure && !LoopbackAddr(a.Addr) {
		errs.Addf("api.addr", "%s is not a loopback address: off loopback the API needs TLS (--api-tls-cert and --api-tls-key) so that tokens do not cross the network in clear; --api-insecure serves plain HTTP anyway", a.Addr)
	}
	if a.Auth.RateLimit < 0 {
		errs.Addf("api.auth.rateLimit", "must not be negative (0 means no limit), got %d", a.Auth.RateLimit)
	}
	if a.Auth.RateLimit > 0 && a.Auth.RateBurst < 1 {
		errs.Addf("api.auth.rateBurst", "must be at least 1 when api.auth.rateLimit is set, got %d", a.Auth.RateBurst)
	}
	if l := a.Limits.MaxBodyBytes; l < minBodyBytes || l > maxBodyBytes {
		errs.Addf("api.limits.maxBodyBytes", "must be between %d and %d, got %d", minBodyBytes, maxBodyBytes, l)
	}
	if l := a.Limits.MaxApplyBytes; l < a.Limits.MaxBodyBytes || l > maxBodyBytes {
		errs.Addf("api.limits.maxApplyBytes", "must be between api.limits.maxBodyBytes (%d) and %d, got %d", a.Limits.MaxBodyBytes, maxBodyBytes, l)
	}
	if l := a.Limits.MaxApplyDocuments; l < 1 || l > maxApplyDocuments {
		errs.Addf("api.limits.maxApplyDocuments", "must be between 1 and %d, got %d", maxApplyDocuments, l)
	}
	if r := a.Auth.RefreshInterval; r < Duration(10*time.Millisecond) || r > Duration(time.Second) {
		errs.Addf("api.auth.refreshInterval", "must be between 10ms and 1s (a revocation must hold on every instance within a second), got %s", r)
	}
	if c.Audit.Retention < Duration(time.Hour) {
		errs.Addf("audit.retention", "must be at least 1h, got %s", c.Audit.Retention)
	}
	if c.History.Retention < Duration(time.Hour) {
		errs.Addf("history.retention", "must be at least 1h, got %s", c.History.Retention)
	}
}

// LoopbackAddr reports whether addr (host:port) binds a loopback address
// only: 127.0.0.0/8, ::1 or localhost. An empty host (every interface) is
// not.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return true // reported as a bad address elsewhere
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// validateLeader checks that the leader renews well before its lease (and
// the election's session, silent between renewals) can run out.
func (c *Config) validateLeader(errs *validate.Errors) {
	l := c.Leader
	if l.LeaseDuration < Duration(time.Second) || l.LeaseDuration > Duration(10*time.Minute) {
		errs.Addf("leader.leaseDuration", "must be between 1s and 10m, got %s", l.LeaseDuration)
	}
	half := l.LeaseDuration / 2
	if l.RenewInterval <= 0 || l.RenewInterval > half {
		errs.Addf("leader.renewInterval", "must be positive and at most half of leader.leaseDuration (%s), got %s: the lease, and the session that holds it, must not run out between two renewals", half, l.RenewInterval)
	}
	if l.RetryInterval <= 0 || l.RetryInterval > half {
		errs.Addf("leader.retryInterval", "must be positive and at most half of leader.leaseDuration (%s), got %s", half, l.RetryInterval)
	}
}

// validateVIPs checks the pools (parse, family, size, no overlap) and that
// the quarantine outlasts what DNS clients may have cached.
func (c *Config) validateVIPs(errs *validate.Errors) {
	if min := c.DNS.TTL + Duration(5*time.Second); c.VIPs.Quarantine < min {
		errs.Addf("vips.quarantine", "must be at least dns.ttl + 5s (%s), got %s: a released VIP must not be reused while clients may still resolve the old service to it", min, c.VIPs.Quarantine)
	} else if min := max(c.DNS.TTL, ProxyDNSMinTTL) + Duration(5*time.Second); c.XDS.Addr != "" && c.Mode != ModeGlobal && c.VIPs.Quarantine < min {
		errs.Addf("vips.quarantine", "must be at least %s when xDS is served (xds.addr): a proxy's DNS listener answers with a TTL of at least %s (Envoy's least), and a released VIP must not be reused while its clients may still resolve the old service to it", min, ProxyDNSMinTTL)
	}
	type pool struct {
		field  string
		prefix netip.Prefix
	}
	var pools []pool
	for _, p := range []struct {
		field string
		cfg   PoolConfig
	}{{"vips.meshService", c.VIPs.MeshService}, {"vips.meshExternalService", c.VIPs.MeshExternalService}, {"vips.meshMultiZoneService", c.VIPs.MeshMultiZoneService}} {
		if prefix, ok := checkPool(errs, p.field+".cidr", p.cfg.CIDR, false); ok {
			pools = append(pools, pool{p.field + ".cidr", prefix})
		}
		if p.cfg.CIDRv6 != "" {
			if prefix, ok := checkPool(errs, p.field+".cidrV6", p.cfg.CIDRv6, true); ok {
				pools = append(pools, pool{p.field + ".cidrV6", prefix})
			}
		}
	}
	for i, a := range pools {
		for _, b := range pools[i+1:] {
			if a.prefix.Overlaps(b.prefix) {
				errs.Addf(validate.Path(b.field), "%s overlaps %s (%s): the pools of the kinds must not overlap, so that a VIP names one service", b.prefix, a.field, a.prefix)
			}
		}
	}
}

// checkPool parses a pool: a masked prefix of the right family with at
// least two usable addresses (network and broadcast are never handed out).
func checkPool(errs *validate.Errors, field, cidr string, v6 bool) (netip.Prefix, bool) {
	family, maxBits := "IPv4", 30
	if v6 {
		family, maxBits = "IPv6", 126
	}
	p, err := netip.ParsePrefix(cidr)
	switch {
	case err != nil:
		errs.Addf(validate.Path(field), "must be an %s CIDR such as %s, got %q", family, map[bool]string{false: "241.0.0.0/8", true: "fd00:241::/64"}[v6], cidr)
	case p.Addr().Is4() == v6 || p.Addr().Is4In6():
		errs.Addf(validate.Path(field), "must be an %s CIDR, got %s", family, cidr)
	case p.Masked() != p:
		errs.Addf(validate.Path(field), "must be a network address: %s, not %s", p.Masked(), cidr)
	case p.Bits() > maxBits:
		errs.Addf(validate.Path(field), "is too small: /%d or larger is needed (network and broadcast are never handed out), got %s", maxBits, cidr)
	default:
		return p, true
	}
	return netip.Prefix{}, false
}

func checkAddr(errs *validate.Errors, field validate.Path, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		errs.Addf(field, "must be host:port, got %q", addr)
		return
	}
	if host != "" && net.ParseIP(host) == nil && validate.DNS1123Subdomain(host) != "" {
		errs.Addf(field, "host must be an IP address or a DNS name, got %q", host)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		errs.Addf(field, "port must be a number between 0 and 65535, got %q", port)
	}
}

// Redacted returns a copy safe to print: the password of a PostgreSQL URL
// is masked.
func (c Config) Redacted() Config {
	if u, err := url.Parse(c.Store.URL); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			c.Store.URL = u.String()
		}
	}
	return c
}

// Duration is a time.Duration written as "15s", "1h30m".
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// DecodeValue implements decode.Decoder.
func (d *Duration) DecodeValue(v any) string {
	s, ok := v.(string)
	if !ok {
		return fmt.Sprintf("must be a duration such as \"30s\" or \"1h\", got %v", v)
	}
	return d.set(s)
}

func (d *Duration) set(s string) string {
	p, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Sprintf("must be a duration such as \"30s\" or \"1h\", got %q", s)
	}
	*d = Duration(p)
	return ""
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(d.String())), nil
}
