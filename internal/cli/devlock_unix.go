//go:build unix

package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// devLockFile is the file in lovia dev's data directory that one lovia dev
// at a time holds locked.
const devLockFile = "lovia-dev.lock"

// lockDevData locks lovia dev's data directory for this process: two
// embedded servers writing one JetStream store would corrupt it. The lock
// ends with the process, however it ends (kill -9 included); release
// ends it before.
func lockDevData(dir string) (release func(), err error) {
	path := filepath.Join(dir, devLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dev: data directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another lovia dev"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, aerr := strconv.Atoi(strings.TrimSpace(string(b))); aerr == nil {
				holder = fmt.Sprintf("another lovia dev (pid %d)", pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("dev: the data directory %s is in use by %s: stop it, or start this one with --data DIR", dir, holder)
		}
		return nil, fmt.Errorf("dev: locking the data directory %s: %w", dir, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}
