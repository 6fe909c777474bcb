package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/audit"
	"github.com/meshnames/meshnames/internal/store"
)

// defaultNoBackup answers GET /_backup on a store that takes none when
// Options.NoBackup is empty.
const defaultNoBackup = "this control plane's store takes no backup through meshnames; only the embedded store (store.engine pebble or sqlite) does: " +
	"back up PostgreSQL with pg_dump, and the Kubernetes store with an etcd snapshot"

// backup answers GET /_backup (admin only, audited): a tar stream of a
// data directory holding a consistent snapshot of the store, and the
// engine and revision in trailers (api.BackupEngineTrailer and
// api.BackupRevisionTrailer). A failure after the stream began aborts the
// response, so the client sees a stream cut short without the trailers.
func (s *Server) backup(w http.ResponseWriter, r *http.Request) {
	b, ok := s.opts.Store.(store.Backuper)
	if !ok {
		detail := s.opts.NoBackup
		if detail == "" {
			detail = defaultNoBackup
		}
		writeError(w, newError(http.StatusNotImplemented, "Not implemented", detail))
		return
	}
	w.Header().Set("Trailer", api.BackupEngineTrailer+", "+api.BackupRevisionTrailer)
	tw := &tarResponse{w: w}
	info, err := b.Backup(r.Context(), tw)
	e := auditEntry(r.Context(), api.VerbBackup, "", "", http.StatusOK)
	if err == nil {
		e.Reason = fmt.Sprintf("%s store at revision %d, %d bytes", info.Engine, info.Revision, tw.n)
		w.Header().Set(api.BackupEngineTrailer, info.Engine)
		w.Header().Set(api.BackupRevisionTrailer, strconv.FormatInt(info.Revision, 10))
	} else {
		e.Result, e.Reason = api.ResultFailed, "backup failed: "+err.Error()
		if !tw.started {
			w.Header().Del("Trailer")
			ae := fromError(err)
			if ae.Status >= 500 && r.Context().Err() == nil {
				s.log.Error("backup failed", "err", err)
			}
			e.Code = ae.Status
			writeError(w, ae)
		} else {
			s.log.Error("backup failed after its stream began; the response is cut short", "err", err, "bytes", tw.n)
		}
	}
	s.auditBackup(r, e)
	if err != nil && tw.started {
		panic(http.ErrAbortHandler) // no trailers: the client knows
	}
}

// auditBackup writes the audit entry of a backup, taken or not, and tells
// the guard it is written.
func (s *Server) auditBackup(r *http.Request, e api.AuditEntry) {
	if s.recorder == nil {
		return
	}
	// The client may be gone: the entry is written anyway.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	if err := audit.Append(ctx, s.opts.Store, e); err != nil {
		s.log.Error("cannot write an audit entry", "err", err, "verb", e.Verb)
		return
	}
	markAudited(r.Context(), e)
}

// tarResponse starts the response at the first byte of the stream, so
// that an error before it is answered with an error status.
type tarResponse struct {
	w       http.ResponseWriter
	started bool
	n       int64
}

func (t *tarResponse) Write(p []byte) (int, error) {
	if !t.started {
		t.started = true
		t.w.Header().Set("Content-Type", "application/x-tar")
		t.w.Header().Set("Content-Disposition", `attachment; filename="meshnames-backup.tar"`)
		t.w.WriteHeader(http.StatusOK)
	}
	n, err := t.w.Write(p)
	t.n += int64(n)
	return n, err
}
