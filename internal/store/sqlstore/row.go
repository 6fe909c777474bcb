package sqlstore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/meshnames/meshnames/internal/resource"
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
	o := &resource.Object{
		Kind:             r.key.Kind,
		Mesh:             r.key.Mesh,
		Name:             r.key.Name,
		Version:          r.version,
		Revision:         r.revision,
		CreationTime:     time.Unix(0, r.created).UTC(),
		ModificationTime: time.Unix(0, r.modified).UTC(),
	}
	if r.labels != "" {
		var err error
		if o.Labels, err = resource.UnmarshalLabels([]byte(r.labels), o.Name); err != nil {
			return nil, fmt.Errorf("decode %s labels: %w", r.key, err)
		}
	}
	var err error
	if o.Spec, err = resource.UnmarshalSpec(r.key.Kind, []byte(r.spec)); err != nil {
		return nil, fmt.Errorf("decode %s: %w", r.key, err)
	}
	if o.Status, err = resource.UnmarshalStatus(r.key.Kind, []byte(r.status)); err != nil {
		return nil, fmt.Errorf("decode %s: %w", r.key, err)
	}
	return o, nil
}

func encodeLabels(labels map[string]string) (string, error) {
	if len(labels) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(labels)
	if err != nil {
		return "", fmt.Errorf("encode labels: %w", err)
	}
	return string(b), nil
}

func encodeSpec(s resource.Spec) (string, error) {
	if s == nil {
		return "{}", nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encode spec: %w", err)
	}
	return string(b), nil
}

func encodeStatus(s resource.Status) (string, error) {
	if s == nil {
		return "", nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encode status: %w", err)
	}
	return string(b), nil
}
