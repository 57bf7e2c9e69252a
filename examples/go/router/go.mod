module example.com/kvpool-router

go 1.19

require github.com/kvpool/kvpool/bindings/go/kvpool v0.0.0

// The binding's sources with the SWIG-generated files: a build tree made with
// `cmake -S . -B build -DKVPOOL_BUILD_GO=ON` (ctest writes its own go.mod
// pointing at its build tree), or an installed <prefix>/share/kvpool/go.
replace github.com/kvpool/kvpool/bindings/go/kvpool => ../../../build/bindings/go/kvpool
