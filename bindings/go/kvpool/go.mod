module github.com/kvpool/kvpool/bindings/go/kvpool

go 1.19
