package validate

import "strings"

// Merge returns the violations of decoding (unknown fields, wrong types)
// followed by the rule violations found on the partly decoded value, minus
// those at or under a field that failed to decode: a port that was not a
// number is reported once, as a type error, not again as "out of range".
func Merge(decoding, rules Errors) Errors {
	out := append(Errors(nil), decoding...)
	for _, r := range rules {
		if !under(r.Field, decoding) {
			out = append(out, r)
		}
	}
	return out
}

func under(field string, decoding Errors) bool {
	for _, d := range decoding {
		if d.Field == "" || field == d.Field ||
			strings.HasPrefix(field, d.Field+".") || strings.HasPrefix(field, d.Field+"[") {
			return true
		}
	}
	return false
}
