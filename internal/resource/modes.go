package resource

// Modes a control plane runs in (ARCHITECTURE.md section 7).
const (
	ModeStandalone = "standalone"
	ModeZone       = "zone"
	ModeGlobal     = "global"
)

// SystemLabelKeys are the labels the control plane sets on the kinds
// whose Descriptor says SystemLabels (internal/admission); kuma.io/mesh
// only on the mesh-scoped ones.
var SystemLabelKeys = []string{LabelOrigin, LabelZone, LabelDisplayName, LabelMesh}

// uncountedLabelKeys are the labels that do not count against MaxLabels:
// the system labels, kuma.io/env, which a zone sets on the services it
// sends to the global when they carry none (and the Kubernetes ingester
// on every service), and k8s.kuma.io/namespace, which the Kubernetes
// store computes. A resource with as many labels as a user may give
// stays valid once the control plane has added these, on every control
// plane it reaches.
var uncountedLabelKeys = append(SystemLabelKeys[:len(SystemLabelKeys):len(SystemLabelKeys)], LabelEnv, LabelNamespace)

func countUserLabels(labels map[string]string) int {
	n := len(labels)
	for _, k := range uncountedLabelKeys {
		if _, ok := labels[k]; ok {
			n--
		}
	}
	return n
}
