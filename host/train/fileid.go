package train

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"sync"
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
