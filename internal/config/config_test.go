package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/meshnames/meshnames/internal/validate"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func fields(err error) []string {
	errs, _ := validate.From(err)
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}

func TestDefault_IsValidAndLoopbackOnly(t *testing.T) {
	c := Default()
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("Default().Validate() = %v", errs)
	}
	for _, addr := range []string{c.API.Addr, c.DNS.Addr} {
		if !strings.HasPrefix(addr, "127.0.0.1:") {
			t.Errorf("default address %q does not bind to loopback", addr)
		}
	}
}

func TestLoad_Layers(t *testing.T) {
	file := writeFile(t, "mode: zone\nzone: east\napi:\n  addr: 127.0.0.1:7000\nstore:\n  tombstoneRetention: 2h\n")
	cfg, err := Load(file, env(map[string]string{
		"MESHNAMES_API_ADDR":           "127.0.0.1:7001",
		"MESHNAMES_STORE_DATA_DIR":     "/var/lib/meshnames",
		"MESHNAMES_DEFAULTS_SKIP_MESH": "true",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Mode, want.Zone = ModeZone, "east"
	want.API.Addr = "127.0.0.1:7001" // env beats file
	want.Store.DataDir = "/var/lib/meshnames"
	want.Store.TombstoneRetention = Duration(2 * time.Hour)
	want.Defaults.SkipMesh = true
	if d := cmp.Diff(want, cfg); d != "" {
		t.Errorf("Load() mismatch (-want +got):\n%s", d)
	}
}

func TestLoad_Rejects(t *testing.T) {
	tests := []struct {
		name   string
		file   string
		env    map[string]string
		fields []string
	}{
		{name: "unknown-key", file: "api:\n  adr: x\n", fields: []string{"api.adr"}},
		{name: "unknown-top-level", file: "stor: {}\n", fields: []string{"stor"}},
		{name: "wrong-type", file: "defaults:\n  skipMesh: yes-please\n", fields: []string{"defaults.skipMesh"}},
		{name: "bad-duration", file: "store:\n  tombstoneRetention: forever\n", fields: []string{"store.tombstoneRetention"}},
		{name: "bad-env-bool", env: map[string]string{"MESHNAMES_DEFAULTS_SKIP_MESH": "maybe"}, fields: []string{"defaults.skipMesh"}},
		{name: "bad-env-duration", env: map[string]string{"MESHNAMES_API_SHUTDOWN_TIMEOUT": "10"}, fields: []string{"api.shutdownTimeout"}},
		{name: "all-at-once", file: "a: 1\nb: 2\n", env: map[string]string{"MESHNAMES_API_SHUTDOWN_TIMEOUT": "x"}, fields: []string{"a", "b", "api.shutdownTimeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.file != "" {
				path = writeFile(t, tt.file)
			}
			_, err := Load(path, env(tt.env))
			if d := cmp.Diff(tt.fields, fields(err)); d != "" {
				t.Errorf("Load() error fields mismatch (-want +got):\n%s\nerror: %v", d, err)
			}
		})
	}
}

func TestLoad_MissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("Load(missing) = %v, want an error naming the file", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		fields []string
	}{
		{name: "bad-mode", mutate: func(c *Config) { c.Mode = "hybrid" }, fields: []string{"mode"}},
		{name: "bad-zone", mutate: func(c *Config) { c.Zone = "East_1" }, fields: []string{"zone"}},
		{name: "global-needs-no-zone", mutate: func(c *Config) { c.Mode, c.Zone = ModeGlobal, "" }},
		{name: "bad-store-url", mutate: func(c *Config) { c.Store.URL = "mysql://x" }, fields: []string{"store.url"}},
		{name: "postgres-url", mutate: func(c *Config) { c.Store.URL = "postgres://u@127.0.0.1/db" }},
		{name: "no-data-dir", mutate: func(c *Config) { c.Store.DataDir = "" }, fields: []string{"store.dataDir"}},
		{name: "bad-api-addr", mutate: func(c *Config) { c.API.Addr = "5681" }, fields: []string{"api.addr"}},
		{name: "bad-dns-port", mutate: func(c *Config) { c.DNS.Addr = "127.0.0.1:99999" }, fields: []string{"dns.addr"}},
		{name: "short-retention", mutate: func(c *Config) { c.Store.TombstoneRetention = Duration(time.Second) }, fields: []string{"store.tombstoneRetention"}},
		{name: "bad-log", mutate: func(c *Config) { c.Log.Level, c.Log.Format = "loud", "xml" }, fields: []string{"log.level", "log.format"}},
		{name: "bad-env", mutate: func(c *Config) { c.Env = "openshift" }, fields: []string{"env"}},
		{name: "kubernetes", mutate: func(c *Config) { c.Env = EnvKubernetes }},
		{name: "kubernetes-with-store", mutate: func(c *Config) { c.Env, c.Store.URL = EnvKubernetes, "postgres://u@127.0.0.1/db" }, fields: []string{"store.url"}},
		{name: "kubernetes-bad-namespace", mutate: func(c *Config) { c.Env, c.Kubernetes.SystemNamespace = EnvKubernetes, "Kuma.System" }, fields: []string{"kubernetes.systemNamespace"}},
		{name: "off-loopback-needs-tls", mutate: func(c *Config) { c.API.Addr = "0.0.0.0:5681" }, fields: []string{"api.addr"}},
		{name: "all-interfaces-needs-tls", mutate: func(c *Config) { c.API.Addr = ":5681" }, fields: []string{"api.addr"}},
		{name: "lan-address-needs-tls", mutate: func(c *Config) { c.API.Addr = "10.1.2.3:5681" }, fields: []string{"api.addr"}},
		{name: "off-loopback-with-tls", mutate: func(c *Config) { c.API.Addr, c.API.TLS = "0.0.0.0:5681", APITLSConfig{Cert: "c.pem", Key: "k.pem"} }},
		{name: "off-loopback-insecure", mutate: func(c *Config) { c.API.Addr, c.API.Insecure = "0.0.0.0:5681", true }},
		{name: "localhost", mutate: func(c *Config) { c.API.Addr = "localhost:5681" }},
		{name: "ipv6-loopback", mutate: func(c *Config) { c.API.Addr = "[::1]:5681" }},
		{name: "cert-without-key", mutate: func(c *Config) { c.API.TLS.Cert = "c.pem" }, fields: []string{"api.tls"}},
		{name: "key-without-cert-off-loopback", mutate: func(c *Config) { c.API.Addr, c.API.TLS.Key = "0.0.0.0:1", "k.pem" }, fields: []string{"api.tls", "api.addr"}},
		{name: "bad-rate", mutate: func(c *Config) { c.API.Auth.RateLimit, c.API.Auth.RateBurst = -1, 0 }, fields: []string{"api.auth.rateLimit"}},
		{name: "rate-without-burst", mutate: func(c *Config) { c.API.Auth.RateBurst = 0 }, fields: []string{"api.auth.rateBurst"}},
		{name: "no-rate-limit", mutate: func(c *Config) { c.API.Auth.RateLimit, c.API.Auth.RateBurst = 0, 0 }},
		{name: "tiny-body", mutate: func(c *Config) { c.API.Limits.MaxBodyBytes = 100 }, fields: []string{"api.limits.maxBodyBytes"}},
		{name: "huge-body", mutate: func(c *Config) { c.API.Limits.MaxBodyBytes, c.API.Limits.MaxApplyBytes = 2<<30, 2<<30 }, fields: []string{"api.limits.maxBodyBytes", "api.limits.maxApplyBytes"}},
		{name: "apply-below-body", mutate: func(c *Config) { c.API.Limits.MaxApplyBytes = c.API.Limits.MaxBodyBytes - 1 }, fields: []string{"api.limits.maxApplyBytes"}},
		{name: "no-documents", mutate: func(c *Config) { c.API.Limits.MaxApplyDocuments = 0 }, fields: []string{"api.limits.maxApplyDocuments"}},
		{name: "small-limits", mutate: func(c *Config) {
			c.API.Limits = APILimitsConfig{MaxBodyBytes: 4096, MaxApplyBytes: 4096, MaxApplyDocuments: 1}
		}},
		{name: "slow-refresh", mutate: func(c *Config) { c.API.Auth.RefreshInterval = Duration(2 * time.Second) }, fields: []string{"api.auth.refreshInterval"}},
		{name: "short-audit", mutate: func(c *Config) { c.Audit.Retention, c.History.Retention = Duration(time.Minute), 0 }, fields: []string{"audit.retention", "history.retention"}},
		{name: "zone-needs-global", mutate: func(c *Config) { c.Mode = ModeZone }, fields: []string{"sync.globalAddress", "sync.zoneTokenFile"}},
		{name: "zone-with-global", mutate: func(c *Config) {
			c.Mode, c.Sync.GlobalAddress, c.Sync.ZoneTokenFile = ModeZone, "grpcs://global:5685", "east.token"
		}},
		{name: "zone-plain-grpc", mutate: func(c *Config) {
			c.Mode, c.Sync.GlobalAddress, c.Sync.ZoneTokenFile = ModeZone, "grpc://global:5685", "east.token"
		}, fields: []string{"sync.globalAddress"}},
		{name: "zone-plain-grpc-allowed", mutate: func(c *Config) {
			c.Mode, c.Sync.GlobalAddress, c.Sync.ZoneTokenFile, c.Sync.Insecure = ModeZone, "grpc://global:5685", "east.token", true
		}},
		{name: "zone-https", mutate: func(c *Config) {
			c.Mode, c.Sync.GlobalAddress, c.Sync.ZoneTokenFile = ModeZone, "https://global:5685", "east.token"
		}, fields: []string{"sync.globalAddress"}},
		{name: "zone-no-port", mutate: func(c *Config) {
			c.Mode, c.Sync.GlobalAddress, c.Sync.ZoneTokenFile = ModeZone, "grpcs://global", "east.token"
		}, fields: []string{"sync.globalAddress"}},
		{name: "global-bad-sync-addr", mutate: func(c *Config) { c.Mode, c.Sync.Addr = ModeGlobal, "5685" }, fields: []string{"sync.addr"}},
		{name: "sync-cert-without-key", mutate: func(c *Config) { c.Sync.TLSCert = "sync.pem" }, fields: []string{"sync.tlsCert"}},
		{name: "bad-heartbeat", mutate: func(c *Config) { c.Sync.Heartbeat = Duration(time.Millisecond) }, fields: []string{"sync.heartbeat"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			if d := cmp.Diff(tt.fields, fields(c.Validate().Err())); d != "" {
				t.Errorf("Validate() fields mismatch (-want +got):\n%s", d)
			}
		})
	}
}

func TestFields_EnvNames(t *testing.T) {
	got := map[string]string{}
	for _, f := range Fields() {
		got[f.Path] = f.Env
	}
	for path, want := range map[string]string{
		"mode":                         "MESHNAMES_MODE",
		"api.addr":                     "MESHNAMES_API_ADDR",
		"store.dataDir":                "MESHNAMES_STORE_DATA_DIR",
		"store.tombstoneRetention":     "MESHNAMES_STORE_TOMBSTONE_RETENTION",
		"defaults.skipMesh":            "MESHNAMES_DEFAULTS_SKIP_MESH",
		"vips.meshService.cidrV6":      "MESHNAMES_VIPS_MESH_SERVICE_CIDR_V6",
		"vips.quarantine":              "MESHNAMES_VIPS_QUARANTINE",
		"dns.ttl":                      "MESHNAMES_DNS_TTL",
		"services.deletionGracePeriod": "MESHNAMES_SERVICES_DELETION_GRACE_PERIOD",
		"leader.leaseDuration":         "MESHNAMES_LEADER_LEASE_DURATION",
		"kubernetes.kubeconfig":        "MESHNAMES_KUBERNETES_KUBECONFIG",
		"kubernetes.systemNamespace":   "MESHNAMES_KUBERNETES_SYSTEM_NAMESPACE",
		"api.auth.loopbackAdmin":       "MESHNAMES_API_AUTH_LOOPBACK_ADMIN",
		"api.tls.cert":                 "MESHNAMES_API_TLS_CERT",
		"xds.dnsFilter.enabled":        "MESHNAMES_XDS_DNS_FILTER_ENABLED",
		"xds.dnsFilter.addr":           "MESHNAMES_XDS_DNS_FILTER_ADDR",
	} {
		if got[path] != want {
			t.Errorf("env name of %s = %q, want %q", path, got[path], want)
		}
	}
}

func TestSet(t *testing.T) {
	c := Default()
	if err := c.Set("store.url", "postgres://127.0.0.1/test"); err != nil {
		t.Fatal(err)
	}
	if !c.Postgres() {
		t.Errorf("Postgres() = false after setting a postgres URL")
	}
	if err := c.Set("api.shutdownTimeout", "soon"); err == nil {
		t.Errorf("Set(bad duration) = nil, want error")
	}
	if err := c.Set("no.such", "x"); err == nil {
		t.Errorf("Set(unknown path) = nil, want error")
	}
}

func TestRedacted_MasksPassword(t *testing.T) {
	c := Default()
	c.Store.URL = "postgres://admin:s3cret@db:5432/meshnames"
	r := c.Redacted()
	if strings.Contains(r.Store.URL, "s3cret") || !strings.Contains(r.Store.URL, "admin") {
		t.Errorf("Redacted URL = %q", r.Store.URL)
	}
	if c.Store.URL != "postgres://admin:s3cret@db:5432/meshnames" {
		t.Errorf("Redacted modified the original")
	}
	out, err := r.YAML()
	if err != nil || !strings.Contains(string(out), "tombstoneRetention: 24h0m0s") {
		t.Errorf("YAML() = %s, %v", out, err)
	}
}

// validateTest changes the defaults and names the fields Validate must
// report (none when the change is valid).
type validateTest struct {
	name   string
	mutate func(*Config)
	fields []string
}

func runValidateTests(t *testing.T, tests []validateTest) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			if d := cmp.Diff(tt.fields, fields(c.Validate().Err())); d != "" {
				t.Errorf("Validate() fields mismatch (-want +got):\n%s\n%v", d, c.Validate())
			}
		})
	}
}

