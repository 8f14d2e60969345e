package cli

import (
	"runtime/debug"
	"testing"
)

// TestBuildCommit: a record names the commit the binary was built from
// (hardening 26, "git_commit is empty when run outside the checkout").
func TestBuildCommit(t *testing.T) {
	set := func(kv ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{}
		for i := 0; i < len(kv); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return info
	}
	for _, tc := range []struct {
		info *debug.BuildInfo
		want string
	}{
		{nil, ""},
		{set(), ""},
		{set("vcs.revision", "4a277e0c1d2e3f4a5b6c7d8e9f00112233445566", "vcs.modified", "false"), "4a277e0"},
		{set("vcs.revision", "4a277e0c1d2e3f4a5b6c7d8e9f00112233445566", "vcs.modified", "true"), "4a277e0+dirty"},
		{set("vcs.modified", "true"), ""},
	} {
		if got := buildCommit(tc.info); got != tc.want {
			t.Errorf("buildCommit(%v) = %q, want %q", tc.info, got, tc.want)
		}
	}
}
