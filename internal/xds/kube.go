package xds

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/meshnames/meshnames/internal/kubexds"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/token"
)

// This file is what env kubernetes adds: MeshServices made from Services
// take their endpoints from the Services' EndpointSlices, and a Pod's
// proxy connects as the Pod.

// ServiceEndpoints gives the endpoints of Kubernetes Services
// (kubexds.Slices).
type ServiceEndpoints interface {
	// Synced is closed once the endpoints are known.
	Synced() <-chan struct{}
	// Subscribe calls f with every Service whose endpoints change.
	Subscribe(f func(kubexds.ServiceName)) (cancel func())
	// Endpoints returns the endpoints of the Service port named port;
	// only Pod pod's when pod is set.
	Endpoints(svc kubexds.ServiceName, pod, port string) []kubexds.Endpoint
}

// PodIdentity reads Pods and reviews service-account tokens
// (kubexds.Pods).
type PodIdentity interface {
	Get(ctx context.Context, namespace, name string) (kubexds.Pod, error)
	Review(ctx context.Context, token string) (kubexds.Review, error)
}

// kubeService reports whether the MeshService o was made from a
// Kubernetes Service (kuma.io/managed-by: k8s-controller, with its
// namespace and name in labels), and when the builder has its endpoints:
// the Service, and for a headless Service's MeshService the Pod it stands
// for (its dataplaneRef, <pod>.<namespace>).
func (b *Builder) kubeService(o *resource.Object, spec *resource.MeshServiceSpec) (svc kubexds.ServiceName, pod string, ok bool) {
	if b.Slices == nil || o.Labels[resource.LabelManagedBy] != resource.ManagedByKubernetes {
		return svc, "", false
	}
	svc = kubexds.ServiceName{Namespace: o.Labels[resource.LabelNamespace], Name: o.Labels[resource.LabelServiceName]}
	if svc.Namespace == "" || svc.Name == "" {
		return svc, "", false
	}
	if o.Labels[resource.LabelHeadless] == "true" {
		ref := spec.Selector.DataplaneRef
		if ref == nil {
			return svc, "", false
		}
		pod, ok = strings.CutSuffix(ref.Name, "."+svc.Namespace)
		if !ok || pod == "" {
			return svc, "", false
		}
	}
	return svc, pod, true
}

// sliceEndpoints returns the endpoints of a Kubernetes Service's ports,
// by service port: each MeshService port is the Service port of the same
// name, whose EndpointSlice port carries the target port.
func (b *Builder) sliceEndpoints(svc kubexds.ServiceName, pod string, ports []resource.Port) map[int][]Endpoint {
	out := map[int][]Endpoint{}
	for _, p := range ports {
		for _, e := range b.Slices.Endpoints(svc, pod, p.Name) {
			out[p.Port] = append(out[p.Port], Endpoint{Addr: e.Addr, Zone: b.zone, Draining: e.Draining})
		}
	}
	return out
}

// trackKube records that the MeshService k takes the endpoints of
// Service svc (zero: of none).
func (st *meshState) trackKube(k resource.Key, svc kubexds.ServiceName) {
	if old, ok := st.kubeOf[k]; ok {
		if old == svc {
			return
		}
		delete(st.kube[old], k)
		if len(st.kube[old]) == 0 {
			delete(st.kube, old)
		}
		delete(st.kubeOf, k)
	}
	if svc == (kubexds.ServiceName{}) {
		return
	}
	st.kubeOf[k] = svc
	if st.kube[svc] == nil {
		st.kube[svc] = set[resource.Key]{}
	}
	st.kube[svc].add(k)
}

// kubeKeys returns the MeshServices of the active meshes that take the
// endpoints of the Services names (builder goroutine).
func (b *Builder) kubeKeys(names []kubexds.ServiceName) []resource.Key {
	var keys []resource.Key
	for _, n := range names {
		for _, st := range b.states {
			for k := range st.kube[n] {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// meshnamesToken reports whether raw claims to be a meshnames token
// (issuer meshnames), read without verifying it: it only picks the check
// that verifies it. What is not a JWT counts as one, so that it is
// refused as a malformed meshnames token.
func meshnamesToken(raw string) bool {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 || len(parts[1]) > token.MaxTokenBytes {
		return true
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return true
	}
	var c struct {
		Issuer *string `json:"iss"`
	}
	if json.Unmarshal(b, &c) != nil || c.Issuer == nil {
		return true
	}
	return *c.Issuer == token.Issuer
}

// checkPod authenticates the proxy of the Pod named by node id
// <pod>.<namespace> (id). With saToken, the token must be the Pod's
// service account's, as the API server reviews it, and, when it is bound
// to a Pod, bound to this one; with tokenMesh, a dataplane token for
// <pod>.<namespace> was verified, and the Pod must be of that mesh;
// with neither, the stream came tokenless from loopback.
func (a *Authenticator) checkPod(ctx context.Context, id, saToken, tokenMesh string) (Proxy, *Refusal) {
	// ParseNodeID accepted id: split at its last dot, it is a Pod name (a
	// DNS-1123 subdomain) and a namespace (a DNS-1123 label).
	i := strings.LastIndexByte(id, '.')
	name, ns := id[:i], id[i+1:]
	pod, err := a.Pods.Get(ctx, ns, name)
	switch {
	case errors.Is(err, kubexds.ErrNoPod):
		return Proxy{}, refuse(codes.PermissionDenied, "unknown_pod", "no Pod %s/%s exists for node %q (<pod>.<namespace>)", ns, name, id)
	case err != nil:
		return Proxy{}, refuse(codes.Unavailable, "kubernetes_unavailable", "cannot read Pod %s/%s: %s", ns, name, err.Error())
	}
	if tokenMesh != "" && pod.Mesh != tokenMesh {
		return Proxy{}, refuse(codes.PermissionDenied, "other_mesh", "the dataplane token is for mesh %s, and Pod %s/%s is in mesh %s", tokenMesh, ns, name, pod.Mesh)
	}
	if saToken != "" {
		r, err := a.Pods.Review(ctx, saToken)
		if err != nil {
			return Proxy{}, refuse(codes.Unavailable, "kubernetes_unavailable", "cannot review the service-account token: %s", err.Error())
		}
		if !r.Authenticated {
			return Proxy{}, refuse(codes.Unauthenticated, "not_authenticated", "the Kubernetes API server does not accept the token: %s", r.Error)
		}
		if want := kubexds.ServiceAccountUser(ns, pod.ServiceAccount); r.User != want {
			return Proxy{}, refuse(codes.PermissionDenied, "other_service_account",
				"the token is %s's, and Pod %s/%s runs as service account %s (%s)", r.User, ns, name, pod.ServiceAccount, want)
		}
		if r.PodName != "" && (r.PodName != name || (r.PodUID != "" && r.PodUID != pod.UID)) {
			return Proxy{}, refuse(codes.PermissionDenied, "other_pod", "the token is bound to Pod %s/%s (uid %s), not to Pod %s/%s (uid %s)", ns, r.PodName, r.PodUID, ns, name, pod.UID)
		}
	}
	if a.MeshExists != nil && !a.MeshExists(pod.Mesh) {
		return Proxy{}, refuse(codes.PermissionDenied, "unknown_mesh", "Pod %s/%s is in mesh %s, which does not exist", ns, name, pod.Mesh)
	}
	return Proxy{Mesh: pod.Mesh, Name: id, Pod: true}, nil
}

// MeshExists reports whether the mesh exists.
func (b *Builder) MeshExists(mesh string) bool {
	_, ok := b.cache.Peek(resource.Key{Kind: resource.Mesh, Name: mesh})
	return ok
}
