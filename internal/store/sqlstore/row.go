package sqlstore

import (
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// row is one row of resources. Tombstones (deleted) keep only the key,
// version, revision and times; their labels, spec and status are empty.
type row struct {
	key               resource.Key
	version, revision int64
	deleted           bool
	labels            string // JSON object
	spec              string // JSON
	status            string // JSON, or "" when there is none
	created, modified int64  // Unix nanoseconds
}

type scanner interface {
	Scan(dest ...any) error
}

// scanRow reads the columns of the columns constant.
func scanRow(sc scanner) (*row, error) {
	var r row
	var kind string
	err := sc.Scan(&kind, &r.key.Mesh, &r.key.Name, &r.version, &r.revision, &r.deleted,
		&r.labels, &r.spec, &r.status, &r.created, &r.modified)
	if err != nil {
		return nil, err
	}
	r.key.Kind = resource.Kind(kind)
	return &r, nil
}

// size is what counts against store.MaxObjectBytes.
func (r *row) size() int { return len(r.labels) + len(r.spec) + len(r.status) }

// object decodes a live row into an object the caller owns.
func (r *row) object() (*resource.Object, error) {
	return backend.Decode(r.key, r.version, r.revision, r.created, r.modified, r.labels, r.spec, r.status)
}
