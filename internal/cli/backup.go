package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/meshnames/meshnames/internal/client"
)

func newBackupCmd(env Env, newClient func() (*client.Client, error)) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "backup -o FILE|-",
		Short: "Back up the embedded store of a running control plane (admin)",
		Long: `Take a backup of the control plane's embedded store (store.engine pebble or
sqlite) while it runs: a consistent snapshot, taken while writes go on, that
holds every write acknowledged before the backup started. It needs an admin
(see "meshnames token"), and the audit log records it.

The backup is a tar of a data directory: pebble/ for the pebble engine,
meshnames.db for SQLite. Extract it into an empty directory and start a
control plane on it, with the same store.engine:

  mkdir /var/lib/meshnames-restored
  tar -xf backup.tar -C /var/lib/meshnames-restored
  meshnames serve --data-dir /var/lib/meshnames-restored

It holds the resources, leases, the audit log, the history and the keys that
sign tokens (so tokens issued before the backup work on the restored control
plane): keep it as secret as an admin token. It does not hold admin.token nor
any other file of the data directory.

-o FILE writes FILE.tmp and renames it to FILE once the backup is complete, so
a failed backup never leaves a truncated FILE; -o - writes the tar to standard
output. The line saying what was written goes to standard output, or to
standard error with -o -.

PostgreSQL and Kubernetes stores take no backup through meshnames (the server
answers 501): back up PostgreSQL with pg_dump, and Kubernetes with an etcd
snapshot.`,
		Example: `  meshnames backup -o meshnames-backup.tar
  meshnames backup -o - --token-file admin.token | gzip > meshnames-backup.tar.gz`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == "" {
				return errors.New("missing -o FILE (--output): the file to write the backup to, or - for standard output")
			}
			c, err := newClient()
			if err != nil {
				return err
			}
			if output == "-" {
				res, err := c.Backup(cmd.Context(), env.Out)
				if err != nil {
					return err
				}
				fmt.Fprintf(env.Err, "Wrote the backup to standard output: %s.\n", backupSummary(res))
				return nil
			}
			res, err := backupToFile(cmd.Context(), c, output)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Out, "Wrote %s: %s.\n", output, backupSummary(res))
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "file to write the backup (a tar) to, or - for standard output")
	return cmd
}

func backupSummary(res client.BackupResult) string {
	return fmt.Sprintf("%d bytes, %s store at revision %d", res.Bytes, res.Engine, res.Revision)
}

// backupToFile writes the backup to path.tmp, syncs it and renames it to
// path; on failure it removes path.tmp and leaves path as it was.
func backupToFile(ctx context.Context, c *client.Client, path string) (res client.BackupResult, err error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return res, fmt.Errorf("--output: %s is a directory; name the file to write", path)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return res, fmt.Errorf("--output: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if res, err = c.Backup(ctx, f); err != nil {
		return res, err
	}
	if err = f.Sync(); err != nil {
		return res, fmt.Errorf("--output: %w", err)
	}
	if err = f.Close(); err != nil {
		return res, fmt.Errorf("--output: %w", err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return res, fmt.Errorf("--output: %w", err)
	}
	return res, nil
}
