package sqlstore

import (
	"context"
	"fmt"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// Pipe sends the statements of one write transaction to the database in
// batches (Dialect.Pipeline): a batch is one round trip however many
// statements it holds, which matters on PostgreSQL, where the writer would
// otherwise wait for the network and the server once per statement.
type Pipe interface {
	// Queue adds a statement, run after those queued before it. row, when
	// not nil, is called for each row of its result with a function that
	// scans that row.
	Queue(query string, args []any, row func(scan func(dest ...any) error) error)
	// Send runs the statements queued since the last Send, in order, and
	// reads their results. The database stops at the first that fails:
	// Send returns its index among them and its error; -1 and nil when all
	// succeeded.
	Send(ctx context.Context) (failed int, err error)
}

// pipelineQueries are the writer's PostgreSQL statements that take a whole
// group at once, with arrays: their text does not depend on the number of
// rows, so each is prepared once per connection.
type pipelineQueries struct {
	// lockMeta takes the meta row lock, as lockMetaWrite, without writing
	// a row version: meta is written once per transaction, by write.
	lockMeta string
	// createLease is createLease returning a row when it inserted one.
	createLease string
	// write is the writes of a transaction in one statement: the last row
	// of each key the group wrote ($1-$11, a column each), the records
	// ($12-$16) and their terms ($17-$19), the last put of each lease not
	// sent before ($20-$22), and meta's revision and record sequence ($23,
	// $24) unless $25 is false. Nothing in it reads a table (the upserts
	// find their rows by primary key), so no plan can make it scan one.
	write string
}

func newPipelineQueries() pipelineQueries {
	return pipelineQueries{
		lockMeta:    `SELECT revision, records FROM meta FOR UPDATE`,
		createLease: `INSERT INTO leases (` + leaseColumns + `) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING RETURNING 1`,
		// unnest in the select list (ProjectSet) rather than in FROM:
		// there, each array of a multi-argument unnest is put in a
		// tuplestore of its own, whose buffers made PostgreSQL grow and
		// trim its heap at every execution.
		write: `WITH res AS (
				INSERT INTO resources (` + columns + `)
				SELECT unnest($1::text[]), unnest($2::text[]), unnest($3::text[]), unnest($4::bigint[]), unnest($5::bigint[]),
					unnest($6::boolean[]), unnest($7::text[]), unnest($8::text[]), unnest($9::text[]), unnest($10::bigint[]),
					unnest($11::bigint[])
				ON CONFLICT (kind, mesh, name) DO UPDATE SET version = excluded.version, revision = excluded.revision,
					deleted = excluded.deleted, labels = excluded.labels, spec = excluded.spec, status = excluded.status,
					creation_time = excluded.creation_time, modification_time = excluded.modification_time
			), rec AS (
				INSERT INTO records (stream, seq, time, terms, data)
				SELECT unnest($12::text[]), unnest($13::bigint[]), unnest($14::bigint[]), unnest($15::text[]), unnest($16::bytea[])
			), ter AS (
				INSERT INTO record_terms (stream, term, seq) SELECT unnest($17::text[]), unnest($18::text[]), unnest($19::bigint[])
			), lput AS (
				INSERT INTO leases (` + leaseColumns + `) SELECT unnest($20::text[]), unnest($21::bytea[]), unnest($22::bigint[])
				ON CONFLICT (name) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
			)
			UPDATE meta SET revision = $23, records = $24 WHERE $25`,
	}
}

// scanFunc makes a Pipe's scan function a scanner.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// unknownCulprit is runTx's culprit when a statement that holds the
// writes of several requests failed: commit then writes each request in a
// transaction of its own, so that the one that fails fails alone.
const unknownCulprit = -2

// runPipelined is runTx with Dialect.Pipeline, in two round trips for a
// group in the usual case:
//
//  1. BEGIN, the meta lock (revision and record sequence), the fence of
//     every fenced request, and the rows of every key the group writes;
//  2. the writes of every operation, decided in between by backend.Next
//     over the rows read and those the group wrote before them, in one
//     statement (pipelineQueries.write) with the records, the lease puts
//     and meta; then the notification and COMMIT.
//
// The meta lock serializes writers, also across instances, so the rows
// read in the first round trip stay the latest until the commit. A create
// of a lease, whose result is whether the name existed, and the fence of a
// request that an earlier request's lease operation may have changed are
// sent when their turn comes, and a lease deletion is queued at its turn,
// each after the lease puts before it: the outcomes are those of running
// every operation in order, as runTx does.
// Of several writes of one key in a group only the last is stored, as
// after runTx, which overwrites the row each time.
func (s *Store) runPipelined(group []*backend.Request) (outcomes []backend.Outcome, last int64, culprit int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
	defer cancel()
	conn, err := s.write.Conn(ctx)
	if err != nil {
		return nil, 0, -1, s.dbErr(ctx, fmt.Errorf("begin: %w", err))
	}
	defer func() { _ = conn.Close() }() // back to the pool
	var txErr error
	rawErr := conn.Raw(func(driverConn any) error {
		p, err := s.d.Pipeline(driverConn)
		if err != nil {
			return err
		}
		outcomes, last, culprit, txErr = s.pipelineTx(ctx, p, group)
		if txErr != nil {
			// End the transaction the failure aborted. Should that fail
			// too, database/sql discards the connection, which is still
			// in a transaction, before anyone reuses it.
			p.Queue(`ROLLBACK`, nil, nil)
			_, _ = p.Send(ctx)
		}
		return txErr
	})
	switch {
	case txErr != nil:
		return nil, 0, culprit, txErr
	case rawErr != nil:
		return nil, 0, -1, s.dbErr(ctx, fmt.Errorf("begin: %w", rawErr))
	}
	return outcomes, last, -1, nil
}

// pipelineTx runs the transaction of runPipelined on p. On failure,
// culprit is the index of the request whose statement failed, -1 or
// unknownCulprit.
func (s *Store) pipelineTx(ctx context.Context, p Pipe, group []*backend.Request) (outcomes []backend.Outcome, last int64, culprit int, err error) {
	w := &writeTx{s: s, ctx: ctx, pipe: p, now: s.now().UnixNano(), req: -1, culprit: -1,
		rows: map[resource.Key]*row{}, wrote: map[resource.Key]bool{}}
	w.queue(`BEGIN`, nil, nil)
	w.queue(s.pq.lockMeta, nil, func(scan func(...any) error) error { return scan(&w.revision, &w.records) })
	// The fences no earlier request of the group can change are checked
	// in this first round trip.
	current := make([]bool, len(group))
	checked := make([]bool, len(group))
	leases := map[string]bool{} // names of leases the requests before write
	for i, r := range group {
		if r.Fence != nil && !leases[r.Fence.Lease] {
			checked[i] = true
			w.queue(s.q.fence, []any{r.Fence.Lease, r.Fence.LeaseValue()}, func(func(...any) error) error {
				current[i] = true
				return nil
			})
		}
		for j, op := range r.Ops {
			switch op.Type {
			case store.OpPutLease, store.OpDeleteLease, store.OpCreateLease:
				if op.Lease != nil {
					leases[op.Lease.Name] = true
				}
				continue
			case store.OpAppendRecord:
				continue
			}
			pr := r.Prepared(j)
			if pr == nil || pr.Err != nil || pr.EncodeErr != nil {
				continue
			}
			if _, ok := w.rows[pr.Key]; ok {
				continue
			}
			// A statement per key: one array of keys joined with
			// resources made PostgreSQL scan the table when its
			// statistics were older than its growth.
			w.rows[pr.Key] = nil // nil until a row is found
			w.queue(s.q.load, []any{string(pr.Key.Kind), pr.Key.Mesh, pr.Key.Name}, func(scan func(...any) error) error {
				r, err := scanRow(scanFunc(scan))
				if err != nil {
					return err
				}
				w.rows[r.Key] = r
				return nil
			})
		}
	}
	if err := w.send(); err != nil {
		return nil, 0, -1, fmt.Errorf("begin: %w", err)
	}
	base, recordsBase := w.revision, w.records
	outcomes = make([]backend.Outcome, len(group))
	for i, r := range group {
		w.req, w.culprit = i, i
		if r.Fence != nil {
			ok := current[i]
			if !checked[i] {
				if ok, err = w.fenced(r.Fence); err != nil {
					return nil, 0, w.culprit, err
				}
			}
			if !ok {
				outcomes[i] = backend.Fenced(r.Fence)
				continue
			}
		}
		results, err := r.Run(w.apply)
		if err != nil {
			return nil, 0, w.culprit, err
		}
		outcomes[i].Results = results
	}
	w.req = -1
	if len(w.written) > 0 || len(w.leaseOps) > 0 || w.revision > base || w.records > recordsBase {
		w.req = unknownCulprit
		w.queue(s.pq.write, w.writeArgs(w.revision > base || w.records > recordsBase), nil)
		w.req = -1
	}
	if w.revision > base && s.d.Notify != nil {
		query, args := s.d.Notify(w.revision)
		w.queue(query, args, nil)
	}
	w.queue(`COMMIT`, nil, nil)
	if err := w.send(); err != nil {
		return nil, 0, w.culprit, fmt.Errorf("commit: %w", err)
	}
	s.recent.Add(w.events)
	if w.revision == base {
		return outcomes, 0, -1, nil
	}
	return outcomes, w.revision, -1, nil
}

// queue adds a statement to the pipe on behalf of the request being
// written (w.req: -1 for the transaction's own statements).
func (w *writeTx) queue(query string, args []any, row func(scan func(dest ...any) error) error) {
	w.pipe.Queue(query, args, row)
	w.owners = append(w.owners, w.req)
}

// send sends the statements queued. On failure it sets w.culprit to the
// request whose statement failed (-1 for the transaction's own,
// unknownCulprit for the write of several) and returns the error
// classified by dbErr.
func (w *writeTx) send() error {
	owners := w.owners
	w.owners = w.owners[:0]
	failed, err := w.pipe.Send(w.ctx)
	if err == nil {
		return nil
	}
	w.culprit = -1
	if failed >= 0 && failed < len(owners) {
		w.culprit = owners[failed]
	}
	return w.s.dbErr(w.ctx, err)
}

// loadPiped returns the row of key as the group left it: read in the
// first round trip, or, for a key that was not (an operation without its
// preparation), read now.
func (w *writeTx) loadPiped(key resource.Key) (*row, error) {
	if r, ok := w.rows[key]; ok {
		return r, nil
	}
	var r *row
	w.queue(w.s.q.load, []any{string(key.Kind), key.Mesh, key.Name}, func(scan func(...any) error) error {
		var err error
		r, err = scanRow(scanFunc(scan))
		return err
	})
	if err := w.send(); err != nil {
		return nil, fmt.Errorf("load %s: %w", key, err)
	}
	w.rows[key] = r
	return r, nil
}

// putPiped keeps r as the row of its key, for the operations after it and
// for the write at the end of the transaction.
func (w *writeTx) putPiped(r *row) {
	next := *r
	if !w.wrote[r.Key] {
		w.wrote[r.Key] = true
		w.written = append(w.written, r.Key)
	}
	w.rows[r.Key] = &next
}

// leaseOp is a lease put kept for the end of the transaction.
type leaseOp struct {
	req     int
	name    string
	value   []byte
	expires int64
}

// leasePiped keeps a lease put for the end of the transaction and queues
// a deletion after the puts before it; a create, whose outcome is whether
// the name existed, is sent at once, after the lease operations before
// it.
func (w *writeTx) leasePiped(t store.OpType, name string, value []byte, expires int64) (store.Result, error) {
	switch t {
	case store.OpPutLease:
		w.leaseOps = append(w.leaseOps, leaseOp{req: w.req, name: name, value: value, expires: expires})
		return store.Result{}, nil
	case store.OpDeleteLease:
		// A statement of its own (a deletion of an array of names may be
		// planned as a scan), after the puts before it.
		w.queueLeaseOps()
		w.queue(w.s.q.deleteLease, []any{name}, nil)
		return store.Result{}, nil
	}
	w.queueLeaseOps()
	created := false
	w.queue(w.s.pq.createLease, []any{name, value, expires}, func(func(...any) error) error {
		created = true
		return nil
	})
	if err := w.send(); err != nil {
		return store.Result{}, fmt.Errorf("create lease %q: %w", name, err)
	}
	if !created {
		return store.Result{Err: fmt.Errorf("%s %q: %w", t, name, store.ErrAlreadyExists)}, nil
	}
	return store.Result{}, nil
}

// queueLeaseOps queues the lease puts kept so far, a statement each, in
// order.
func (w *writeTx) queueLeaseOps() {
	req := w.req
	for _, l := range w.leaseOps {
		w.req = l.req
		w.queue(w.s.q.putLease, []any{l.name, l.value, l.expires}, nil)
	}
	w.req = req
	w.leaseOps = w.leaseOps[:0]
}

// fencedPiped is fenced, sent at once after the lease operations before
// it.
func (w *writeTx) fencedPiped(f *store.Fence) (bool, error) {
	w.queueLeaseOps()
	current := false
	w.queue(w.s.q.fence, []any{f.Lease, f.LeaseValue()}, func(func(...any) error) error {
		current = true
		return nil
	})
	if err := w.send(); err != nil {
		return false, fmt.Errorf("check fence %q: %w", f.Lease, err)
	}
	return current, nil
}

// writeArgs are the arguments of pipelineQueries.write: the last row of
// each key written, the records and terms appended, the last put of each
// lease kept, and meta when setMeta.
func (w *writeTx) writeArgs(setMeta bool) []any {
	n := len(w.written)
	kinds, meshes, names := make([]string, n), make([]string, n), make([]string, n)
	versions, revisions, deleted := make([]int64, n), make([]int64, n), make([]bool, n)
	labels, specs, statuses := make([]string, n), make([]string, n), make([]string, n)
	created, modified := make([]int64, n), make([]int64, n)
	for i, k := range w.written {
		r := w.rows[k]
		kinds[i], meshes[i], names[i] = string(k.Kind), k.Mesh, k.Name
		versions[i], revisions[i], deleted[i] = r.Version, r.Revision, r.Deleted
		labels[i], specs[i], statuses[i] = r.Labels, r.Spec, r.Status
		created[i], modified[i] = r.Created, r.Modified
	}
	n = len(w.recordRows) / 5
	streams, seqs, times, terms, data := make([]string, n), make([]int64, n), make([]int64, n), make([]string, n), make([][]byte, n)
	for i := range n {
		v := w.recordRows[5*i:]
		streams[i], seqs[i], times[i], terms[i], data[i] = v[0].(string), v[1].(int64), v[2].(int64), v[3].(string), v[4].([]byte)
	}
	n = len(w.termRows) / 3
	tStreams, tTerms, tSeqs := make([]string, n), make([]string, n), make([]int64, n)
	for i := range n {
		v := w.termRows[3*i:]
		tStreams[i], tTerms[i], tSeqs[i] = v[0].(string), v[1].(string), v[2].(int64)
	}
	// The last put of each lease is what is stored.
	last := map[string]int{}
	for i, l := range w.leaseOps {
		last[l.name] = i
	}
	var putNames []string
	var putValues [][]byte
	var putExpires []int64
	for i, l := range w.leaseOps {
		if last[l.name] == i {
			putNames, putValues, putExpires = append(putNames, l.name), append(putValues, l.value), append(putExpires, l.expires)
		}
	}
	return []any{kinds, meshes, names, versions, revisions, deleted, labels, specs, statuses, created, modified,
		streams, seqs, times, terms, data, tStreams, tTerms, tSeqs,
		putNames, putValues, putExpires, w.revision, w.records, setMeta}
}
