// Command toyplugin serves the testplugin toy optimizer as an optlab
// plugin. The file name it is installed under picks a variant: a name
// starting with "plain" serves one that implements neither optim.Predictor
// nor optim.Stateful, "future" one that claims a newer protocol minor.
package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/optlab/optlab/internal/testplugin"
	"github.com/optlab/optlab/sdk/serve"
)

func main() {
	name := filepath.Base(os.Args[0])
	switch {
	case strings.HasPrefix(name, "plain"):
		serve.Serve(testplugin.NewPlain)
	case strings.HasPrefix(name, "future"):
		serve.Serve(testplugin.NewFuture)
	default:
		serve.Serve(testplugin.New)
	}
}
