package kvpool

// Version is the version of the loaded library as one number:
// major*10000 + minor*100 + patch (compare with KVPOOL_VERSION_NUMBER, the
// version of the headers this package was generated from).
func Version() uint32 {
	return uint32(Kvpool_version())
}

// VersionString is the version of the loaded library, e.g. "0.1.0".
func VersionString() string {
	return Kvpool_version_string()
}

// CudaDeviceCount is the number of CUDA devices this process can use: 0 when
// the library was built without CUDA, no driver is installed or no device is
// visible. It never fails.
func CudaDeviceCount() int {
	return Kvpool_cuda_device_count()
}
