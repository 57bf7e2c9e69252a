module example.com/kvpool-service

go 1.19

require github.com/kvpool/kvpool/bindings/go/kvpool v0.1.0

// Inside the repository: the binding's own folder (committed SWIG output
// included). In a copy outside it, delete this line and `go mod tidy` fetches
// the tagged module (docs/services.md#packages).
replace github.com/kvpool/kvpool/bindings/go/kvpool => ../../../bindings/go/kvpool
