package audit

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/resource"
)

// TestAppendEntry_IsWhatJSONMarshalWrites pins the hand-written encoding
// of an entry to encoding/json's, escaping and omitted fields included:
// Find decodes entries with encoding/json, whichever wrote them.
func TestAppendEntry_IsWhatJSONMarshalWrites(t *testing.T) {
	at := time.Date(2026, 11, 29, 7, 0, 0, 123456789, time.FixedZone("x", 3600))
	for _, e := range []api.AuditEntry{
		{},
		{Seq: 42, Time: at, Subject: "alice", Role: "operator", TokenID: "t1", Source: "127.0.0.1:5555", Verb: api.VerbCreate,
			Kind: resource.MeshService, Mesh: "default", Name: "redis", Result: api.ResultSuccess, Code: 201},
		{Time: at.UTC(), Verb: api.VerbPut, Result: api.ResultRefused, Code: -1, Reason: `spec.ports[0].port: must be 1-65535 <"&">` + "\n\u2028\xff"},
		{Seq: -7, Time: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), Subject: "é", Name: "a\x00b", Result: ""},
	} {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendEntry([]byte("x"), e); !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Errorf("appendEntry\n%s\nwant what json.Marshal writes\nx%s", got, want)
		}
	}
}
