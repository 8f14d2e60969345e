// Command adamw serves the adamw optimizer (AdamW as torch.optim.AdamW
// computes it) as an optlab plugin.
package main

import (
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/serve"
)

func main() { serve.Serve(builtin.Constructor("adamw")) }
