// Package plot draws optlab's figures (PNG, with gonum.org/v1/plot):
// training curves averaged over seeds, one line per method (MeanOverSeeds
// turns host/curves' files into series), and the line and heat-map panels of
// loss landscapes. Writing and reading the curve files is host/curves' job.
package plot
