// Command multicall is every built-in plugin in one binary, for the device
// kit (make devkit), where one binary instead of thirteen keeps the kit
// small. Run through a link named after a plugin (bin/plugins/sam → this
// binary), it serves that plugin, as plugins/sam/cmd/sam would; run under
// its own name, "-list" prints the plugins' names one per line (the kit's
// script makes a link for each) and "NAME" serves that plugin.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/serve"
)

func main() {
	names := builtin.Registry().Names()
	name := filepath.Base(os.Args[0])
	if !slices.Contains(names, name) {
		switch {
		case len(os.Args) == 2 && os.Args[1] == "-list":
			for _, n := range names {
				fmt.Println(n)
			}
			return
		case len(os.Args) == 2 && slices.Contains(names, os.Args[1]):
			name = os.Args[1]
		default:
			fmt.Fprintf(os.Stderr, "usage: %s -list | NAME, or run it through a link named after a plugin (%v)\n", filepath.Base(os.Args[0]), names)
			os.Exit(2)
		}
	}
	serve.Serve(builtin.Constructor(name))
}
