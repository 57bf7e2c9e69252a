// Pool's stream-ordered operations on device memory (device.h), the GPU fast
// path, and creation with a C allocator (pool.h). Another part of the partial
// class Pool (see Pool.cs).
//
// Every IntPtr named as an address below is the ADDRESS of device memory of
// the pool's device (host memory for a CPU pool, e.g. from
// Marshal.AllocHGlobal) holding the int64 slots/lengths, int32 rows or bytes
// the C documentation describes; `stream` is a cudaStream_t (IntPtr.Zero =
// the legacy default stream; ignored on CPU pools). On a CUDA pool the calls
// enqueue their work on the stream and return at once: inputs must stay
// valid until the stream reaches the call, outputs are ready when it has
// (Synchronize waits). Device-side problems fault the pool: the next call or
// Synchronize throws Status.DeviceFault; ClearAllocator() clears it. On a CPU
// pool the calls run at once with the results of their host counterparts and
// report bad input directly (Status.InvalidArgument). The allocator calls
// need "pool": {"free_list": "device"} on a CUDA pool. Lengths are element
// counts (byte counts for k/v/nope/rope). The slot ids of MambaAllocAsync and
// MambaForkAsync are host values (returned as by MambaAlloc and MambaFork):
// only their stream is an address. The request ids, chunk lengths and tokens
// of SeqExtendAsync and SeqDecodeAsync are C# arrays as in SeqExtend and
// SeqDecode: only their slots and stream are addresses. The lengths of
// DecodeWatermark and DecodeGraphAdvance are host arrays too.
namespace KvPool {

  public partial class Pool {
    /// <summary>Creates a pool whose buffers come from a kvpool_allocator (pool.h).</summary>
    /// <param name="json">The configuration (docs/config.md).</param>
    /// <param name="allocator">The address of a kvpool_allocator struct made in C (its callbacks are
    /// C functions: custom allocators cannot be written in C#), or IntPtr.Zero for the default
    /// allocator, which makes this <c>new Pool(json)</c>.</param>
    /// <exception cref="KvPoolException">Status.InvalidArgument for a bad allocator struct, else as
    /// the constructor.</exception>
    public static Pool WithAllocator(string json, global::System.IntPtr allocator) {
      global::System.IntPtr handle;
      Kvpool.kvpool_create_with_allocator(json, allocator, out handle);
      return new Pool(handle, true);
    }

    /// <summary>Waits until everything enqueued on stream has finished (CPU pools: returns at once).</summary>
    /// <exception cref="KvPoolException">Status.DeviceFault if a device-side check failed, Status.Cuda
    /// for a CUDA error.</exception>
    public void Synchronize(global::System.IntPtr stream) {
      Kvpool.kvpool_synchronize(this, stream);
    }

    /// <summary>Free-list pages an extend batch takes (tokens for page size 1): the capacity
    /// ExtendAsync's newPages needs. Host arithmetic only.</summary>
    public ulong ExtendPages(long[] prefixLensHost, long[] seqLensHost) {
      SameBatch(prefixLensHost, seqLensHost, "kvalloc_extend_pages");
      ulong pages;
      Kvpool.kvalloc_extend_pages(this, prefixLensHost, Len(prefixLensHost), seqLensHost, Len(seqLensHost), out pages);
      return pages;
    }

