package backend

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// BackupTempPrefix starts the name of the temporary directory an embedded
// engine writes a backup's snapshot into, inside its data directory (the
// same file system, so that pebble's checkpoint hard-links its tables).
const BackupTempPrefix = ".backup-"

// Backup is the frame of an embedded engine's store.Backuper: snapshot
// writes the data directory's files into tmp, a new temporary directory
// inside the data directory dir; Backup then writes tmp to w as a tar
// (TarTree) and removes tmp, also when it fails (what a failed removal
// leaves, RemoveBackupTemps removes at the next Open). It returns the
// paths of the tar.
func Backup(ctx context.Context, dir string, w io.Writer, snapshot func(tmp string) error) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, BackupTempPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("backup: temporary directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := snapshot(tmp); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return TarTree(ctx, w, tmp)
}

// RemoveBackupTemps removes the temporary directories that backups cut
// short by a crash left in dir. Call it holding the lock of dir, when no
// backup can be running.
func RemoveBackupTemps(dir string) error {
	left, err := filepath.Glob(filepath.Join(dir, BackupTempPrefix+"*"))
	if err != nil {
		return err
	}
	for _, p := range left {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove a backup's temporary directory: %w", err)
		}
	}
	return nil
}

// TarTree writes the directories and regular files under root to w as a
// tar stream, with paths relative to root, in lexical order, and returns
// the paths it wrote. Directories get mode 0700 and files 0600, the modes
// of a data directory: a backup holds the signing keys of tokens. It stops
// with ctx's error when ctx ends.
func TarTree(ctx context.Context, w io.Writer, root string) ([]string, error) {
	tw := tar.NewWriter(w)
	now := time.Now().Truncate(time.Second)
	var paths []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if path == root {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			name += "/"
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o700, ModTime: now}); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if err := tarFile(ctx, tw, path, name, now); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: not a regular file", name)
		}
		paths = append(paths, name)
		return nil
	})
	if err != nil {
		return paths, fmt.Errorf("backup: tar: %w", err)
	}
	if err := tw.Close(); err != nil {
		return paths, fmt.Errorf("backup: tar: %w", err)
	}
	return paths, nil
}

func tarFile(ctx context.Context, tw *tar.Writer, path, name string, mtime time.Time) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: st.Size(), ModTime: mtime}); err != nil {
		return err
	}
	// The snapshot's files do not change while they are read: a short
	// copy is an error of tar's own (it checks the size).
	_, err = io.Copy(tw, ctxReader{ctx, f})
	return err
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