func TestValidate_VIPs(t *testing.T) {
	tests := []validateTest{
		{name: "defaults", mutate: func(c *Config) {}},
		{name: "dual-stack", mutate: func(c *Config) {
			c.VIPs.MeshService.CIDRv6 = "fd00:241::/64"
			c.VIPs.MeshExternalService.CIDRv6 = "fd00:242::/64"
		}},
		{name: "not-a-cidr", mutate: func(c *Config) { c.VIPs.MeshService.CIDR = "241.0.0.0" }, fields: []string{"vips.meshService.cidr"}},
		{name: "v6-in-v4-field", mutate: func(c *Config) { c.VIPs.MeshService.CIDR = "fd00::/64" }, fields: []string{"vips.meshService.cidr"}},
		{name: "v4-in-v6-field", mutate: func(c *Config) { c.VIPs.MeshService.CIDRv6 = "10.0.0.0/8" }, fields: []string{"vips.meshService.cidrV6"}},
		{name: "unmasked", mutate: func(c *Config) { c.VIPs.MeshExternalService.CIDR = "242.1.2.3/8" }, fields: []string{"vips.meshExternalService.cidr"}},
		{name: "too-small", mutate: func(c *Config) { c.VIPs.MeshMultiZoneService.CIDR = "243.0.0.0/31" }, fields: []string{"vips.meshMultiZoneService.cidr"}},
		{name: "smallest-allowed", mutate: func(c *Config) { c.VIPs.MeshMultiZoneService.CIDR = "243.0.0.0/30" }},
		{name: "overlap", mutate: func(c *Config) { c.VIPs.MeshExternalService.CIDR = "241.1.0.0/16" }, fields: []string{"vips.meshExternalService.cidr"}},
		{name: "overlap-v6", mutate: func(c *Config) {
			c.VIPs.MeshService.CIDRv6 = "fd00::/16"
			c.VIPs.MeshMultiZoneService.CIDRv6 = "fd00:243::/64"
		}, fields: []string{"vips.meshMultiZoneService.cidrV6"}},
		{name: "quarantine-shorter-than-ttl", mutate: func(c *Config) { c.VIPs.Quarantine = Duration(14 * time.Second) }, fields: []string{"vips.quarantine"}},
		{name: "quarantine-follows-ttl", mutate: func(c *Config) { c.DNS.TTL = Duration(time.Minute) }, fields: []string{"vips.quarantine"}},
		{name: "ttl-range", mutate: func(c *Config) { c.DNS.TTL = 0 }, fields: []string{"dns.ttl"}},
		// a proxy's DNS listener answers with at least 30 s
		{name: "quarantine-shorter-than-proxy-ttl", mutate: func(c *Config) { c.VIPs.Quarantine = Duration(20 * time.Second) }, fields: []string{"vips.quarantine"}},
		{name: "quarantine-proxy-ttl-without-xds", mutate: func(c *Config) { c.VIPs.Quarantine, c.XDS.Addr = Duration(20*time.Second), "" }},
		{name: "quarantine-proxy-ttl-on-global", mutate: func(c *Config) {
			c.VIPs.Quarantine, c.Mode, c.Sync.Addr = Duration(20*time.Second), ModeGlobal, "127.0.0.1:5685"
		}},
		{name: "quarantine-covers-proxy-ttl", mutate: func(c *Config) { c.VIPs.Quarantine = Duration(35 * time.Second) }},
		{name: "export-default", mutate: func(c *Config) { c.Services.ExportDefault = "all" }, fields: []string{"services.exportDefault"}},
		{name: "grace-negative", mutate: func(c *Config) { c.Services.DeletionGracePeriod = Duration(-time.Second) }, fields: []string{"services.deletionGracePeriod"}},
	}
	runValidateTests(t, tests)
}

