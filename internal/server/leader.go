package server

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/leader"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	kubestore "github.com/meshnames/meshnames/internal/store/kube"
	"github.com/meshnames/meshnames/internal/store/postgres"
)

// newElector picks the election of the store: the embedded store's single
// process always leads; instances sharing PostgreSQL, or one Kubernetes
// cluster, hold a lease.
func (s *Server) newElector(reg prometheus.Registerer, st store.Store) leader.Elector {
	id := leader.NewHolderID(s.cfg.API.Addr)
	var campaign leader.Campaign
	switch st := st.(type) {
	case *postgres.Store:
		campaign = st.Election(leader.LeaseName, id)
	case *kubestore.Store:
		campaign = st.Election(leader.LeaseName, id)
	default:
		return &leader.Local{ID: id}
	}
	return leader.NewLease(leader.LeaseOptions{
		Campaign: campaign, Log: s.log.With("component", "leader"), Registerer: reg,
		LeaseDuration: s.cfg.Leader.LeaseDuration.D(),
		RenewInterval: s.cfg.Leader.RenewInterval.D(),
		RetryInterval: s.cfg.Leader.RetryInterval.D(),
	})
}

// catchUp waits until the cache reflects every write committed before it
// was called. A new leader calls it before starting the controllers, which
// rebuild their state from the cache: the previous leader's last writes
// (VIPs it handed out a moment before it was cut off) must be in it. The
// revision of a List of meshes, a small kind, is the store's.
func catchUp(ctx context.Context, st store.Store, c *cache.Cache) error {
	_, rev, err := st.List(ctx, resource.Mesh)
	if err != nil {
		return err
	}
	return c.WaitFor(ctx, rev)
}

// leaderStatus answers GET /_leader: the lease as the store holds it, and
// whether this instance leads.
func (s *Server) leaderStatus(ctx context.Context, st store.Store) (api.LeaderStatus, error) {
	ls := api.LeaderStatus{Self: s.elector.Self(), Leading: s.elector.Leading()}
	if _, local := s.elector.(*leader.Local); local {
		ls.Election = "local"
		if ls.Leading {
			ls.Holder = ls.Self
		}
		return ls, nil
	}
	ls.Election = "lease"
	if _, kube := st.(*kubestore.Store); kube {
		ls.Election = "kubernetes"
	}
	leases, err := st.Leases(ctx, leader.LeaseName)
	if err != nil {
		return ls, err
	}
	for _, l := range leases {
		if l.Name != leader.LeaseName {
			continue
		}
		f, err := store.ParseFence(l)
		if err != nil {
			return ls, fmt.Errorf("the leader lease: %w", err)
		}
		ls.Holder, ls.Term, ls.ExpiresAt = f.Holder, f.Term, l.ExpiresAt
		return ls, nil
	}
	return ls, nil // no lease yet: no instance has led
}
