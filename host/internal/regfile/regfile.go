// Package regfile opens input files (data files, checkpoints) for reading
// only when they are regular files. A named pipe, a device or a socket where
// a data file or model.init_from should be would block open(2) or a read for
// ever, deaf to Ctrl-C (issue 26, case 07); Open refuses it at once.
package regfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Open opens path for reading, refusing anything but a regular file (after
// symbolic links): "mnist/x.gz is a named pipe (FIFO), not a regular file;
// point it at a file". The file is opened without blocking (O_NONBLOCK,
// which makes a FIFO's open return at once), then checked with fstat, so
// what is checked is what is read.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := Check(path, st.Mode()); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile is os.ReadFile through Open.
func ReadFile(path string) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return io.ReadAll(f)
}

// Check returns the error Open gives for a file of mode m at path, nil
// for a regular file.
func Check(path string, m fs.FileMode) error {
	if m.IsRegular() {
		return nil
	}
	kind := "not a regular file"
	switch t := m.Type(); {
	case t&fs.ModeDir != 0:
		kind = "a folder"
	case t&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case t&fs.ModeSocket != 0:
		kind = "a socket"
	case t&fs.ModeCharDevice != 0:
		kind = "a character device"
	case t&fs.ModeDevice != 0:
		kind = "a device"
	}
	return fmt.Errorf("%s is %s, not a regular file; point it at a file", path, kind)
}
