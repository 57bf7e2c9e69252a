// Small immutable values returned by Pool's methods.
namespace KvPool {

  /// <summary>Free slots of the two pools of a swa allocator (Pool.SwaAvailable).</summary>
  public sealed class SwaAvailability {
    internal SwaAvailability(ulong full, ulong swa) {
      Full = full;
      Swa = swa;
    }

    /// <summary>Free slots of the full-attention pool.</summary>
    public ulong Full { get; private set; }

    /// <summary>Free slots of the sliding-window pool.</summary>
    public ulong Swa { get; private set; }

    /// <summary>Both counts.</summary>
    public override string ToString() {
      return "SwaAvailability{Full=" + Full + ", Swa=" + Swa + "}";
    }
  }

  /// <summary>Request rows and their mamba state slots (Pool.ReqAllocHybrid).</summary>
  public sealed class HybridRows {
    internal HybridRows(int[] rows, int[] slots) {
      Rows = rows;
      Slots = slots;
    }

    /// <summary>The rows, one per request.</summary>
    public int[] Rows { get; private set; }

    /// <summary>Each row's state slot, in the order of Rows.</summary>
    public int[] Slots { get; private set; }
  }

  /// <summary>The state slot and ping-pong slots of a hybrid request row (Pool.ReqMambaSlots).</summary>
  public sealed class MambaSlots {
    private readonly int[] pingPong;

    internal MambaSlots(int slot, int[] pingPong) {
      Slot = slot;
      this.pingPong = (int[])pingPong.Clone();
    }

    /// <summary>The row's state slot, -1 if none.</summary>
    public int Slot { get; private set; }

    /// <summary>The two ping-pong slots (-1, -1 without pool.mamba_extra_buffer); a copy.</summary>
    public int[] PingPong {
      get { return (int[])pingPong.Clone(); }
    }
  }

  /// <summary>Where one buffer of a pool lives and how it is laid out (Pool.Buffer); maps 1:1 onto
  /// a DLPack DLTensor. The memory belongs to the pool: Data is valid until the pool is disposed.</summary>
  public sealed class BufferInfo {
    /// <summary>DeviceType of CPU memory (DLPack's kDLCPU).</summary>
    public const int DeviceCpu = Kvpool.KVPOOL_DEVICE_CPU;
    /// <summary>DeviceType of CUDA device memory (DLPack's kDLCUDA).</summary>
    public const int DeviceCuda = Kvpool.KVPOOL_DEVICE_CUDA;

    private readonly long[] shape;
    private readonly long[] strides;

    internal BufferInfo(DType dtype, global::System.IntPtr data, int deviceType, int deviceId, long[] shape,
                        long[] strides, ulong bytes) {
      DType = dtype;
      Data = data;
      DeviceType = deviceType;
      DeviceId = deviceId;
      this.shape = shape;
      this.strides = strides;
      Bytes = bytes;
    }

    /// <summary>Element type.</summary>
    public DType DType { get; private set; }

    /// <summary>Base address (host or device pointer).</summary>
    public global::System.IntPtr Data { get; private set; }

    /// <summary>DeviceCpu or DeviceCuda.</summary>
    public int DeviceType { get; private set; }

    /// <summary>Device ordinal (0 for the CPU).</summary>
    public int DeviceId { get; private set; }

    /// <summary>Number of dimensions.</summary>
    public int Ndim {
      get { return shape.Length; }
    }

    /// <summary>Extent of each dimension (a copy).</summary>
    public long[] Shape {
      get { return (long[])shape.Clone(); }
    }

    /// <summary>Stride of each dimension in elements (a copy).</summary>
    public long[] Strides {
      get { return (long[])strides.Clone(); }
    }

    /// <summary>Bytes from Data to the end of the buffer.</summary>
    public ulong Bytes { get; private set; }

    /// <summary>All fields.</summary>
    public override string ToString() {
      return "BufferInfo{DType=" + DType + ", Data=0x" + Data.ToString("x") + ", Device=" + DeviceType + ":" + DeviceId +
             ", Shape=[" + string.Join(",", shape) + "], Strides=[" + string.Join(",", strides) + "], Bytes=" + Bytes + "}";
    }
  }
}
