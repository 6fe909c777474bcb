package kubeapi

import (
	"strconv"
	"time"
)

// ObjectMeta is the part of an object's metadata meshnames reads.
type ObjectMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	CreationTimestamp *time.Time        `json:"creationTimestamp,omitempty"`
	DeletionTimestamp *time.Time        `json:"deletionTimestamp,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	OwnerReferences   []OwnerReference  `json:"ownerReferences,omitempty"`
	ManagedFields     []ManagedField    `json:"managedFields,omitempty"`
}

// OwnerReference names the object an object belongs to.
type OwnerReference struct {
	APIVersion         string `json:"apiVersion"`
	Kind               string `json:"kind"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	Controller         *bool  `json:"controller,omitempty"`
	BlockOwnerDeletion *bool  `json:"blockOwnerDeletion,omitempty"`
}

// ManagedField is one entry of metadata.managedFields, read for the time
// of the last write.
type ManagedField struct {
	Manager   string     `json:"manager,omitempty"`
	Operation string     `json:"operation,omitempty"`
	Time      *time.Time `json:"time,omitempty"`
}

// LastWrite returns the time of the object's last write the API server
// recorded (second precision), or its creation time.
func (m *ObjectMeta) LastWrite() time.Time {
	var t time.Time
	if m.CreationTimestamp != nil {
		t = *m.CreationTimestamp
	}
	for _, f := range m.ManagedFields {
		if f.Time != nil && f.Time.After(t) {
			t = *f.Time
		}
	}
	return t
}

// Revision parses the resourceVersion. The API calls it opaque; every API
// server backed by etcd writes etcd's revision, a positive integer that
// grows with every write to the cluster, and meshnames relies on that.
func Revision(rv string) (int64, bool) {
	n, err := strconv.ParseInt(rv, 10, 64)
	return n, err == nil && n > 0
}
