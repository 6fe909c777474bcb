package hostnames

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
)

// defaultGenerator is one row of seed 001's table.
type defaultGenerator struct {
	name     string
	kind     resource.Kind
	labels   map[string]string
	template string
}

// Seed 001: suffix .{svc|extsvc|mzsvc}.{optional zone}.mesh.local.
var (
	// Created by a zone (standalone or federated) for what it owns.
	zoneDefaults = []defaultGenerator{
		// seed 001: "{{ .Name }}.svc.mesh.local" - the name is always a
		// DNS label; a MeshService synthesised from a kuma.io/service tag
		// such as frontend_default_svc_80 is named by its compliant form.
		{"local-universal-mesh-service", resource.MeshService, map[string]string{resource.LabelOrigin: resource.OriginZone},
			"{{ .Name }}.svc.mesh.local"},
		{"local-mesh-external-service", resource.MeshExternalService, map[string]string{resource.LabelOrigin: resource.OriginZone},
			"{{ .DisplayName }}.extsvc.mesh.local"},
	}
	// Created by a Kubernetes zone for the MeshServices it makes from
	// Services (seed 001's "local Kubernetes MeshService" generators: the
	// Service's name and namespace; a headless Service's Pods by their
	// StatefulSet name). It names no other MeshService: seed 001 leaves
	// MeshServices applied by hand on Kubernetes unnamed.
	kubeZoneDefaults = []defaultGenerator{
		{"local-kube-mesh-service", resource.MeshService,
			map[string]string{resource.LabelOrigin: resource.OriginZone, resource.LabelEnv: resource.EnvKubernetes, resource.LabelHeadless: "false"},
			`{{ label "k8s.kuma.io/service-name" }}.{{ .Namespace }}.svc.mesh.local`},
		{"local-headless-kube-mesh-service", resource.MeshService,
			map[string]string{resource.LabelOrigin: resource.OriginZone, resource.LabelEnv: resource.EnvKubernetes, resource.LabelHeadless: "true"},
			`{{ label "statefulset.kubernetes.io/pod-name" }}.{{ label "k8s.kuma.io/service-name" }}.{{ .Namespace }}.svc.mesh.local`},
		{"local-mesh-external-service", resource.MeshExternalService, map[string]string{resource.LabelOrigin: resource.OriginZone},
			"{{ .DisplayName }}.extsvc.mesh.local"},
	}
	// A standalone zone has no global to create MeshMultiZoneServices, so it
	// may create them itself, and names them as global would (seed 001:
	// "we could just use the same hostname generator").
	standaloneDefaults = []defaultGenerator{
		{"local-mesh-multi-zone-service", resource.MeshMultiZoneService, map[string]string{resource.LabelOrigin: resource.OriginZone},
			"{{ .DisplayName }}.mzsvc.mesh.local"},
	}
	// Created by global and synced to every zone, for what zones receive
	// from global (kuma.io/origin: global in the zone).
	globalDefaults = []defaultGenerator{
		{"synced-universal-mesh-service", resource.MeshService,
			map[string]string{resource.LabelOrigin: resource.OriginGlobal, resource.LabelEnv: resource.EnvUniversal},
			"{{ .DisplayName }}.svc.{{ .Zone }}.mesh.local"},
		{"synced-kube-mesh-service", resource.MeshService,
			map[string]string{resource.LabelOrigin: resource.OriginGlobal, resource.LabelEnv: resource.EnvKubernetes, resource.LabelHeadless: "false"},
			`{{ label "k8s.kuma.io/service-name" }}.{{ .Namespace }}.svc.{{ .Zone }}.mesh.local`},
		{"synced-headless-kube-mesh-service", resource.MeshService,
			map[string]string{resource.LabelOrigin: resource.OriginGlobal, resource.LabelEnv: resource.EnvKubernetes, resource.LabelHeadless: "true"},
			`{{ label "statefulset.kubernetes.io/pod-name" }}.{{ label "k8s.kuma.io/service-name" }}.{{ .Namespace }}.svc.{{ .Zone }}.mesh.local`},
		{"synced-mesh-external-service", resource.MeshExternalService, map[string]string{resource.LabelOrigin: resource.OriginGlobal},
			"{{ .DisplayName }}.extsvc.mesh.local"},
		{"synced-mesh-multi-zone-service", resource.MeshMultiZoneService, map[string]string{},
			"{{ .DisplayName }}.mzsvc.mesh.local"},
	}
)

