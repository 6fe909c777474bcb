package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/meshnames/meshnames/internal/api"
)

func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	var h http.Header
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
		h = http.Header{"Content-Type": {"application/json"}}
	}
	r, err := c.do(ctx, method, path, body, h)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(r.body, out); err != nil {
		return fmt.Errorf("decode the answer of %s %s: %w", method, path, err)
	}
	return nil
}

// IssueToken issues a user token (POST /tokens).
func (c *Client) IssueToken(ctx context.Context, req api.TokenRequest) (*api.TokenResponse, error) {
	var out api.TokenResponse
	if err := c.call(ctx, http.MethodPost, "/tokens", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// IssueZoneToken issues a zone token (POST /tokens/zone on a global).
func (c *Client) IssueZoneToken(ctx context.Context, zone, validFor string) (*api.TokenResponse, error) {
	var out api.TokenResponse
	if err := c.call(ctx, http.MethodPost, "/tokens/zone", api.TokenRequest{Zone: zone, ValidFor: validFor}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// IssueDataplaneToken issues the token of a proxy: the Dataplane name of
// mesh (POST /tokens/dataplane).
func (c *Client) IssueDataplaneToken(ctx context.Context, mesh, name, validFor string) (*api.TokenResponse, error) {
	var out api.TokenResponse
	if err := c.call(ctx, http.MethodPost, "/tokens/dataplane", api.TokenRequest{Mesh: mesh, Name: name, ValidFor: validFor}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// IssueIngressToken issues the token of the ZoneIngress name's proxy
// (POST /tokens/ingress).
func (c *Client) IssueIngressToken(ctx context.Context, name, validFor string) (*api.TokenResponse, error) {
	var out api.TokenResponse
	if err := c.call(ctx, http.MethodPost, "/tokens/ingress", api.TokenRequest{Name: name, ValidFor: validFor}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tokens lists the tokens issued (GET /tokens).
func (c *Client) Tokens(ctx context.Context) ([]api.TokenInfo, error) {
	var out api.TokenList
	if err := c.call(ctx, http.MethodGet, "/tokens", nil, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// RevokeToken revokes the token id (DELETE /tokens/{id}).
func (c *Client) RevokeToken(ctx context.Context, id string) (*api.TokenInfo, error) {
	var out api.TokenInfo
	if err := c.call(ctx, http.MethodDelete, "/tokens/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RotateKey adds a signing key (POST /tokens/_rotate-key) and returns its ID.
func (c *Client) RotateKey(ctx context.Context) (string, error) {
	var out api.KeyRotation
	if err := c.call(ctx, http.MethodPost, "/tokens/_rotate-key", nil, &out); err != nil {
		return "", err
	}
	return out.KeyID, nil
}

// AuditQuery selects audit entries (GET /audit); empty fields select all.
type AuditQuery struct {
	Kind, Mesh, Name, Subject string
	// Since and Until are RFC 3339 times or durations before now ("1h").
	Since, Until string
	Limit        int
	Before       int64
}

// Audit returns one page of audit entries, newest first, and the seq to
// pass as Before for the next page (0 when there is none).
func (c *Client) Audit(ctx context.Context, q AuditQuery) ([]api.AuditEntry, int64, error) {
	v := url.Values{}
	for k, s := range map[string]string{"kind": q.Kind, "mesh": q.Mesh, "name": q.Name, "subject": q.Subject, "since": q.Since, "until": q.Until} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Before > 0 {
		v.Set("before", strconv.FormatInt(q.Before, 10))
	}
	var page api.AuditPage
	if err := c.call(ctx, http.MethodGet, "/audit?"+v.Encode(), nil, &page); err != nil {
		return nil, 0, err
	}
	var next int64
	if page.Next != "" && len(page.Items) > 0 {
		next = page.Items[len(page.Items)-1].Seq
	}
	return page.Items, next, nil
}

// History returns who held a VIP or a hostname (GET /history): give one.
func (c *Client) History(ctx context.Context, vip, hostname string, since time.Duration) (*api.HistoryReport, error) {
	v := url.Values{}
	if vip != "" {
		v.Set("vip", vip)
	}
	if hostname != "" {
		v.Set("hostname", hostname)
	}
	if since > 0 {
		v.Set("since", since.String())
	}
	var out api.HistoryReport
	if err := c.call(ctx, http.MethodGet, "/history?"+v.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
