package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/meshnames/meshnames/internal/api"
)

// BackupResult describes a backup the server streamed.
type BackupResult struct {
	// Engine is the embedded engine that wrote it: pebble or sqlite.
	Engine string
	// Revision is the store revision it holds.
	Revision int64
	// Bytes is the size of the tar stream.
	Bytes int64
}

// Backup streams a backup of the server's store (GET /_backup, admin
// only) to w: a tar of a data directory. It has no time limit but ctx's.
// It fails when the stream ends without the trailers the server sends
// after a complete backup: what was written to w is then not a backup.
func (c *Client) Backup(ctx context.Context, w io.Writer) (BackupResult, error) {
	hc := *c.http
	hc.Timeout = 0 // a large store takes as long as it takes
	resp, err := c.send(ctx, &hc, http.MethodGet, "/_backup", nil, http.Header{"Accept": {"application/x-tar, application/json"}})
	if err != nil {
		return BackupResult{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return BackupResult{}, apiError(resp.StatusCode, b)
	}
	var res BackupResult
	res.Bytes, err = io.Copy(w, resp.Body)
	if err != nil {
		return res, fmt.Errorf("backup from %s cut short after %d bytes: %w", c.Server(), res.Bytes, err)
	}
	res.Engine = resp.Trailer.Get(api.BackupEngineTrailer)
	rev := resp.Trailer.Get(api.BackupRevisionTrailer)
	if res.Engine == "" || rev == "" {
		return res, fmt.Errorf("backup from %s ended after %d bytes without its trailers: it is incomplete (the server's log says why)", c.Server(), res.Bytes)
	}
	if res.Revision, err = strconv.ParseInt(rev, 10, 64); err != nil {
		return res, fmt.Errorf("backup from %s: bad %s trailer %q", c.Server(), api.BackupRevisionTrailer, rev)
	}
	return res, nil
}
