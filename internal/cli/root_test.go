package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// notClients are the commands that talk to no server, so have no --server.
// A new command that is a client gets --server by being in New's clients.
var notClients = map[string]bool{
	"meshnames serve":        true,
	"meshnames config show":  true,
	"meshnames install crds": true,
	"meshnames help":         true,
}

// TestNew_ServerFlagOnClientCommandsOnly checks every runnable command:
// clients take --server, serve and config show do not offer it.
func TestNew_ServerFlagOnClientCommandsOnly(t *testing.T) {
	root := New(Env{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	checked := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.Runnable() || strings.HasPrefix(c.CommandPath(), "meshnames completion") {
			return
		}
		checked++
		has := c.PersistentFlags().Lookup("server") != nil || c.InheritedFlags().Lookup("server") != nil
		if want := !notClients[c.CommandPath()]; has != want {
			t.Errorf("%s: has --server = %v, want %v", c.CommandPath(), has, want)
		}
	}
	walk(root)
	if checked < 8 {
		t.Errorf("checked %d commands; is the tree built?", checked)
	}
}
