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
	"meshnames serve":                 true,
	"meshnames config show":           true,
	"meshnames install crds":          true,
	"meshnames install control-plane": true,
	"meshnames install mcs-crds":      true,
	"meshnames help":                  true,
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
		if !c.Runnable() || c.HasSubCommands() || strings.HasPrefix(c.CommandPath(), "meshnames completion") {
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

// TestNew_UnknownSubcommandIsAnError runs every command that groups
// subcommands with a subcommand that does not exist and with none: both
// fail naming the valid choices (the root alone prints its help), so a
// script that pipes `meshnames install control-plan` into kubectl stops
// instead of applying nothing. Every runnable leaf checks its arguments.
func TestNew_UnknownSubcommandIsAnError(t *testing.T) {
	root := New(Env{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
	run := func(args ...string) (string, error) {
		var out strings.Builder
		c := New(Env{In: strings.NewReader(""), Out: &out, Err: &out, Getenv: func(string) (string, bool) { return "", false }})
		c.SetArgs(args)
		err := c.Execute()
		return out.String(), err
	}
	parents := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		path := strings.Fields(c.CommandPath())[1:]
		if !c.HasSubCommands() {
			if c.Runnable() && c.Args == nil && c.Name() != "help" {
				t.Errorf("%s: runnable without an Args check: extra arguments would be ignored", c.CommandPath())
			}
			return
		}
		parents++
		var subs []string
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				subs = append(subs, s.Name())
			}
		}
		_, err := run(append(path, "no-such-command")...)
		if err == nil {
			t.Errorf("%s no-such-command: no error", c.CommandPath())
		} else {
			for _, s := range subs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%s no-such-command: %q does not name the choice %q", c.CommandPath(), err, s)
				}
			}
		}
		out, err := run(path...)
		switch {
		case c == root && (err != nil || !strings.Contains(out, "Available Commands")):
			t.Errorf("meshnames alone: err %v, want its help; got %q", err, out)
		case c != root && (err == nil || !strings.Contains(err.Error(), "needs a subcommand")):
			t.Errorf("%s alone: err %v, want one naming the subcommands", c.CommandPath(), err)
		}
	}
	walk(root)
	if parents < 6 {
		t.Errorf("checked %d parent commands; is the tree built?", parents)
	}
	if _, err := run("help", "no-such-command"); err == nil {
		t.Error("help no-such-command: no error")
	}
	if out, err := run("help", "install"); err != nil || !strings.Contains(out, "crds") {
		t.Errorf("help install: %v, %q", err, out)
	}
	if _, err := run("instal"); err == nil || !strings.Contains(err.Error(), "did you mean install") {
		t.Errorf("instal: %v, want a suggestion", err)
	}
}
