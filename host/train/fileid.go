package train

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/optlab/optlab/host/data"
)

// fileIDs caches FileIdentity by path, modification time and size.
var fileIDs sync.Map

// FileIdentity identifies the regular file at path by its content, as a
// run's configuration records the files behind data.path and init_from:
// "<size> bytes, sha256 <hex>". The hash is computed once per path,
// modification time and size in this process. ok is false when path is not
// a regular file that can be read (the run's own loading then says why;
// leaving the key out compares the run as an older record without it).
func FileIdentity(path string) (id string, ok bool) {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return "", false
	}
	key := fmt.Sprintf("%s\x00%d\x00%d", path, st.ModTime().UnixNano(), st.Size())
	if v, ok := fileIDs.Load(key); ok {
		return v.(string), true
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", false
	}
	id = fmt.Sprintf("%d bytes, sha256 %x", n, h.Sum(nil))
	fileIDs.Store(key, id)
	return id, true
}

// filesIdentity identifies the files of an npz dataset by content: the
// .npz file's FileIdentity, or for a folder of .npy files (data.NumPyFiles)
// each one's, named and joined; "" when one cannot be read.
func filesIdentity(path string) string {
	files, err := data.NumPyFiles(path)
	if err != nil || len(files) == 0 {
		return ""
	}
	ids := make([]string, len(files))
	for i, f := range files {
		id, ok := FileIdentity(f)
		if !ok {
			return ""
		}
		if f == path {
			return id // an .npz file
		}
		ids[i] = filepath.Base(f) + ": " + id
	}
	return strings.Join(ids, "; ")
}
