package skills

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
)

// Dir is a folder of skill folders on the local disk. Reads go through an
// os.Root, so neither ".." nor a symbolic link reaches outside it.
type Dir string

// Folders implements Source: the subfolders that hold a SKILL.md.
func (d Dir) Folders(context.Context) ([]string, error) {
	ents, err := os.ReadDir(string(d))
	if err != nil {
		return nil, fmt.Errorf("skills folder: %w", err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if _, err := os.Stat(string(d) + "/" + e.Name() + "/" + SkillFile); err == nil {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// Files implements Source.
func (d Dir) Files(_ context.Context, folder string) ([]string, error) {
	root, err := os.OpenRoot(string(d))
	if err != nil {
		return nil, fmt.Errorf("skills folder: %w", err)
	}
	defer root.Close()
	var out []string
	err = fs.WalkDir(root.FS(), folder, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(e.Name(), ".") && p != folder {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if e.Type().IsRegular() {
			out = append(out, strings.TrimPrefix(p, folder+"/"))
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: skill folder %s", ErrNotFound, folder)
	}
	sort.Strings(out)
	return out, err
}

// ReadFile implements Source.
func (d Dir) ReadFile(_ context.Context, folder, rel string, limit int) ([]byte, bool, error) {
	root, err := os.OpenRoot(string(d))
	if err != nil {
		return nil, false, fmt.Errorf("skills folder: %w", err)
	}
	defer root.Close()
	f, err := root.Open(folder + "/" + rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, fmt.Errorf("%w: %s/%s", ErrNotFound, folder, rel)
	case err != nil && strings.Contains(err.Error(), "escapes"):
		return nil, false, fmt.Errorf("%w: %s/%s leads outside the skills folder", ErrBadPath, folder, rel)
	case err != nil:
		return nil, false, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, false, fmt.Errorf("%w: %s/%s is a folder, not a file", ErrNotFound, folder, rel)
	}
	return readCapped(f, limit)
}

func readCapped(r io.Reader, limit int) ([]byte, bool, error) {
	data, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, false, err
	}
	if len(data) > limit {
		return data[:limit], true, nil
	}
	return data, false, nil
}
