package server

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/cache"
	"github.com/meshnames/meshnames/internal/config"
	"github.com/meshnames/meshnames/internal/kubemcs"
	"github.com/meshnames/meshnames/internal/kubeservices"
	"github.com/meshnames/meshnames/internal/reconcile"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	kubestore "github.com/meshnames/meshnames/internal/store/kube"
	"github.com/meshnames/meshnames/internal/vips"
)

// kubeControllers returns the leader's work that only env kubernetes has:
// MeshServices from Services, the conditions of invalid custom resources,
// and the MCS API's ServiceExports and ServiceImports.
func (s *Server) kubeControllers(st store.Store, c *cache.Cache, cores []reconcile.Core, kick func(), reg prometheus.Registerer, gc *loadGC) []func(context.Context) error {
	ks, ok := st.(*kubestore.Store)
	if !ok {
		return nil
	}
	// The Service controller hands the VIPs of its MeshServices to the VIP
	// controller, which writes them, and admits what it writes as the
	// control plane's own.
	var addresses *vips.Core
	for _, core := range cores {
		if v, ok := core.(*vips.Core); ok {
			addresses = v
		}
	}
	adm := admission.New(admission.Options{Mode: s.cfg.Mode, Zone: s.cfg.Zone, DisplayName: ks.DisplayName})
	services := kubeservices.New(kubeservices.Options{
		Client: ks.Client(), Store: st, Cache: c, Admission: adm, VIPs: addresses, Kick: kick, ExportDefault: s.cfg.Services.ExportDefault,
		SystemNamespace: ks.SystemNamespace(), Log: s.log.With("component", "kubeservices"), Registerer: reg,
		FirstPass: gc.kubeFirstPass,
	})
	run := []func(context.Context) error{services.Run, ks.ReportInvalid}
	if s.cfg.Mode != config.ModeGlobal {
		// A zone's ServiceExports and ServiceImports: a global has no
		// Services of its own to export.
		run = append(run, kubemcs.New(kubemcs.Options{
			Client: ks.Client(), Store: st, Cache: c, Mode: s.cfg.Mode, Zone: s.cfg.Zone,
			SkipGenerators: s.cfg.Defaults.SkipHostnameGenerators, Log: s.log.With("component", "kubemcs"),
		}).Run)
	}
	return run
}

// displayName returns the display names of the Kubernetes store's
// resources, for admission: nil for the other stores, whose names are
// their display names.
func displayName(st store.Store) func(resource.Key) string {
	if ks, ok := st.(*kubestore.Store); ok {
		return ks.DisplayName
	}
	return nil
}