func TestValidate_DNSFilter(t *testing.T) {
	addr := func(a string) func(*Config) { return func(c *Config) { c.XDS.DNSFilter.Addr = a } }
	tests := []validateTest{
		{name: "defaults", mutate: func(c *Config) {}},
		{name: "enabled", mutate: func(c *Config) { c.XDS.DNSFilter.Enabled = true }},
		{name: "ipv6", mutate: addr("[::1]:53")},
		{name: "all-addresses", mutate: addr("0.0.0.0:15053")},
		{name: "host-name", mutate: addr("localhost:15053"), fields: []string{"xds.dnsFilter.addr"}},
		{name: "no-port", mutate: addr("127.0.0.1"), fields: []string{"xds.dnsFilter.addr"}},
		{name: "port-zero", mutate: addr("127.0.0.1:0"), fields: []string{"xds.dnsFilter.addr"}},
		{name: "port-too-big", mutate: addr("127.0.0.1:65536"), fields: []string{"xds.dnsFilter.addr"}},
		{name: "zone", mutate: addr("[fe80::1%eth0]:15053"), fields: []string{"xds.dnsFilter.addr"}},
		{name: "empty", mutate: addr(""), fields: []string{"xds.dnsFilter.addr"}},
	}
	runValidateTests(t, tests)
}

