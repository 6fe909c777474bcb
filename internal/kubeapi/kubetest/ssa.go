package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	yaml "go.yaml.in/yaml/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Applier applies YAML streams as `kubectl apply --server-side` does:
// each object is sent whole as an apply patch (client-go's dynamic client,
// the kinds mapped to their collections through the API server's
// discovery), so the API server decides every default, validation and
// conflict.
type Applier struct {
	c      *Cluster
	dyn    *dynamic.DynamicClient
	mapper *restmapper.DeferredDiscoveryRESTMapper
	// Manager is the field manager of the applies.
	Manager string
}

// RESTConfig returns an administrator's client configuration.
func (c *Cluster) RESTConfig() *rest.Config {
	return &rest.Config{Host: c.Host, BearerToken: AdminToken, TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(c.Dir, "certs", "apiserver.crt")}}
}

// Applier returns an administrator's Applier.
func (c *Cluster) Applier() (*Applier, error) {
	cfg := c.RESTConfig()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{c: c, dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)), Manager: "meshnames-test"}, nil
}

// Objects splits a YAML stream into objects.
func Objects(stream []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(stream, []byte("\n---")) {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		obj, err := jsonable(m)
		if err != nil {
			return nil, err
		}
		// Through JSON, so that numbers are int64 as unstructured wants.
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// Apply applies obj, or only checks it when dryRun (dryRun=All: the API
// server runs admission and validation and stores nothing), and returns
// what the API server stored (or would store). A CRD is waited for until
// it is established, and the kinds are read again, so that objects of
// the new kind can follow in the same stream.
func (a *Applier) Apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		a.mapper.Reset()
		if mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return nil, fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
	var r dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == "namespace" {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		r = a.dyn.Resource(mapping.Resource).Namespace(ns)
	}
	opts := metav1.ApplyOptions{FieldManager: a.Manager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out, err := r.Apply(ctx, obj.GetName(), obj, opts)
	if err != nil {
		what := "apply"
		if dryRun {
			what = "server-side dry run of"
		}
		return nil, fmt.Errorf("%s %s %s: %w", what, gvk.Kind, obj.GetName(), err)
	}
	if gvk.Kind == "CustomResourceDefinition" && !dryRun {
		if err := a.c.waitEstablished(ctx, obj.GetName()); err != nil {
			return nil, err
		}
		a.mapper.Reset()
	}
	return out, nil
}

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as the
// service account ns/name with a token from the TokenRequest API, as a
// Pod running as it would, and returns its path.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, ns, name string) (string, error) {
	token, err := c.ServiceAccountToken(ctx, ns, name, "")
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.Dir, "sa-"+ns+"-"+name+".kubeconfig")
	return path, c.writeKubeconfig(path, token)
}

// ServiceAccountToken returns a token of the service account ns/name from
// the TokenRequest API, valid for an hour; with pod, bound to that Pod of
// ns (as the token kubelet mounts in a Pod is), so that it names the Pod
// and dies with it.
func (c *Cluster) ServiceAccountToken(ctx context.Context, ns, name, pod string) (string, error) {
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		return "", err
	}
	spec := map[string]any{"expirationSeconds": int64(3600)}
	if pod != "" {
		p, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("the Pod %s/%s to bind a token to: %w", ns, pod, err)
		}
		spec["boundObjectRef"] = map[string]any{"kind": "Pod", "apiVersion": "v1", "name": pod, "uid": string(p.GetUID())}
	}
	req := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
	sa := schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	out, err := dyn.Resource(sa).Namespace(ns).Create(ctx, req, metav1.CreateOptions{}, "token")
	if err != nil {
		return "", fmt.Errorf("a token of service account %s/%s: %w", ns, name, err)
	}
	token, _, _ := unstructured.NestedString(out.Object, "status", "token")
	if token == "" {
		return "", fmt.Errorf("a token of service account %s/%s: none in the answer", ns, name)
	}
	return token, nil
}
