package validate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMerge_DropsRuleViolationsUnderDecodeErrors(t *testing.T) {
	decoding := Errors{{Field: "spec.ports[0].port", Message: "must be an integer"}, {Field: "spec.bogus", Message: "unknown field"}}
	rules := Errors{
		{Field: "spec.ports[0].port", Message: "must be a port number"}, // same field: dropped
		{Field: "spec.ports[0].portName", Message: "x"},                 // a sibling that shares a prefix: kept
		{Field: "spec.bogus.inner", Message: "x"},                       // under: dropped
		{Field: "name", Message: "must be a DNS-1035 label"},            // elsewhere: kept
		{Field: "spec.ports[0].port[1]", Message: "x"},                  // under by index: dropped
	}
	got := Merge(decoding, rules)
	want := Errors{decoding[0], decoding[1], rules[1], rules[3]}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Merge (-want +got):\n%s", d)
	}
	if got := Merge(Errors{{Field: "", Message: "syntax"}}, rules); len(got) != 1 {
		t.Errorf("a whole-document error must hide every rule violation, got %v", got)
	}
}
