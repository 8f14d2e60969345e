module github.com/optlab/optlab/tools/gotchprep

go 1.24
