package sqlstore

import (
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// row is one row of resources. Tombstones (deleted) keep only the key,
// version, revision and times; their labels, spec and status are empty.
type row = backend.Row

type scanner interface {
	Scan(dest ...any) error
}

// scanRow reads the columns of the columns constant.
func scanRow(sc scanner) (*row, error) {
	var r row
	var kind string
	err := sc.Scan(&kind, &r.Key.Mesh, &r.Key.Name, &r.Version, &r.Revision, &r.Deleted,
		&r.Labels, &r.Spec, &r.Status, &r.Created, &r.Modified)
	if err != nil {
		return nil, err
	}
	r.Key.Kind = resource.Kind(kind)
	return &r, nil
}