    /// <summary>Allocates the new slots of a prefill batch on the device, with Extend's result.</summary>
    /// <param name="prefixLensHost">Host copy of the prefix lengths (capacity check).</param>
    /// <param name="seqLensHost">Host copy of the new lengths.</param>
    /// <param name="prefixLens">Address: prefix lengths (int64, one per request).</param>
    /// <param name="seqLens">Address: new lengths.</param>
    /// <param name="lastLocs">Address: slot of each request's last prefix token, or -1.</param>
    /// <param name="slots">Address: receives slotsLen = sum(seqLens - prefixLens) slots, request-major.</param>
    /// <param name="slotsLen">Number of new slots.</param>
    /// <param name="newPages">Address (IntPtr.Zero for none): receives the ids of the pages taken.</param>
    /// <param name="newPagesLen">Capacity of newPages (at least ExtendPages).</param>
    /// <param name="stream">cudaStream_t (IntPtr.Zero: default stream).</param>
    /// <exception cref="KvPoolException">Status.OutOfMemory (nothing changes), InvalidArgument, Unsupported.</exception>
    public void ExtendAsync(long[] prefixLensHost, long[] seqLensHost, global::System.IntPtr prefixLens,
                            global::System.IntPtr seqLens, global::System.IntPtr lastLocs, global::System.IntPtr slots,
                            ulong slotsLen, global::System.IntPtr newPages, ulong newPagesLen,
                            global::System.IntPtr stream) {
      SameBatch(prefixLensHost, seqLensHost, "kvalloc_extend_async");
      Kvpool.kvalloc_extend_async(this, prefixLensHost, Len(prefixLensHost), seqLensHost, Len(seqLensHost), prefixLens,
                                  seqLens, lastLocs, slots, slotsLen, newPages, newPagesLen, stream);
    }

    /// <summary>Allocates one decode slot per request on the device, with Decode's result: seqLens
    /// (lengths including the new token), lastLocs and slots hold seqLensHost.Length values; newPages
    /// (IntPtr.Zero for none) receives the ids of the pages taken.</summary>
    public void DecodeAsync(long[] seqLensHost, global::System.IntPtr seqLens, global::System.IntPtr lastLocs,
                            global::System.IntPtr slots, global::System.IntPtr newPages, ulong newPagesLen,
                            global::System.IntPtr stream) {
      NotNull(seqLensHost, "seqLensHost");
      Kvpool.kvalloc_decode_async(this, seqLensHost, Len(seqLensHost), seqLens, lastLocs, slots, newPages, newPagesLen,
                                  stream);
    }

    /// <summary>Allocates n slots on the device into the address slots, with Alloc's result.</summary>
    public void AllocAsync(global::System.IntPtr slots, ulong n, global::System.IntPtr stream) {
      Kvpool.kvalloc_alloc_async(this, slots, n, stream);
    }

    /// <summary>Gives n pages (page ids: slot / page_size, e.g. an extend's newPages) back on the
    /// device, in the allocator's order.</summary>
    public void FreePagesAsync(global::System.IntPtr pages, ulong n, global::System.IntPtr stream) {
      Kvpool.kvalloc_free_pages_async(this, pages, n, stream);
    }

    /// <summary>Writes a batch's new slots into the request table on the device, like ReqWriteBatch:
    /// rows (int32), prefixLens and seqLens hold batch values; prefixSlots (IntPtr.Zero for none) and
    /// extendSlots hold prefixSlotsLen and extendSlotsLen slots, request-major.</summary>
    public void ReqWriteBatchAsync(global::System.IntPtr rows, global::System.IntPtr prefixLens,
                                   global::System.IntPtr seqLens, ulong batch, global::System.IntPtr prefixSlots,
                                   ulong prefixSlotsLen, global::System.IntPtr extendSlots, ulong extendSlotsLen,
                                   global::System.IntPtr stream) {
      Kvpool.kvreq_write_batch_async(this, rows, prefixLens, seqLens, batch, prefixSlots, prefixSlotsLen, extendSlots,
                                     extendSlotsLen, stream);
    }

    /// <summary>Writes into lastLocs the slot of each request's last prefix token (-1 for an empty
    /// prefix), like LastLoc: rows (int32), prefixLens and lastLocs hold batch values.</summary>
    public void LastLocAsync(global::System.IntPtr rows, global::System.IntPtr prefixLens, ulong batch,
                             global::System.IntPtr lastLocs, global::System.IntPtr stream) {
      Kvpool.kvreq_last_loc_async(this, rows, prefixLens, batch, lastLocs, stream);
    }

    /// <summary>Writes K and V rows of one layer at n slots, like SetKv: k and v hold kBytes and
    /// vBytes bytes of srcDtype data (mla/double_sparse: whole rows in k, v IntPtr.Zero).</summary>
    public void SetKvAsync(int layer, global::System.IntPtr slots, ulong n, global::System.IntPtr k, ulong kBytes,
                           global::System.IntPtr v, ulong vBytes, DType srcDtype, float kScale, float vScale,
                           global::System.IntPtr stream) {
      Kvpool.kvpool_set_kv_async(this, layer, slots, n, k, kBytes, v, vBytes, (int)srcDtype, kScale, vScale, stream);
    }

