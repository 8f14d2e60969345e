// Command toyplugin serves the testplugin toy optimizer as an optlab
// plugin. The file name it is installed under picks a variant: a name
// starting with "plain" serves one that implements none of optim.Predictor,
// optim.Stateful and optim.Resolver, "future" one that claims a newer protocol minor.
package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/optlab/optlab/sdk/protocoltest"
	"github.com/optlab/optlab/sdk/serve"
)

func main() {
	name := filepath.Base(os.Args[0])
	switch {
	case strings.HasPrefix(name, "plain"):
		serve.Serve(protocoltest.NewPlain)
	case strings.HasPrefix(name, "future"):
		serve.Serve(protocoltest.NewFuture)
	default:
		serve.Serve(protocoltest.New)
	}
}
