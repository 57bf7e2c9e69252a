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
    /// <summary>Pinned host memory (DLPack's kDLCUDAHost): never a buffer's DeviceType, but what the
    /// callbacks of a C kvpool_allocator get for a CUDA pool's host tier.</summary>
    public const int DeviceCudaHost = Kvpool.KVPOOL_DEVICE_CUDA_HOST;

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
  /// <summary>The longest cached prefix of a key (Pool.Match).</summary>
  public sealed class MatchResult {
    private readonly long[] slots;

    internal MatchResult(long[] slots, ulong node) : this(slots, node, -1) {
    }

    internal MatchResult(long[] slots, ulong node, int mambaSlot) {
      this.slots = slots;
      Node = node;
      MambaSlot = mambaSlot;
    }

    /// <summary>Pool.MatchMamba: the node's mamba state slot, owned by the tree (-1 if nothing
    /// matched, and for Pool.Match).</summary>
    public int MambaSlot { get; private set; }

    /// <summary>The cached slots of the matched tokens (whole pages); a copy.</summary>
    public long[] Slots {
      get { return (long[])slots.Clone(); }
    }

    /// <summary>Number of matched tokens.</summary>
    public int Length {
      get { return slots.Length; }
    }

    /// <summary>Handle of the node where the match ends (the root if nothing matched).</summary>
    public ulong Node { get; private set; }
  }

  /// <summary>What Pool.Insert did.</summary>
  public sealed class InsertResult {
    internal InsertResult(ulong prefixLength, ulong node) : this(prefixLength, node, false) {
    }

    internal InsertResult(ulong prefixLength, ulong node, bool stateExisted) {
      PrefixLength = prefixLength;
      Node = node;
      StateExisted = stateExisted;
    }

    /// <summary>Pool.InsertMamba: true if the end node already had a mamba state, so the caller keeps
    /// (and frees) its state slot; false if the tree took it.</summary>
    public bool StateExisted { get; private set; }

    /// <summary>Leading tokens that were cached already: the caller still owns those slots
    /// (duplicates to free, unless they are the tree's own); the tree took the rest.</summary>
    public ulong PrefixLength { get; private set; }

    /// <summary>Handle of the node of the last token.</summary>
    public ulong Node { get; private set; }
  }

  /// <summary>Tokens held by the radix tree (Pool.RadixSizes).</summary>
  public sealed class RadixSizes {
    internal RadixSizes(ulong evictable, ulong protectedTokens, ulong total) {
      Evictable = evictable;
      Protected = protectedTokens;
      Total = total;
    }

    /// <summary>Tokens of unlocked nodes (Pool.Evict can free them).</summary>
    public ulong Evictable { get; private set; }

    /// <summary>Tokens of locked nodes and their ancestors.</summary>
    public ulong Protected { get; private set; }

    /// <summary>Evictable plus Protected.</summary>
    public ulong Total { get; private set; }

    /// <summary>All three counts.</summary>
    public override string ToString() {
      return "RadixSizes{Evictable=" + Evictable + ", Protected=" + Protected + ", Total=" + Total + "}";
    }
  }

  /// <summary>One KV event of the radix tree (Pool.TakeEvents; needs prefix_cache.events).</summary>
  public sealed class KvEvent {
    private readonly int[] tokens;

    internal KvEvent(EventType type, long blockHash, long parentHash, bool hasParent, int[] tokens) {
      Type = type;
      BlockHash = blockHash;
      ParentHash = parentHash;
      HasParent = hasParent;
      this.tokens = tokens;
    }

    /// <summary>BlockStored, BlockRemoved or AllBlocksCleared.</summary>
    public EventType Type { get; private set; }

    /// <summary>The page's id: the first 8 bytes of its SHA-256 digest, big-endian (Pool.PageHash).</summary>
    public long BlockHash { get; private set; }

    /// <summary>The previous page's id, if HasParent.</summary>
    public long ParentHash { get; private set; }

    /// <summary>True for a BlockStored page that has a previous page.</summary>
    public bool HasParent { get; private set; }

    /// <summary>BlockStored: the page's tokens (a copy); empty otherwise.</summary>
    public int[] Tokens {
      get { return (int[])tokens.Clone(); }
    }

    /// <summary>Type, ids and token count.</summary>
    public override string ToString() {
      return "KvEvent{" + Type + ", BlockHash=" + BlockHash + (HasParent ? ", ParentHash=" + ParentHash : "") +
             ", Tokens=" + tokens.Length + "}";
    }
  }

  /// <summary>The hash of one page of tokens (Pool.PageHash).</summary>
  public sealed class PageHash {
    private readonly byte[] digest;

    internal PageHash(byte[] digest, long id) {
      this.digest = digest;
      Id = id;
    }

    /// <summary>The 32-byte SHA-256 digest (a copy): the parent of the next page.</summary>
    public byte[] Digest {
      get { return (byte[])digest.Clone(); }
    }

    /// <summary>The event id: the digest's first 8 bytes read big-endian (KvEvent.BlockHash).</summary>
    public long Id { get; private set; }
  }

  /// <summary>A request just started (Pool.Begin).</summary>
  public sealed class SeqBegin {
    internal SeqBegin(ulong seq, ulong cached) {
      Seq = seq;
      Cached = cached;
    }

    /// <summary>The request id (never 0).</summary>
    public ulong Seq { get; private set; }

    /// <summary>Prompt tokens found in the prefix cache.</summary>
    public ulong Cached { get; private set; }
  }

  /// <summary>SGLang's scheduler accounting (Pool.Accounting): Available + Evictable + Protected +
  /// Uncached == Capacity whenever only the request API allocates.</summary>
  public sealed class Accounting {
    internal Accounting(ulong available, ulong evictable, ulong protectedTokens, ulong uncached, ulong capacity) {
      Available = available;
      Evictable = evictable;
      Protected = protectedTokens;
      Uncached = uncached;
      Capacity = capacity;
    }

    /// <summary>The allocator's free tokens.</summary>
    public ulong Available { get; private set; }

    /// <summary>The tree's unlocked tokens (0 without a tree).</summary>
    public ulong Evictable { get; private set; }

    /// <summary>The tree's locked tokens.</summary>
    public ulong Protected { get; private set; }

    /// <summary>Tokens held by requests and not owned by the tree (whole pages).</summary>
    public ulong Uncached { get; private set; }

    /// <summary>The token capacity.</summary>
    public ulong Capacity { get; private set; }

    /// <summary>Whether Available + Evictable + Protected + Uncached == Capacity.</summary>
    public bool Holds {
      get { return Available + Evictable + Protected + Uncached == Capacity; }
    }

    /// <summary>All five counts.</summary>
    public override string ToString() {
      return "Accounting{Available=" + Available + ", Evictable=" + Evictable + ", Protected=" + Protected +
             ", Uncached=" + Uncached + ", Capacity=" + Capacity + "}";
    }
  }

  /// <summary>A match that also reports the host tier (Pool.HostMatch): the device part (as
  /// MatchResult) and the host-only part after it.</summary>
  public sealed class HostMatchResult {
    private readonly long[] slots;

    internal HostMatchResult(long[] slots, ulong node, ulong hostLength, ulong hostNode) {
      this.slots = slots;
      Node = node;
      HostLength = hostLength;
      HostNode = hostNode;
    }

    /// <summary>The device slots of the tokens matched on the device; a copy.</summary>
    public long[] Slots {
      get { return (long[])slots.Clone(); }
    }

    /// <summary>Number of tokens matched on the device.</summary>
    public int Length {
      get { return slots.Length; }
    }

    /// <summary>Handle of the deepest matched device node (the root if none).</summary>
    public ulong Node { get; private set; }

    /// <summary>Tokens matched after the device part in host-only nodes.</summary>
    public ulong HostLength { get; private set; }

    /// <summary>Handle of the deepest matched node with a host copy (the root if none): pass it to
    /// Pool.HostLoadBack.</summary>
    public ulong HostNode { get; private set; }

    /// <summary>The lengths and nodes.</summary>
    public override string ToString() {
      return "HostMatchResult{Length=" + Length + ", Node=" + Node + ", HostLength=" + HostLength + ", HostNode=" +
             HostNode + "}";
    }
  }

  /// <summary>What Pool.HostLoadBack brought back to the device.</summary>
  public sealed class HostLoadResult {
    private readonly long[] slots;

    internal HostLoadResult(long[] slots, ulong node) {
      this.slots = slots;
      Node = node;
    }

    /// <summary>The loaded tokens' device slots, owned by the tree (empty if nothing was loaded); a copy.</summary>
    public long[] Slots {
      get { return (long[])slots.Clone(); }
    }

    /// <summary>Number of tokens loaded (0 below the 10-token threshold or without device room).</summary>
    public int Loaded {
      get { return slots.Length; }
    }

    /// <summary>Handle of the deepest device node of the path afterwards.</summary>
    public ulong Node { get; private set; }

    /// <summary>The count and the node.</summary>
    public override string ToString() {
      return "HostLoadResult{Loaded=" + Loaded + ", Node=" + Node + "}";
    }
  }

  /// <summary>Where a radix node's tokens live (Pool.HostNodeState).</summary>
  public sealed class HostNodeState {
    internal HostNodeState(bool onDevice, bool onHost, ulong tokens) {
      OnDevice = onDevice;
      OnHost = onHost;
      Tokens = tokens;
    }

    /// <summary>Whether the node's KV is on the device.</summary>
    public bool OnDevice { get; private set; }

    /// <summary>Whether the node has a host copy.</summary>
    public bool OnHost { get; private set; }

    /// <summary>The node's token count.</summary>
    public ulong Tokens { get; private set; }

    /// <summary>All three.</summary>
    public override string ToString() {
      return "HostNodeState{OnDevice=" + OnDevice + ", OnHost=" + OnHost + ", Tokens=" + Tokens + "}";
    }
  }

  /// <summary>What Pool.StoragePrefetch started: an id, or 0 and why not.</summary>
  public sealed class StoragePrefetchResult {
    internal StoragePrefetchResult(ulong id, StorageSkip skipped) {
      Id = id;
      Skipped = skipped;
    }

    /// <summary>The prefetch's id, or 0 when nothing started.</summary>
    public ulong Id { get; private set; }

    /// <summary>Whether a prefetch started (Id is not 0).</summary>
    public bool Started {
      get { return Id != 0; }
    }

    /// <summary>Why nothing started (StorageSkip.None when a prefetch did).</summary>
    public StorageSkip Skipped { get; private set; }

    /// <summary>Both values.</summary>
    public override string ToString() {
      return "StoragePrefetchResult{Id=" + Id + ", Skipped=" + Skipped + "}";
    }
  }
}