    /// <summary>mla/nsa: writes the nope and rope parts of n rows, like SetMlaKv.</summary>
    public void SetMlaKvAsync(int layer, global::System.IntPtr slots, ulong n, global::System.IntPtr nope,
                              ulong nopeBytes, global::System.IntPtr rope, ulong ropeBytes, DType srcDtype,
                              global::System.IntPtr stream) {
      Kvpool.kvpool_set_mla_kv_async(this, layer, slots, n, nope, nopeBytes, rope, ropeBytes, (int)srcDtype, stream);
    }

    /// <summary>Gathers K and V rows of one layer at n slots into k and v (mla: v IntPtr.Zero), like GetKv.</summary>
    public void GetKvAsync(int layer, global::System.IntPtr slots, ulong n, global::System.IntPtr k, ulong kBytes,
                           global::System.IntPtr v, ulong vBytes, DType dstDtype, global::System.IntPtr stream) {
      Kvpool.kvpool_get_kv_async(this, layer, slots, n, k, kBytes, v, vBytes, (int)dstDtype, stream);
    }

    /// <summary>For every layer: row[dst[i]] = old row[src[i]] (overlaps are safe), like MoveKv.</summary>
    public void MoveKvAsync(global::System.IntPtr dst, ulong dstLen, global::System.IntPtr src, ulong srcLen,
                            global::System.IntPtr stream) {
      Kvpool.kvpool_move_kv_async(this, dst, dstLen, src, srcLen, stream);
    }

    /// <summary>Allocates n mamba state slots with MambaAlloc's ids (host values, returned); zeroing
    /// their states is enqueued on the stream. hybrid_linear pools only.</summary>
    /// <exception cref="KvPoolException">Status.OutOfMemory (nothing changes), Unsupported.</exception>
    public int[] MambaAllocAsync(int n, global::System.IntPtr stream) {
      int[] slots = new int[Count(n, "n")];
      Kvpool.kvpool_mamba_alloc_async(this, slots, Len(slots), stream);
      return slots;
    }

    /// <summary>Allocates one state slot (a host id, returned) whose states become a copy of src's,
    /// copied on the stream, like MambaFork.</summary>
    /// <exception cref="KvPoolException">Status.InvalidArgument for a src that is not allocated, else
    /// as MambaAllocAsync.</exception>
    public int MambaForkAsync(int src, global::System.IntPtr stream) {
      int dst;
      Kvpool.kvpool_mamba_fork_async(this, src, out dst, stream);
      return dst;
    }

    /// <summary>For each i: copies every layer's state of slot src[i] to slot dst[i], like MambaCopy:
    /// src and dst hold srcLen and dstLen (= srcLen) int32 slots; the destinations must be distinct
    /// and must not be sources of the same call.</summary>
    public void MambaCopyAsync(global::System.IntPtr src, ulong srcLen, global::System.IntPtr dst, ulong dstLen,
                               global::System.IntPtr stream) {
      Kvpool.kvpool_mamba_copy_async(this, src, srcLen, dst, dstLen, stream);
    }

    /// <summary>A decode step that a CUDA graph can capture once and replay: the lengths, lastLocs
    /// and the free-list position are read (and the page count and capacity checked) when the step
    /// runs; a replay past the watermark faults the pool (Status.DeviceFault). Same slots as
    /// DecodeAsync for the same lengths. The host counters do not move: after the steps ran, and
    /// before any other allocator call, call DecodeGraphAdvance. On a CPU pool it is Decode at
    /// once.</summary>
    /// <param name="batch">Number of requests.</param>
    /// <param name="seqLens">Address: lengths including the new token (int64, batch values).</param>
    /// <param name="lastLocs">Address: slot of token seq-2 (-1 when seq is 1).</param>
    /// <param name="slots">Address: receives one slot per request.</param>
    /// <param name="stream">cudaStream_t (IntPtr.Zero: default stream), the capturing stream.</param>
    /// <exception cref="KvPoolException">Status.OutOfMemory (CPU pools), InvalidArgument, Unsupported,
    /// DeviceFault.</exception>
    public void DecodeGraphAsync(ulong batch, global::System.IntPtr seqLens, global::System.IntPtr lastLocs,
                                 global::System.IntPtr slots, global::System.IntPtr stream) {
      Kvpool.kvalloc_decode_graph_async(this, batch, seqLens, lastLocs, slots, stream);
    }

