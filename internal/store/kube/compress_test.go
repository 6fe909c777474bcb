package kube

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// kubeService is the JSON of the i-th MeshService made from a Service, as
// the store encodes it once named.
func kubeService(i int) []byte {
	name, ns := fmt.Sprintf("orders-%d", i), fmt.Sprintf("team-%d", i%37)
	r := strings.NewReplacer("backend", name, `"default"`, `"`+ns+`"`, ".default", "."+ns, "_default_", "_"+ns+"_", "-default-", "-"+ns+"-",
		`"mesh":"`+ns+`"`, `"mesh":"default"`, "10.96.0.1", fmt.Sprintf("10.96.%d.%d", i/250, i%250+1))
	return []byte(r.Replace(dictSample))
}

// The dictionary is what makes the store's copy small: a typical
// MeshService compresses to a fraction of its JSON and reads back exactly.
func TestCompress_TypicalService(t *testing.T) {
	for i := range 50 {
		plain := kubeService(i * 997)
		data := compressObject(plain)
		if len(data) > 200 {
			t.Errorf("%d bytes of JSON compressed into %d, want at most 200", len(plain), len(data))
		}
		got, err := (&entry{data: data}).json()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, plain) {
			t.Errorf("read back %s, want %s", got, plain)
		}
	}
}

// Damaged bytes give an error, not a panic or a wrong object.
func TestCompress_DamagedIsAnError(t *testing.T) {
	data := compressObject(kubeService(1))
	for _, bad := range [][]byte{data[:len(data)/2], append([]byte{0xff, 0xff, 0xff, 0xff, 0x7f}, data...)} {
		if _, err := (&entry{data: bad}).object(); err == nil {
			t.Errorf("decoding %x: no error", bad)
		}
	}
}
