package workspace

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
)

// Import writes every file under the local folder dir into the tree, at
// the same relative paths (files already in the tree and not in dir are
// kept). A symlink is followed only while it stays inside dir: one that
// leaves it (or points at a folder) is refused with ErrSymlink, before
// anything is written. Each file takes the tree's limits.
func (t *Tree) Import(ctx context.Context, dir string) (int, error) {
	const op = "import"
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("workspace: import %s: %w", dir, err)
	}
	defer root.Close()
	type file struct {
		path string
		data []byte
	}
	var files []file
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		clean, err := Clean(op, p, false)
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			fi, err := root.Stat(p) // follows the link, inside dir only
			if err != nil {
				return refuse(op, clean, ErrSymlink, fmt.Sprintf("%s is a symlink that leaves %s", clean, dir), "copy the file it points to into the folder, or remove the link")
			}
			if fi.IsDir() {
				return refuse(op, clean, ErrSymlink, fmt.Sprintf("%s is a symlink to a folder", clean), "copy the folder instead of linking it")
			}
		} else if !d.Type().IsRegular() {
			return refuse(op, clean, ErrInvalidPath, fmt.Sprintf("%s is not a regular file", clean), "remove it from the folder")
		}
		b, err := root.ReadFile(p)
		if err != nil {
			return err
		}
		if int64(len(b)) > t.lim.MaxFileBytes {
			return t.tooLarge(op, clean, int64(len(b)))
		}
		files = append(files, file{clean, b})
		return nil
	})
	if err != nil {
		return 0, err
	}
	for i, f := range files {
		if _, err := t.Write(ctx, f.path, f.data); err != nil {
			return i, err
		}
	}
	return len(files), nil
}

// Export writes the tree's files into the local folder dir (created if
// missing), replacing files of the same path: the folder a tool that
// needs real files (a build, a shell) works in. It never writes outside
// dir, symlinks in dir included (os.Root refuses them).
func (t *Tree) Export(ctx context.Context, dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("workspace: export: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("workspace: export: %w", err)
	}
	defer root.Close()
	entries, err := t.Files(ctx)
	if err != nil {
		return 0, err
	}
	for i, e := range entries {
		b, err := t.content(ctx, e)
		if err != nil {
			return i, err
		}
		if d := path.Dir(e.Path); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return i, fmt.Errorf("workspace: export %s: %w", e.Path, err)
			}
		}
		if err := root.WriteFile(e.Path, b, 0o644); err != nil {
			return i, fmt.Errorf("workspace: export %s: %w", e.Path, err)
		}
	}
	return len(entries), nil
}