    /// <summary>How many consecutive DecodeGraphAsync steps fit in the free list (a graph's
    /// watermark): step k gives every request one more token (lengths seqLensHost[i] + k). Host
    /// arithmetic, no synchronization.</summary>
    /// <param name="seqLensHost">Lengths at the first step, including its new token (each >= 1; not
    /// empty).</param>
    /// <exception cref="KvPoolException">Status.InvalidArgument (an empty batch, a length below 1),
    /// Unsupported.</exception>
    public ulong DecodeWatermark(long[] seqLensHost) {
      NotNull(seqLensHost, "seqLensHost");
      ulong steps;
      Kvpool.kvalloc_decode_watermark(this, seqLensHost, Len(seqLensHost), out steps);
      return steps;
    }

    /// <summary>Records that steps DecodeGraphAsync steps ran, from the lengths seqLensHost at the
    /// first of them: the host counters advance as the device cursor did. On a CPU pool, which
    /// allocated at each step, it only checks its arguments.</summary>
    /// <exception cref="KvPoolException">Status.InvalidArgument, Unsupported, DeviceFault.</exception>
    public void DecodeGraphAdvance(long[] seqLensHost, ulong steps) {
      NotNull(seqLensHost, "seqLensHost");
      Kvpool.kvalloc_decode_graph_advance(this, seqLensHost, Len(seqLensHost), steps);
    }

    /// <summary>SeqExtend with the request-table writes enqueued on the stream and the new slots
    /// written to the address slots: request seqs[i] gets chunkLens[i] (>= 1) more prompt tokens.
    /// seqs and chunkLens are host arrays; the new slots are decided on the host exactly as SeqExtend
    /// decides them. All or nothing for the batch.</summary>
    /// <param name="seqs">Request ids (host array, each once).</param>
    /// <param name="chunkLens">Tokens to compute per request (host array).</param>
    /// <param name="slots">Address: receives slotsLen = sum(chunkLens) slots (int64), request-major.</param>
    /// <param name="slotsLen">Number of new slots.</param>
    /// <param name="stream">cudaStream_t (IntPtr.Zero: default stream).</param>
    /// <exception cref="KvPoolException">Status.OutOfMemory (nothing changes), InvalidArgument.</exception>
    public void SeqExtendAsync(ulong[] seqs, long[] chunkLens, global::System.IntPtr slots, ulong slotsLen,
                               global::System.IntPtr stream) {
      NotNull(seqs, "seqs");
      NotNull(chunkLens, "chunkLens");
      Kvpool.kvseq_extend_async(this, seqs, Len(seqs), chunkLens, Len(chunkLens), slots, slotsLen, stream);
    }

    /// <summary>SeqDecode with the request-table writes enqueued on the stream: appends tokens[i] to
    /// request seqs[i] (host arrays) and writes one slot per request to the address slots (slotsLen =
    /// seqs.Length int64 values).</summary>
    public void SeqDecodeAsync(ulong[] seqs, int[] tokens, global::System.IntPtr slots, ulong slotsLen,
                               global::System.IntPtr stream) {
      NotNull(seqs, "seqs");
      NotNull(tokens, "tokens");
      Kvpool.kvseq_decode_async(this, seqs, Len(seqs), tokens, Len(tokens), slots, slotsLen, stream);
    }

    /// <summary>The host length arrays of one batch must have one length each per request.</summary>
    private static void SameBatch(long[] prefixLensHost, long[] seqLensHost, string function) {
      NotNull(prefixLensHost, "prefixLensHost");
      NotNull(seqLensHost, "seqLensHost");
      if (prefixLensHost.Length != seqLensHost.Length) {
        throw new KvPoolException((int)Status.InvalidArgument, function + ": prefixLensHost has " +
                                  prefixLensHost.Length + " lengths, seqLensHost " + seqLensHost.Length);
      }
    }
  }
}
