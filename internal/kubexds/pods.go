package kubexds

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/meshnames/meshnames/internal/kubeapi"
	"github.com/meshnames/meshnames/internal/resource"
)

// ErrNoPod is returned by Pods.Get for a Pod that does not exist.
var ErrNoPod = errors.New("no such Pod")

// Pod is what the xDS control plane reads of a Pod whose proxy connects.
type Pod struct {
	Namespace, Name, UID string
	// ServiceAccount is spec.serviceAccountName ("default" when empty).
	ServiceAccount string
	// Mesh is the Pod's mesh: its kuma.io/mesh label, else that
	// annotation, else its namespace's label, else the namespace's
	// annotation, else "default".
	Mesh string
}

// Review is the API server's answer to a TokenReview.
type Review struct {
	Authenticated bool
	// Error is why the token was not authenticated, as the API server
	// says.
	Error string
	// User is the token's user name: system:serviceaccount:<ns>:<name>
	// for a service account's.
	User string
	// PodName and PodUID name the Pod a token is bound to (a projected
	// service-account token), from the user's extra fields; empty for a
	// token bound to no Pod.
	PodName, PodUID string
}

// Pods reads Pods and reviews tokens.
type Pods struct {
	client *kubeapi.Client
}

// NewPods returns a reader over c; it does no I/O.
func NewPods(c *kubeapi.Client) *Pods { return &Pods{client: c} }

// TokenReviews is the collection a TokenReview is created in.
var TokenReviews = kubeapi.Resource{Group: "authentication.k8s.io", Version: "v1", Resource: "tokenreviews"}

// Extra fields of a bound service-account token's user.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

type meta struct {
	Metadata kubeapi.ObjectMeta `json:"metadata"`
}

// Get reads Pod namespace/name and its mesh; ErrNoPod when it does not
// exist.
func (p *Pods) Get(ctx context.Context, namespace, name string) (Pod, error) {
	var o struct {
		Metadata kubeapi.ObjectMeta `json:"metadata"`
		Spec     struct {
			ServiceAccountName string `json:"serviceAccountName"`
		} `json:"spec"`
	}
	if err := p.client.Get(ctx, kubeapi.Pods, namespace, name, &o); err != nil {
		if errors.Is(err, kubeapi.ErrNotFound) {
			return Pod{}, fmt.Errorf("%w: %s/%s", ErrNoPod, namespace, name)
		}
		return Pod{}, fmt.Errorf("read Pod %s/%s: %w", namespace, name, err)
	}
	out := Pod{Namespace: namespace, Name: name, UID: o.Metadata.UID, ServiceAccount: cmp.Or(o.Spec.ServiceAccountName, "default")}
	out.Mesh = cmp.Or(o.Metadata.Labels[resource.LabelMesh], o.Metadata.Annotations[resource.LabelMesh])
	if out.Mesh == "" {
		var ns meta
		if err := p.client.Get(ctx, kubeapi.Namespaces, "", namespace, &ns); err != nil && !errors.Is(err, kubeapi.ErrNotFound) {
			return Pod{}, fmt.Errorf("read namespace %s: %w", namespace, err)
		}
		out.Mesh = cmp.Or(ns.Metadata.Labels[resource.LabelMesh], ns.Metadata.Annotations[resource.LabelMesh], "default")
	}
	return out, nil
}

// Review asks the API server whose token is (a TokenReview, for the API
// server's own audiences).
func (p *Pods) Review(ctx context.Context, token string) (Review, error) {
	body := map[string]any{
		"apiVersion": TokenReviews.APIVersion(), "kind": "TokenReview",
		"spec": map[string]any{"token": token},
	}
	var out struct {
		Status struct {
			Authenticated bool   `json:"authenticated"`
			Error         string `json:"error"`
			User          struct {
				Username string              `json:"username"`
				Extra    map[string][]string `json:"extra"`
			} `json:"user"`
		} `json:"status"`
	}
	if err := p.client.Create(ctx, TokenReviews, "", body, &out); err != nil {
		return Review{}, fmt.Errorf("TokenReview: %w", err)
	}
	st := out.Status
	r := Review{Authenticated: st.Authenticated, Error: st.Error, User: st.User.Username}
	if v := st.User.Extra[extraPodName]; len(v) == 1 {
		r.PodName = v[0]
	}
	if v := st.User.Extra[extraPodUID]; len(v) == 1 {
		r.PodUID = v[0]
	}
	return r, nil
}

// ServiceAccountUser is the user name of service account name of
// namespace ns.
func ServiceAccountUser(ns, name string) string {
	return "system:serviceaccount:" + ns + ":" + name
}
