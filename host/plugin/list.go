package plugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/optlab/optlab/sdk/optim"
)

// Installed describes one plugin binary in a plugin directory.
type Installed struct {
	// Name is the binary's file name, the name LaunchSpec.Name takes.
	Name string
	// Path is the binary's path.
	Path string
	// Info is what the plugin's Info returned (zero when Err is set).
	Info optim.Info
	// Err says why the binary could not be started or asked for its Info.
	Err error
}

// List starts every plugin binary in dir (DefaultDir when empty) in turn,
// asks it for its Info and stops it, for `host plugins`. A binary that fails
// is listed with its Err; the error return is for an unreadable dir.
func List(ctx context.Context, dir string) ([]Installed, error) {
	if dir == "" {
		dir = DefaultDir
	}
	names, err := installedNames(dir)
	if err != nil {
		return nil, err
	}
	out := make([]Installed, 0, len(names))
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("list plugins: %w", err)
		}
		in := Installed{Name: name, Path: filepath.Join(dir, name)}
		c, err := Launch(ctx, LaunchSpec{Name: name, Path: in.Path})
		if err != nil {
			in.Err = err
		} else {
			c.mu.Lock()
			in.Info = c.info
			c.mu.Unlock()
			_ = c.Close()
		}
		out = append(out, in)
	}
	return out, nil
}

// installedNames lists the executable regular files of dir, sorted; hidden
// files are skipped.
func installedNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read plugin directory: %w", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if checkExecutable(filepath.Join(dir, e.Name())) == nil {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}