// Defaults returns the default HostnameGenerators of a universal control
// plane in mode and zone (seed 001), ready to be stored: defaulted,
// validated and labelled as a user's would be.
func Defaults(mode, zone string) []*resource.Object {
	return DefaultsFor(mode, zone, resource.EnvUniversal)
}

// DefaultsFor returns the default HostnameGenerators of a control plane in
// mode and zone running in env (universal or kubernetes).
func DefaultsFor(mode, zone, env string) []*resource.Object {
	local := zoneDefaults
	if env == resource.EnvKubernetes {
		local = kubeZoneDefaults
	}
	var rows []defaultGenerator
	switch mode {
	case resource.ModeGlobal:
		rows = globalDefaults
	case resource.ModeZone:
		rows = local
	default:
		rows = append(append(rows, local...), standaloneDefaults...)
	}
	out := make([]*resource.Object, 0, len(rows))
	for _, r := range rows {
		spec := &resource.HostnameGeneratorSpec{Template: r.template}
		sel := &resource.LabelSelector{MatchLabels: r.labels}
		switch r.kind {
		case resource.MeshService:
			spec.Selector.MeshService = sel
		case resource.MeshExternalService:
			spec.Selector.MeshExternalService = sel
		case resource.MeshMultiZoneService:
			spec.Selector.MeshMultiZoneService = sel
		}
		obj := &resource.Object{Kind: resource.HostnameGenerator, Name: r.name, Spec: spec}
		obj.Spec.Default()
		if errs := admission.New(admission.Options{Mode: mode, Zone: zone}).Admit(obj, admission.Writer{Source: admission.System}); len(errs) > 0 {
			panic(fmt.Sprintf("hostnames: default generator %s is invalid: %v", r.name, errs))
		}
		out = append(out, obj)
	}
	return out
}

// formerTemplates are templates earlier versions gave default generators.
// A stored default that still has one, unchanged by any operator, is
// brought to today's template at start.
var formerTemplates = map[string]string{
	"local-universal-mesh-service": "{{ .DisplayName }}.svc.mesh.local",
}

// EnsureDefaults creates the default generators that do not exist. It never
// overwrites one an operator changed; one that still has the template an
// earlier version created it with gets today's.
func EnsureDefaults(ctx context.Context, st store.Store, mode, zone string, log *slog.Logger) error {
	return EnsureDefaultsFor(ctx, st, mode, zone, resource.EnvUniversal, log)
}

// EnsureDefaultsFor is EnsureDefaults for a control plane running in env.
func EnsureDefaultsFor(ctx context.Context, st store.Store, mode, zone, env string, log *slog.Logger) error {
	for _, g := range DefaultsFor(mode, zone, env) {
		cur, err := st.Get(ctx, g.Key())
		if err == nil {
			if err := upgrade(ctx, st, cur, g, log); err != nil {
				return err
			}
			continue
		}
		if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("default HostnameGenerator %s: %w", g.Name, err)
		}
		_, err = store.Create(ctx, st, g)
		switch {
		case err == nil:
			log.Info("created a default HostnameGenerator", "name", g.Name, "template", g.Spec.(*resource.HostnameGeneratorSpec).Template)
		case errors.Is(err, store.ErrAlreadyExists):
			// another instance created it
		default:
			return fmt.Errorf("default HostnameGenerator %s: %w", g.Name, err)
		}
	}
	return nil
}

// upgrade gives cur, the stored default generator want, want's template
// when cur is exactly what an earlier version created.
func upgrade(ctx context.Context, st store.Store, cur, want *resource.Object, log *slog.Logger) error {
	former, ok := formerTemplates[want.Name]
	if !ok {
		return nil
	}
	old := want.Clone()
	old.Spec.(*resource.HostnameGeneratorSpec).Template = former
	if !admission.SameIntent(cur, old) {
		return nil // as created today, or changed by an operator
	}
	next := want.Clone()
	next.Version = cur.Version
	_, err := store.Update(ctx, st, next)
	switch {
	case err == nil:
		log.Info("updated a default HostnameGenerator to today's template", "name", want.Name, "from", former, "template", want.Spec.(*resource.HostnameGeneratorSpec).Template)
	case errors.Is(err, store.ErrConflict):
		// another instance did it, or an operator changed it meanwhile
	default:
		return fmt.Errorf("default HostnameGenerator %s: %w", want.Name, err)
	}
	return nil
}
