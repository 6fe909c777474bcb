package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// strictTree makes every command of the tree refuse what it does not
// know. cobra's default for a command that only groups subcommands
// (install, token, inspect, ...) is to print its help and exit 0 on a
// missing or unknown subcommand, so `meshnames install control-plan |
// kubectl apply -f -` would apply nothing and report success. Here such a
// command fails, naming its valid subcommands; the root alone prints its
// help (there is nothing else it could mean), and `help TOPIC` fails on a
// topic that is not a command.
//
// It runs on the finished tree, so commands added to any parent later are
// covered without doing anything.
func strictTree(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Name() == "help" && c.Parent() == root {
			strictHelp(root, c)
			return
		}
		if !c.HasSubCommands() || c.Runnable() {
			return
		}
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			return unknownCommand(cmd, args[0])
		}
		c.RunE = func(cmd *cobra.Command, _ []string) error {
			if cmd == root {
				return cmd.Help()
			}
			return fmt.Errorf("%s needs a subcommand: one of %s (see %s --help)", cmd.CommandPath(), choices(cmd), cmd.CommandPath())
		}
	}
	walk(root)
}

// strictHelp makes `help TOPIC` fail when TOPIC names no command.
func strictHelp(root, help *cobra.Command) {
	run := help.Run
	help.Run = nil
	help.RunE = func(cmd *cobra.Command, args []string) error {
		found, rest, err := root.Find(args)
		if err == nil && len(rest) > 0 {
			err = unknownCommand(found, rest[0])
		}
		if err != nil {
			return err
		}
		run(cmd, args)
		return nil
	}
}

func unknownCommand(cmd *cobra.Command, arg string) error {
	msg := fmt.Sprintf("unknown command %q for %q: use one of %s", arg, cmd.CommandPath(), choices(cmd))
	if s := cmd.SuggestionsFor(arg); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return fmt.Errorf("%s", msg)
}

// choices lists the subcommands a user may type after cmd.
func choices(cmd *cobra.Command) string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return strings.Join(names, ", ")
}
