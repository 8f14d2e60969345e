package results

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// OpenFile opens a file of the results folder as os.OpenFile does, but
// never through a symbolic link (O_NOFOLLOW) and never blocking on a FIFO
// or a device (O_NONBLOCK, then refused for not being a regular file): a
// link planted at runs.jsonl.lock or a curve's name (by anyone who can
// write in a shared results tree first) would otherwise have the host
// overwrite its target. The error names the path and says why.
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|oNoFollow|oNonBlock, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link: the host does not follow links among the results folder's files (remove it): %w", path, err)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		_ = f.Close()
		return nil, fmt.Errorf("%s is a %s, not a regular file: the host writes only regular files in a results folder", path, kindOf(st.Mode()))
	}
	return f, nil
}

// kindOf names a file mode's type for messages.
func kindOf(m os.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m&os.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	case m.IsDir():
		return "folder"
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	}
	return "special file"
}

// MkdirIn makes the folder dir, which lies inside the results folder root
// (MkdirAll), and checks that no component of dir below root is a
// symbolic link or anything but a folder, so that what the host writes or
// deletes in dir (TensorBoard event files, curves, dumps) stays inside the
// results folder. root itself may be a link (a results_dir on /scratch).
func MkdirIn(root, dir string) error {
	root, dir = filepath.Clean(root), filepath.Clean(dir)
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%s is not inside the results folder %s", dir, root)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	// Below root, check what exists first: MkdirAll would follow a
	// linked component.
	p := root
	for c := range strings.SplitSeq(rel, string(filepath.Separator)) {
		if c == "." {
			continue
		}
		p = filepath.Join(p, c)
		st, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
			st, err = os.Lstat(p)
		}
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return fmt.Errorf("%s is a %s, not a folder: the host writes and deletes files only inside the results folder %s (remove it)", p, kindOf(st.Mode()), root)
		}
	}
	return nil
}
