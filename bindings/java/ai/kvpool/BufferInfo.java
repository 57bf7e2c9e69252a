package ai.kvpool;

import java.util.Arrays;

/**
 * Where one buffer of a pool lives and how it is laid out
 * ({@link Pool#buffer(BufferKind, int)}); maps 1:1 onto a DLPack DLTensor.
 * The memory belongs to the pool: the address is valid until the pool is closed.
 */
public final class BufferInfo {
  /** {@link #getDeviceType()} of CPU memory (DLPack's kDLCPU). */
  public static final int DEVICE_CPU = Kvpool.KVPOOL_DEVICE_CPU;
  /** {@link #getDeviceType()} of CUDA device memory (DLPack's kDLCUDA). */
  public static final int DEVICE_CUDA = Kvpool.KVPOOL_DEVICE_CUDA;
  /**
   * Pinned host memory (DLPack's kDLCUDAHost): never a buffer's device type, but what the callbacks
   * of a C kvpool_allocator get for a CUDA pool's host tier.
   */
  public static final int DEVICE_CUDA_HOST = Kvpool.KVPOOL_DEVICE_CUDA_HOST;

  private final DType dtype;
  private final long data;
  private final int deviceType;
  private final int deviceId;
  private final long[] shape;
  private final long[] strides;
  private final long bytes;

  BufferInfo(DType dtype, long data, int deviceType, int deviceId, long[] shape, long[] strides, long bytes) {
    this.dtype = dtype;
    this.data = data;
    this.deviceType = deviceType;
    this.deviceId = deviceId;
    this.shape = shape;
    this.strides = strides;
    this.bytes = bytes;
  }

  /** Element type. */
  public DType getDtype() {
    return dtype;
  }

  /** Base address (host or device pointer) as a number. */
  public long getData() {
    return data;
  }

  /** {@link #DEVICE_CPU} or {@link #DEVICE_CUDA}. */
  public int getDeviceType() {
    return deviceType;
  }

  /** Device ordinal (0 for the CPU). */
  public int getDeviceId() {
    return deviceId;
  }

  /** Number of dimensions. */
  public int getNdim() {
    return shape.length;
  }

  /** Extent of each dimension (a copy). */
  public long[] getShape() {
    return shape.clone();
  }

  /** Stride of each dimension in elements (a copy). */
  public long[] getStrides() {
    return strides.clone();
  }

  /** Bytes from the base address to the end of the buffer. */
  public long getBytes() {
    return bytes;
  }

  @Override
  public String toString() {
    return "BufferInfo{dtype=" + dtype + ", data=0x" + Long.toHexString(data) + ", device=" + deviceType + ":"
        + deviceId + ", shape=" + Arrays.toString(shape) + ", strides=" + Arrays.toString(strides) + ", bytes="
        + bytes + "}";
  }
}
