package data

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
)

// ContentID identifies the bytes of the open regular file f as a run's
// configuration records its data files (data.path.content): "<size> bytes,
// sha256 <hex>". It reads through f itself (pread, whatever f's offset), so
// it names the file that was loaded even when its path was replaced since
// (a data export that writes a new file and renames it over the old one):
// a run records the data it trains on, not the file a later look finds.
func ContentID(f *os.File) (string, error) {
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, st.Size()))
	if err != nil {
		return "", fmt.Errorf("%s: %w", f.Name(), err)
	}
	return fmt.Sprintf("%d bytes, sha256 %x", n, h.Sum(nil)), nil
}
