// Package auth decides who a REST API request comes from and whether it
// may do what it asks: the identity from an `Authorization: Bearer` token
// (or admin for a request without one on a loopback listener, unless
// configured otherwise), the role x endpoint x verb policy of
// docs/security.md, a per-token rate limit, and the metrics and log lines
// of refusals (never with the token in them).
//
// Refusals are 401 (no identity: no token where one is needed, or a token
// that does not verify), 403 (an identity the policy refuses) and 429 (a
// token over its rate, or a source over its rate of failed
// authentications), each with a reason a user can act on.
//
// It imports resource and token only; apiserver calls it before routing.
// A Guard is safe for concurrent use.
package auth

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/token"
)

// Identity is who a request comes from.
type Identity struct {
	// Subject is the token's subject, or LoopbackSubject.
	Subject string
	Role    token.Role
	// Meshes limits the identity to these meshes; empty means all.
	Meshes []string
	// TokenID is the ID of the token presented; empty for loopback.
	TokenID string
}

// LoopbackSubject is the subject of a request without a token on a
// loopback listener, which is admin unless api.auth.loopbackAdmin is false.
const LoopbackSubject = "loopback"

type identityKey struct{}

// WithIdentity returns ctx carrying id, for the handlers.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity of ctx, if any.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// Refusal is a request refused before its handler: Status 401, 403 or
// 429, Reason a short label for metrics (missing, expired, forbidden,
// rate_limited, ...), Detail what the user is told.
type Refusal struct {
	Status     int
	Reason     string
	Detail     string
	RetryAfter time.Duration
}

// Options configures a Guard.
type Options struct {
	// Keys verifies tokens.
	Keys *token.Keys
	// LoopbackAdmin makes a request without a token admin. Set it only
	// for a listener bound to a loopback address; a request must also
	// come from a loopback address to get it.
	LoopbackAdmin bool
	// Rate and Burst limit each token's requests per second; Rate 0
	// means no limit.
	Rate  float64
	Burst int
	// FailureRate and FailureBurst limit failed authentications per
	// source address (default 10 and 20).
	FailureRate  float64
	FailureBurst int
	Now          func() time.Time
	Log          *slog.Logger
	Registerer   prometheus.Registerer
}

// Guard authenticates, rate-limits and authorizes requests.
type Guard struct {
	o        Options
	perToken *Limiter
	failures *Limiter

	failed  *prometheus.CounterVec
	denied  *prometheus.CounterVec
	limited prometheus.Counter
}

// NewGuard builds a Guard; it does no I/O.
func NewGuard(o Options) *Guard {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.FailureRate == 0 {
		o.FailureRate, o.FailureBurst = 10, 20
	}
	g := &Guard{
		o:        o,
		perToken: NewLimiter(o.Rate, o.Burst, o.Now),
		failures: NewLimiter(o.FailureRate, o.FailureBurst, o.Now),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_api_auth_failures_total",
			Help: "REST API requests whose authentication failed, by reason (missing, malformed_header, expired, revoked, signature, ...).",
		}, []string{"reason"}),
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_api_auth_denied_total",
			Help: "REST API requests refused by the role policy (403), by role.",
		}, []string{"role"}),
		limited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meshnames_api_rate_limited_total",
			Help: "REST API requests refused with 429 by a rate limit.",
		}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(g.failed, g.denied, g.limited)
	}
	return g
}

// Check authenticates r, applies the rate limits and authorizes a. It
// returns the identity (set as far as it was established) and a refusal,
// or nil when the request may go on.
func (g *Guard) Check(r *http.Request, a Action) (Identity, *Refusal) {
	if a.Class == Public {
		return Identity{}, nil
	}
	source := sourceOf(r)
	id, ref := g.authenticate(r)
	if ref != nil {
		g.failed.WithLabelValues(ref.Reason).Inc()
		g.o.Log.Warn("authentication failed", "reason", ref.Reason, "detail", ref.Detail, "source", source,
			"method", r.Method, "path", r.URL.Path)
		// A missing token is no guess; a bad one may be.
		if ok, wait := g.failures.Allow("source/" + source); ref.Reason != "missing" && !ok {
			g.limited.Inc()
			return id, &Refusal{Status: http.StatusTooManyRequests, Reason: "rate_limited",
				Detail: "too many failed authentications from " + source + "; retry later", RetryAfter: wait}
		}
		return id, ref
	}
	if id.TokenID != "" {
		if ok, wait := g.perToken.Allow("token/" + id.TokenID); !ok {
			g.limited.Inc()
			return id, &Refusal{Status: http.StatusTooManyRequests, Reason: "rate_limited",
				Detail:     fmt.Sprintf("token %s is over its rate limit of %g requests per second (api.auth.rateLimit); retry after %s", id.TokenID, g.o.Rate, roundUp(wait)),
				RetryAfter: wait}
		}
	}
	if err := Authorize(id, a); err != nil {
		g.denied.WithLabelValues(string(id.Role)).Inc()
		return id, &Refusal{Status: http.StatusForbidden, Reason: "forbidden", Detail: err.Error()}
	}
	return id, nil
}

// authenticate finds the identity of r.
func (g *Guard) authenticate(r *http.Request) (Identity, *Refusal) {
	h := r.Header.Get("Authorization")
	if h == "" {
		if g.o.LoopbackAdmin && isLoopback(r.RemoteAddr) {
			return Identity{Subject: LoopbackSubject, Role: token.RoleAdmin}, nil
		}
		detail := "this request needs a token: send Authorization: Bearer <token> (meshnames: --token-file FILE or MESHNAMES_TOKEN)"
		if g.o.LoopbackAdmin {
			detail += "; only requests from this host are admin without one"
		}
		return Identity{}, unauthorized("missing", detail)
	}
	scheme, raw, ok := strings.Cut(h, " ")
	raw = strings.TrimSpace(raw)
	if !ok || !strings.EqualFold(scheme, "Bearer") || raw == "" {
		return Identity{}, unauthorized("malformed_header", `the Authorization header must be "Bearer <token>"`)
	}
	c, err := g.o.Keys.Verify(raw, g.o.Now())
	if err != nil {
		return Identity{}, unauthorized(token.Reason(err), "the token is not accepted: "+err.Error())
	}
	return Identity{Subject: c.Subject, Role: c.Role, Meshes: c.Meshes, TokenID: c.ID}, nil
}

func unauthorized(reason, detail string) *Refusal {
	return &Refusal{Status: http.StatusUnauthorized, Reason: reason, Detail: detail}
}

// sourceOf is the client's IP address (without the port).
func sourceOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Source is the client's address as audit entries and logs name it.
func Source(r *http.Request) string { return sourceOf(r) }

func isLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// RetryAfterHeader is the Retry-After value of d: whole seconds, at least 1.
func RetryAfterHeader(d time.Duration) string {
	return strconv.Itoa(int(roundUp(d) / time.Second))
}

func roundUp(d time.Duration) time.Duration {
	s := (d + time.Second - 1) / time.Second
	return max(s, 1) * time.Second
}
