// Command shampoo serves the shampoo optimizer (Shampoo, Gupta et al. 2018,
// with Distributed Shampoo's practical defaults) as an optlab plugin.
package main

import (
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/serve"
)

func main() { serve.Serve(builtin.Constructor("shampoo")) }
