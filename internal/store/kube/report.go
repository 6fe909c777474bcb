package kube

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshnames/meshnames/internal/crd"
	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// report is one status to write: the Valid=False condition of an invalid
// custom resource, or its removal from one that became valid.
type report struct {
	ref     crRef
	version int64
	message string               // "" to remove the condition
	conds   []resource.Condition // the conditions to keep
}

// ReportInvalid writes, while ctx lasts, the condition Valid=False with the
// reasons on each custom resource the store does not use because it is
// invalid (`kubectl get -o yaml` shows why), and removes the condition
// once the object is valid again. A leader runs it: its writes are fenced
// by ctx's fence, like the controllers'.
func (s *Store) ReportInvalid(ctx context.Context) error {
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		s.mu.Lock()
		var todo []report
		for ref, d := range s.invalid {
			if msg := d.errs.Error(); msg != d.reported {
				todo = append(todo, report{ref: ref, version: d.version, message: msg})
			}
		}
		for _, r := range s.stale {
			todo = append(todo, r)
		}
		ch := s.advanced
		s.mu.Unlock()
		slices.SortFunc(todo, func(a, b report) int { return strings.Compare(a.ref.String(), b.ref.String()) })
		if len(todo) > 0 {
			if f, ok := store.FenceFrom(ctx); ok {
				if _, err := s.checkFence(ctx, f); err != nil {
					if errors.Is(err, store.ErrFenced) || ctx.Err() != nil {
						return nil
					}
					retry.Reset(5 * time.Second)
					todo = nil
				}
			}
		}
		failed := false
		for _, r := range todo {
			if err := s.writeReport(ctx, r); err != nil && ctx.Err() == nil {
				failed = true
				if !errors.Is(err, kubeapi.ErrConflict) && !errors.Is(err, kubeapi.ErrNotFound) {
					s.o.Log.Warn("kube store: cannot report an invalid object", "object", r.ref.String(), "err", err)
				}
			}
		}
		if failed {
			retry.Reset(5 * time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		case <-retry.C:
		}
	}
}

// writeReport writes one report, conditionally on the version it read.
func (s *Store) writeReport(ctx context.Context, r report) error {
	c, _ := crd.For(r.ref.kind)
	conds := r.conds
	if r.message != "" {
		conds = []resource.Condition{{Type: ConditionValid, Status: resource.ConditionFalse, Reason: ReasonInvalid,
			Message: "meshnames does not use this object: " + r.message}}
	}
	var value any = conds
	if len(conds) == 0 {
		value = nil
	}
	patch := map[string]any{
		"metadata": map[string]any{"resourceVersion": strconv.FormatInt(r.version, 10)},
		"status":   map[string]any{"conditions": value},
	}
	return s.c.Patch(ctx, c.Resource(), r.ref.namespace, r.ref.name, "status", kubeapi.MergePatch, patch, nil)
}

// staleReport returns the report that removes the Valid=False condition
// from a valid object's status, given the object's stored JSON.
func staleReport(d decoded, data []byte) report {
	var doc struct {
		Status struct {
			Conditions []resource.Condition `json:"conditions"`
		} `json:"status"`
	}
	_ = json.Unmarshal(data, &doc)
	keep := slices.DeleteFunc(doc.Status.Conditions, func(c resource.Condition) bool { return c.Type == ConditionValid })
	return report{ref: d.ref, version: d.version, conds: keep}
}
