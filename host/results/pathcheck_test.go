package results

import (
	"path/filepath"
	"strings"
	"testing"
)

// host check refuses what the file system would refuse a run: an
// experiment name or a results_dir folder longer than a file name may be,
// a run's file names (kept-aside ones included) too long, a path longer
// than PATH_MAX (issue 26, case 11).
func TestCheckPaths(t *testing.T) {
	key := "method=SGD/arch=mlp/seed=1"
	long := strings.Repeat("L", 300)
	deep := "/tmp/" + strings.Repeat(strings.Repeat("d", 200)+"/", 20)
	for _, tc := range []struct {
		dir, key, want string
	}{
		{"/tmp/res/e", key, ""},
		{"/tmp/res/" + strings.Repeat("e", 255), key, ""},
		{"/tmp/res/" + long, key, "name: 300 bytes long, more than the 255 file systems allow in a file name (it names the experiment's folder in /tmp/res/); shorten it"},
		{"/tmp/" + long + "/e", key, "results_dir: the folder name LLLLLLLLLLLLLLLLLLLLLLLL… is 300 bytes long"},
		// 200 bytes of method name: the stem fits, but not with the
		// suffix a superseded run's files get.
		{"/tmp/res/e", "method=" + strings.Repeat("m", 200) + "/arch=mlp/seed=1", "its file names would be up to 268 bytes long, more than the 255 file systems allow; shorten the method or architecture names"},
		{filepath.Join(deep, "e"), key, "its files' paths would be up to 4"},
	} {
		err := Layout{Dir: tc.dir}.CheckPaths([]string{"method=A/arch=mlp/seed=1", tc.key})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%.40s…: %v", tc.dir, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%.40s…: error %v, want %q", tc.dir, err, tc.want)
		}
	}
}
