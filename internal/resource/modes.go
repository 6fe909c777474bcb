package resource

// Modes a control plane runs in (ARCHITECTURE.md section 7).
const (
	ModeStandalone = "standalone"
	ModeZone       = "zone"
	ModeGlobal     = "global"
)

// SystemLabelKeys are the labels the control plane sets on every
// mesh-scoped resource and HostnameGenerator (internal/admission).
var SystemLabelKeys = []string{LabelOrigin, LabelZone, LabelDisplayName, LabelMesh}

func countUserLabels(labels map[string]string) int {
	n := len(labels)
	for _, k := range SystemLabelKeys {
		if _, ok := labels[k]; ok {
			n--
		}
	}
	return n
}
