package results

import (
	"fmt"
	"strconv"
	"strings"
)

// KeyFileStem turns a run key ("method=SAM/arch=cnn/seed=1") into the stem
// of the file names of that run's artifacts (its curve, training state and
// final model): "method=SAM,arch=cnn,seed=1". '/' becomes ',', ASCII
// letters, digits and ._=+- are kept, and every other byte (',', '%', ' '
// and non-ASCII included) is written %XX. The mapping is injective, so two
// runs never share a file ("A B" is A%20B, "A_B" stays A_B), and
// KeyFromFileStem recovers the key exactly.
func KeyFileStem(key string) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == '/':
			b.WriteByte(',')
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("._=+-", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// KeyFromFileStem inverts KeyFileStem.
func KeyFromFileStem(stem string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(stem); i++ {
		switch c := stem[i]; c {
		case ',':
			b.WriteByte('/')
		case '%':
			if i+3 > len(stem) {
				return "", fmt.Errorf("file name %q: incomplete escape at byte %d", stem, i)
			}
			v, err := strconv.ParseUint(stem[i+1:i+3], 16, 8)
			if err != nil {
				return "", fmt.Errorf("file name %q: bad escape %q: %w", stem, stem[i:i+3], err)
			}
			b.WriteByte(byte(v))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// MaxFileName is the longest file name (in bytes) most file systems accept
// (NAME_MAX on Linux, macOS and Windows).
const MaxFileName = 255

// CheckKeyFileName reports an error when a run key's artifact file name
// (stem plus the longest extension used, ".safetensors") would be too long
// for the file system.
func CheckKeyFileName(key string) error {
	if n := len(KeyFileStem(key)) + len(".safetensors"); n > MaxFileName {
		return fmt.Errorf("run %s: its file names would be %d bytes long, more than the %d file systems allow; shorten the method or architecture names", key, n, MaxFileName)
	}
	return nil
}
