// Command swa serves the swa optimizer (Stochastic Weight Averaging on top
// of a member method: SWA, SWA-SAM, SWA-OT-MDR) as an optlab plugin.
package main

import (
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/serve"
)

func main() { serve.Serve(builtin.Constructor("swa")) }
