package main

import "testing"

func TestProfilePath(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/tmp/server.cpu", "/tmp/server.cpu"},
		{"/tmp/server-%p.cpu", "/tmp/server-4242.cpu"},
		{"/tmp/%p/%p.alloc", "/tmp/4242/4242.alloc"},
		{"/tmp/100%.cpu", "/tmp/100%.cpu"},
	} {
		if got := profilePath(tc.path, 4242); got != tc.want {
			t.Errorf("profilePath(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}
