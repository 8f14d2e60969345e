// Command edst serves the edst optimizer (the EDST ensemble of Liu et al.,
// 2022: M sparse tickets from one dynamic-sparse-training run) as an
// optlab plugin.
package main

import (
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/serve"
)

func main() { serve.Serve(builtin.Constructor("edst")) }
