package server

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/kubeservices"
	"github.com/meshnames/meshnames/internal/store"
	kubestore "github.com/meshnames/meshnames/internal/store/kube"
)

// kubeControllers returns the leader's work that only env kubernetes has:
// MeshServices from Services, and the conditions of invalid custom
// resources.
func (s *Server) kubeControllers(st store.Store, c *cache.Cache, reg prometheus.Registerer) []func(context.Context) error {
	ks, ok := st.(*kubestore.Store)
	if !ok {
		return nil
	}
	services := kubeservices.New(kubeservices.Options{
		Client: ks.Client(), Store: st, Cache: c, ExportDefault: s.cfg.Services.ExportDefault,
		SystemNamespace: ks.SystemNamespace(), Log: s.log.With("component", "kubeservices"), Registerer: reg,
	})
	return []func(context.Context) error{services.Run, ks.ReportInvalid}
}