func TestValidate_Leader(t *testing.T) {
	lease := func(lease, renew, retry time.Duration) func(*Config) {
		return func(c *Config) { c.Leader = LeaderConfig{Duration(lease), Duration(renew), Duration(retry)} }
	}
	tests := []validateTest{
		{name: "defaults", mutate: func(c *Config) {}},
		{name: "short-for-tests", mutate: lease(3*time.Second, time.Second, 500*time.Millisecond)},
		{name: "renew-at-half", mutate: lease(10*time.Second, 5*time.Second, time.Second)},
		{name: "lease-too-short", mutate: lease(500*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond), fields: []string{"leader.leaseDuration"}},
		{name: "lease-too-long", mutate: lease(time.Hour, time.Minute, time.Second), fields: []string{"leader.leaseDuration"}},
		{name: "renew-not-below-lease", mutate: lease(15*time.Second, 15*time.Second, time.Second), fields: []string{"leader.renewInterval"}},
		{name: "renew-above-half", mutate: lease(15*time.Second, 8*time.Second, time.Second), fields: []string{"leader.renewInterval"}},
		{name: "renew-zero", mutate: lease(15*time.Second, 0, time.Second), fields: []string{"leader.renewInterval"}},
		{name: "retry-zero", mutate: lease(15*time.Second, 5*time.Second, 0), fields: []string{"leader.retryInterval"}},
		{name: "retry-above-half", mutate: lease(15*time.Second, 5*time.Second, 10*time.Second), fields: []string{"leader.retryInterval"}},
		{name: "all", mutate: lease(0, -time.Second, -time.Second), fields: []string{"leader.leaseDuration", "leader.renewInterval", "leader.retryInterval"}},
	}
	runValidateTests(t, tests)
}
