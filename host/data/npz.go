package data

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// maxDeflateRatio bounds how many bytes one compressed byte of a deflated
// NPZ member can stand for: deflate cannot do better than about 1032:1, so
// a member that claims more is corrupt and is refused before it is read.
const maxDeflateRatio = 1032

// NPZ is an NPZ archive (np.savez, np.savez_compressed): a zip file whose
// members "NAME.npy" are NPY files, the array NAME each. Members may be
// stored or deflated.
type NPZ struct {
	size    int64
	members map[string]*zip.File // by array name
	names   []string             // array names in archive order
}

// OpenNPZ reads the directory of the NPZ archive r of size bytes. Members
// whose names do not end in ".npy" are ignored; two members of the same
// name are an error.
func OpenNPZ(r io.ReaderAt, size int64) (*NPZ, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		if errors.Is(err, zip.ErrFormat) {
			return nil, fmt.Errorf("not an NPZ file (a zip archive, as np.savez writes): %w", err)
		}
		return nil, err
	}
	z := &NPZ{size: size, members: map[string]*zip.File{}}
	for _, f := range zr.File {
		name, ok := strings.CutSuffix(f.Name, ".npy")
		if !ok || f.FileInfo().IsDir() {
			continue
		}
		if _, dup := z.members[name]; dup {
			return nil, fmt.Errorf("the archive holds %s twice", f.Name)
		}
		z.members[name] = f
		z.names = append(z.names, name)
	}
	return z, nil
}

// Names returns the names of the arrays the archive holds, in archive
// order.
func (z *NPZ) Names() []string { return slices.Clone(z.names) }

// Has reports whether the archive holds the named array.
func (z *NPZ) Has(name string) bool { return z.members[name] != nil }

// Array reads the named array (see ReadNPY). The sizes the archive claims
// for the member are checked against the archive's size before it is read,
// and its CRC once it is.
func (z *NPZ) Array(name string) (*NPYArray, error) {
	f := z.members[name]
	if f == nil {
		return nil, fmt.Errorf("the archive holds no %s.npy (it holds %s)", name, listOrNone(z.names))
	}
	a, err := z.read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	return a, nil
}

func (z *NPZ) read(f *zip.File) (*NPYArray, error) {
	off, err := f.DataOffset()
	if err != nil {
		return nil, err
	}
	csize, usize := f.CompressedSize64, f.UncompressedSize64
	if off < 0 || csize > uint64(z.size-off) {
		return nil, fmt.Errorf("the archive is truncated: the member claims %d bytes from offset %d of %d", csize, off, z.size)
	}
	switch f.Method {
	case zip.Store:
		if usize != csize {
			return nil, fmt.Errorf("the archive is corrupt: a stored member of %d bytes claims %d uncompressed", csize, usize)
		}
	case zip.Deflate:
		if usize/maxDeflateRatio > csize {
			return nil, fmt.Errorf("the archive is corrupt: %d deflated bytes claim %d uncompressed, more than deflate can produce", csize, usize)
		}
	default:
		return nil, fmt.Errorf("compression method %d is not supported (want stored or deflated, as np.savez and np.savez_compressed write)", f.Method)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	return readNPY(rc, int64(min(usize, 1<<62)), int64(csize))
}

// listOrNone joins names for a message, "nothing" when there are none.
func listOrNone(names []string) string {
	if len(names) == 0 {
		return "nothing"
	}
	return strings.Join(names, ", ")
}
