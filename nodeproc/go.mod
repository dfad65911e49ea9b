module github.com/wary-go/wary/nodeproc

go 1.26.8
