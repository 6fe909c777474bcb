package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/store/pebble"
	"github.com/meshnames/meshnames/internal/store/postgres/pgtest"
	"github.com/meshnames/meshnames/internal/token"
)

// signWith signs claims with keys of a store of its own (another global's
// keys, as far as any global is concerned) and writes the token to a file.
func signWith(t *testing.T, c token.Claims) string {
	t.Helper()
	st, err := pebble.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keys, err := token.LoadKeys(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := keys.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "zone.token")
	if err := os.WriteFile(path, []byte(raw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// zoneArgs are the flags of zone zone reaching a global at syncAddr.
func zoneArgs(zone, syncAddr, tokenFile string) []string {
	return []string{"--mode", "zone", "--zone", zone, "--global-address", "grpcs://" + syncAddr,
		"--zone-token-file", tokenFile, "--sync-heartbeat", "300ms"}
}

// TestZoneStart_RefusesUnusableToken: a zone whose token file it cannot
// use refuses to start, with exit status 1 and one message that names the
// file and the reason. No global is needed to tell.
func TestZoneStart_RefusesUnusableToken(t *testing.T) {
	t.Parallel() // no timing bound that other processes could break
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	now := time.Now()
	pin := "sha256:" + strings.Repeat("ab", 32)
	zoneClaims := func(zone string, issued time.Time, validFor time.Duration) token.Claims {
		return token.Claims{Subject: "zone/" + zone, Role: token.RoleZone, Zone: zone, SyncPin: pin, IssuedAt: issued, ExpiresAt: issued.Add(validFor)}
	}
	for _, tc := range []struct {
		name, token, want string
	}{
		{name: "missing", token: filepath.Join(dir, "nonexistent.token"), want: "cannot read it: no such file or directory"},
		{name: "directory", token: dir, want: "cannot read it: is a directory"},
		{name: "empty", token: file("empty.token", "\n"), want: "it is empty: write the output of meshnames token zone --zone east"},
		{name: "garbage", token: file("garbage.token", "garbage"), want: "the zone token is malformed"},
		{name: "bad-payload", token: file("payload.token", "a.!!!.c"), want: "the zone token is malformed"},
		{name: "user-token", token: signWith(t, token.Claims{Subject: "carol", Role: token.RoleAdmin, IssuedAt: now, ExpiresAt: now.Add(time.Hour)}),
			want: "the token is not a zone token"},
		{name: "other-zone", token: signWith(t, zoneClaims("west", now, time.Hour)),
			want: `the zone token is for zone "west", but this control plane is zone "east"`},
		{name: "expired", token: signWith(t, zoneClaims("east", now.Add(-2*time.Hour), time.Hour)),
			want: "the zone token expired at " + now.Add(-time.Hour).UTC().Format(time.RFC3339)[:13]},
		{name: "no-pin", token: signWith(t, token.Claims{Subject: "zone/east", Role: token.RoleZone, Zone: "east", IssuedAt: now, ExpiresAt: now.Add(time.Hour)}),
			want: "the zone token carries no pin of the global's sync certificate, and no --global-ca-file is given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, "east", zoneArgs("east", "127.0.0.1:1", tc.token)...)
			err := p.wait(60 * time.Second)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1", err)
			}
			log := p.log.String()
			want := "Error: zone token file " + tc.token + ": " + tc.want
			if !strings.Contains(log, want) {
				t.Errorf("the output does not say %q:\n%s", want, log)
			}
			if n := strings.Count(log, "Error:"); n != 1 {
				t.Errorf("%d error messages, want 1:\n%s", n, log)
			}
			if strings.Contains(log, "serving the REST API") {
				t.Errorf("it served before refusing:\n%s", log)
			}
		})
	}
}

// readyz returns the status code and the reason of p's /readyz.
func readyz(p *proc) (int, string) {
	resp, err := http.Get(p.api + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var body struct{ Reason string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Reason
}

// tokenClaims reads the ID (jti) and the sync pin of a token in a file,
// without verifying it.
func tokenClaims(t *testing.T, path string) (id, pin string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(strings.TrimSpace(string(raw)), ".")
	if len(parts) != 3 {
		t.Fatalf("%s holds no token", path)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c struct{ Jti, SyncPin string }
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.Jti, c.SyncPin
}

// TestZoneStart_GlobalRefuses: a token the global refuses (revoked while
// the zone is connected, signed by another global's key, or pinning
// another global's certificate) keeps the zone running on what it last
// knew, with /readyz failing and naming the reason, the refusal in a
// metric, retries spaced by backoff, and one log line for the refusal,
// not one per retry.
func TestZoneStart_GlobalRefuses(t *testing.T) {
	t.Parallel() // the retry bound is an upper bound, which load only lowers
	url := pgtest.URL(t)
	g := startGlobal(t, "global", url, "")
	for _, tc := range []struct {
		name, want string
		// token returns the zone token; revoke, when set, is done once
		// the zone has synced.
		token  func(t *testing.T) string
		revoke bool
	}{
		{name: "revoked", token: func(t *testing.T) string { return g.cliToken(t, "east") }, revoke: true,
			want: "zone token refused: token revoked"},
		{name: "another-global", token: func(t *testing.T) string {
			_, pin := tokenClaims(t, g.zoneToken(t, "east", time.Now(), time.Hour, ""))
			return signWith(t, token.Claims{Subject: "zone/east", Role: token.RoleZone, Zone: "east", SyncPin: pin,
				IssuedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)})
		}, want: "zone token refused: token signature invalid"},
		{name: "pin-mismatch", token: func(t *testing.T) string {
			return g.zoneToken(t, "east", time.Now(), time.Hour, "sha256:"+strings.Repeat("0", 64))
		}, want: "does not match the pin in the zone token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tokenFile := tc.token(t)
			z := start(t, "east", zoneArgs("east", g.syncAddr, tokenFile)...)
			if tc.revoke {
				z.waitReady(60 * time.Second)
				waitDefaultMesh(t, z)
				if code := put(t, z.api, msPath("kept"), service("kept", 80, "")); code != http.StatusCreated {
					t.Fatalf("PUT kept = %d", code)
				}
				waitAnswer(t, z, "kept.svc.mesh.local")
				id, _ := tokenClaims(t, tokenFile)
				if out, stderr, err := cli(t, nil, "--server", g.api, "token", "revoke", id); err != nil {
					t.Fatalf("token revoke: %v\n%s%s", err, out, stderr)
				}
			}
			var reason string
			waitFor(t, 60*time.Second, "/readyz failing with "+tc.want, func() bool {
				code, r := readyz(z)
				reason = r
				return code == http.StatusServiceUnavailable && strings.Contains(r, tc.want)
			})
			if !strings.HasPrefix(reason, "the global refuses this zone: ") {
				t.Errorf("/readyz reason %q, want it to say the global refuses this zone", reason)
			}
			if v, err := metric(z.api, `meshnames_zonesync_zone_refused{zone="east"}`); err != nil || v != 1 {
				t.Errorf("meshnames_zonesync_zone_refused = %v (%v), want 1", v, err)
			}
			failures := func() float64 {
				v, _ := metric(z.api, `meshnames_zonesync_connect_failures_total{cause="refused",zone="east"}`)
				return v
			}
			waitFor(t, 60*time.Second, "two refused attempts", func() bool { return failures() >= 2 })
			// Backoff: from the second failure the waits are at least 200
			// ms, 400 ms, 800 ms, 1.6 s (half of a doubling backoff), so
			// at most 4 more attempts in the next 3 s (a fixed 200 ms
			// retry would make 15). Load only lowers the count.
			from := failures()
			time.Sleep(3 * time.Second)
			if n := failures() - from; n > 4 {
				t.Errorf("%v refused attempts in 3 s after the second: retries without backoff", n)
			}
			if n := failures(); n < 3 {
				t.Errorf("%v refused attempts in all: it stopped retrying", n)
			}
			if n := strings.Count(z.log.String(), "the global refuses this zone"); n != 1 {
				t.Errorf("%d log lines about the refusal after %v attempts, want 1:\n%s", n, failures(), z.log.String())
			}
			if tc.revoke {
				if ip := lookup(t, z, "kept.svc.mesh.local"); ip == "" {
					t.Error("the refused zone stopped answering what it knew")
				}
				if !strings.Contains(g.log.String(), "refused a zone's sync stream: bad zone token") {
					t.Error("the global did not log the revoked token's refusal")
				}
			}
		})
	}
}
