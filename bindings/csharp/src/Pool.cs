// Pool: the idiomatic half of the partial class SWIG generates for struct
// kvpool (the other half holds the handle and Dispose). Every method calls an
// internal raw function of Kvpool; a failing status throws KvPoolException
// with the code and message of that very call. Arrays are blittable: the
// P/Invoke marshaller pins them and C reads/writes them in place. Like the C
// handle, a Pool is used by one thread at a time.
namespace KvPool {

  public partial class Pool {
    /// <summary>Creates a pool from a JSON configuration (docs/config.md).</summary>
    /// <exception cref="KvPoolException">Status.Config for a malformed or invalid configuration.</exception>
    public Pool(string json) : this(Create(json), true) {
    }

    /// <summary>Creates a pool from a JSON configuration file.</summary>
    /// <exception cref="KvPoolException">Status.Io if the file cannot be read.</exception>
    public static Pool FromFile(string path) {
      global::System.IntPtr handle;
      Kvpool.kvpool_create_from_file(path, out handle);
      return new Pool(handle, true);
    }

    private static global::System.IntPtr Create(string json) {
      global::System.IntPtr handle;
      Kvpool.kvpool_create(json, out handle);
      return handle;
    }

    /// <summary>Name of the backend the pool runs on: "cpu" or "cuda".</summary>
    public string Backend() {
      return Kvpool.kvpool_backend(this);
    }

    /// <summary>The plan (sizing) this pool was created with.</summary>
    public PlanInfo Plan() {
      PlanInfo info = new PlanInfo();
      Kvpool.kvpool_get_plan(this, info);
      return info;
    }

    /// <summary>Validates a configuration and computes its sizing without allocating.</summary>
    public static PlanInfo Plan(string json) {
      PlanInfo info = new PlanInfo();
      Kvpool.kvpool_plan(json, info);
      return info;
    }

    // ------------------------------------------------------------------
    // Allocator (alloc.h)
    // ------------------------------------------------------------------

    /// <summary>The allocator this pool uses (token, paged or swa).</summary>
    public AllocKind AllocKind() {
      int kind;
      Kvpool.kvalloc_get_kind(this, out kind);
      return (global::KvPool.AllocKind)kind;
    }

    /// <summary>Free tokens: (free + deferred pages) x page_size.</summary>
    /// <exception cref="KvPoolException">Status.Unsupported for a swa pool (use SwaAvailable).</exception>
    public ulong Available() {
      ulong tokens;
      Kvpool.kvalloc_available(this, out tokens);
      return tokens;
    }

    /// <summary>Free slots of both pools of a swa allocator.</summary>
    public SwaAvailability SwaAvailable() {
      ulong full, swa;
      Kvpool.kvalloc_swa_available(this, out full, out swa);
      return new SwaAvailability(full, swa);
    }

    /// <summary>Allocates n slots (paged: a multiple of page_size).</summary>
    /// <exception cref="KvPoolException">Status.OutOfMemory if fewer are free (nothing changes).</exception>
    public long[] Alloc(int n) {
      long[] slots = new long[Count(n, "n")];
      Kvpool.kvalloc_alloc(this, slots, Len(slots));
      return slots;
    }

    /// <summary>Frees slots (paged: the whole pages they lie in).</summary>
    /// <exception cref="KvPoolException">Status.InvalidArgument for a double free, a reserved or
    /// never-allocated slot (nothing is freed).</exception>
    public void Free(long[] slots) {
      Kvpool.kvalloc_free(this, slots, Len(slots));
    }

    /// <summary>Allocates the new slots of a prefill batch (SGLang's alloc_extend); they come
    /// back request-major, sum(seqLens - prefixLens) of them.</summary>
    /// <param name="prefixLens">Tokens each request already has.</param>
    /// <param name="seqLens">Each request's new total length.</param>
    /// <param name="lastLocs">Slot of each request's last prefix token, or -1.</param>
    public long[] Extend(long[] prefixLens, long[] seqLens, long[] lastLocs) {
      long[] slots = new long[NewTokens(prefixLens, seqLens, "kvalloc_extend")];
      Kvpool.kvalloc_extend(this, prefixLens, Len(prefixLens), seqLens, Len(seqLens), lastLocs, Len(lastLocs),
                            slots, Len(slots));
      return slots;
    }

    /// <summary>Allocates one decode slot per request (SGLang's alloc_decode).</summary>
    /// <param name="seqLens">Lengths including the new token.</param>
    /// <param name="lastLocs">Slot of each request's token seq-2 (-1 when seq is 1).</param>
    public long[] Decode(long[] seqLens, long[] lastLocs) {
      long[] slots = new long[NotNull(seqLens, "seqLens").Length];
      Kvpool.kvalloc_decode(this, seqLens, Len(seqLens), lastLocs, Len(lastLocs), slots, Len(slots));
      return slots;
    }

    /// <summary>swa: frees the window slots of tokens that slid out of the window.</summary>
    public void FreeSwa(long[] slots) {
      Kvpool.kvalloc_free_swa(this, slots, Len(slots));
    }

    /// <summary>swa: the window slot of each full slot (0 = none).</summary>
    public long[] TranslateSwa(long[] slots) {
      long[] window = new long[NotNull(slots, "slots").Length];
      Kvpool.kvalloc_translate_swa(this, slots, Len(slots), window, Len(window));
      return window;
    }

    /// <summary>Starts a free group: later frees become available together at FreeGroupEnd.</summary>
    public void FreeGroupBegin() {
      Kvpool.kvalloc_free_group_begin(this);
    }

    /// <summary>Ends the free group and frees everything collected in it.</summary>
    public void FreeGroupEnd() {
      Kvpool.kvalloc_free_group_end(this);
    }

    /// <summary>Snapshots the allocator; Restore(token) reverts later allocations and frees.</summary>
    public ulong Backup() {
      ulong token;
      Kvpool.kvalloc_backup(this, out token);
      return token;
    }

    /// <summary>Reverts every allocation and free since Backup returned token.</summary>
    public void Restore(ulong token) {
      Kvpool.kvalloc_restore(this, token);
    }

    /// <summary>Merges the deferred frees into the free list and sorts it (need_sort mode).</summary>
    public void MergeAndSort() {
      Kvpool.kvalloc_merge_and_sort(this);
    }

    /// <summary>Makes every slot free again (free list, deferred frees, group and snapshot reset).</summary>
    public void ClearAllocator() {
      Kvpool.kvalloc_clear(this);
    }

    /// <summary>A copy of one of the allocator's lists, front first (page ids; slot ids for page_size 1).</summary>
    public long[] FreeList(AllocList list) {
      long[] ids = new long[64];
      while (true) {
        ulong length = 0;
        try {
          Kvpool.kvalloc_free_list(this, (int)list, ids, Len(ids), out length);
        } catch (KvPoolException e) {
          // BUFFER_TOO_SMALL reports the needed length (written before the exception is raised).
          if (e.Status != Status.BufferTooSmall || length <= (ulong)ids.Length || length > int.MaxValue) throw;
          ids = new long[length];
          continue;
        }
        if ((ulong)ids.Length != length) global::System.Array.Resize(ref ids, (int)length);
        return ids;
      }
    }

    // ------------------------------------------------------------------
    // Request rows (req.h)
    // ------------------------------------------------------------------

    /// <summary>Request rows that can be allocated now.</summary>
    public ulong ReqAvailable() {
      ulong rows;
      Kvpool.kvreq_available(this, out rows);
      return rows;
    }

    /// <summary>Allocates n request rows (never row 0).</summary>
    /// <exception cref="KvPoolException">Status.OutOfMemory if fewer are free (nothing changes).</exception>
    public int[] ReqAlloc(int n) {
      int[] rows = new int[Count(n, "n")];
      Kvpool.kvreq_alloc(this, rows, Len(rows));
      return rows;
    }

    /// <summary>Returns rows to the back of the free list.</summary>
    public void ReqFree(int[] rows) {
      Kvpool.kvreq_free(this, rows, Len(rows));
    }

    /// <summary>Writes slot ids into columns start.. of an allocated row.</summary>
    public void ReqWrite(int row, ulong start, long[] slots) {
      Kvpool.kvreq_write(this, row, start, slots, Len(slots));
    }

    /// <summary>Reads n columns from start of an allocated row.</summary>
    public long[] ReqRead(int row, ulong start, int n) {
      long[] slots = new long[Count(n, "n")];
      Kvpool.kvreq_read(this, row, start, slots, Len(slots));
      return slots;
    }

    /// <summary>Frees every row (the table contents are kept).</summary>
    public void ReqClear() {
      Kvpool.kvreq_clear(this);
    }

    /// <summary>Writes a batch's prefix and new slots into its rows (SGLang's write_cache_indices).</summary>
    /// <param name="prefixSlots">All prefixes' slots, concatenated.</param>
    /// <param name="extendSlots">All new slots, concatenated (what Extend returned).</param>
    public void ReqWriteBatch(int[] rows, long[] prefixLens, long[] seqLens, long[] prefixSlots, long[] extendSlots) {
      Kvpool.kvreq_write_batch(this, rows, Len(rows), prefixLens, Len(prefixLens), seqLens, Len(seqLens),
                               prefixSlots, Len(prefixSlots), extendSlots, Len(extendSlots));
    }

    /// <summary>The slot of each request's last prefix token, or -1 for an empty prefix (input of Extend).</summary>
    public long[] LastLoc(int[] rows, long[] prefixLens) {
      long[] lastLocs = new long[NotNull(rows, "rows").Length];
      Kvpool.kvreq_last_loc(this, rows, Len(rows), prefixLens, Len(prefixLens), lastLocs, Len(lastLocs));
      return lastLocs;
    }

    // ------------------------------------------------------------------
    // Mamba state slots and hybrid rows (mamba.h); hybrid_linear pools only
    // ------------------------------------------------------------------

    /// <summary>Free mamba state slots.</summary>
    public ulong MambaAvailable() {
      ulong slots;
      Kvpool.kvpool_mamba_available(this, out slots);
      return slots;
    }

    /// <summary>Allocates n state slots (zeroed).</summary>
    public int[] MambaAlloc(int n) {
      int[] slots = new int[Count(n, "n")];
      Kvpool.kvpool_mamba_alloc(this, slots, Len(slots));
      return slots;
    }

    /// <summary>Returns state slots to the free list.</summary>
    public void MambaFree(int[] slots) {
      Kvpool.kvpool_mamba_free(this, slots, Len(slots));
    }

    /// <summary>Copies every layer's state from src to dst.</summary>
    public void MambaCopy(int src, int dst) {
      Kvpool.kvpool_mamba_copy(this, src, dst);
    }

    /// <summary>Allocates one slot holding a copy of src; returns it.</summary>
    public int MambaFork(int src) {
      int dst;
      Kvpool.kvpool_mamba_fork(this, src, out dst);
      return dst;
    }

    /// <summary>Writes one layer's conv and temporal state of a slot (bytes in their configured dtypes).</summary>
    public void MambaWrite(int layer, int slot, byte[] conv, byte[] ssm) {
      Kvpool.kvpool_mamba_write(this, layer, slot, conv, Len(conv), ssm, Len(ssm));
    }

    /// <summary>Reads one layer's conv and temporal state of a slot into conv and ssm.</summary>
    public void MambaRead(int layer, int slot, byte[] conv, byte[] ssm) {
      Kvpool.kvpool_mamba_read(this, layer, slot, conv, Len(conv), ssm, Len(ssm));
    }

    /// <summary>Allocates request rows with their state slots (SGLang's HybridReqToTokenPool.alloc).</summary>
    /// <param name="reuse">Per request a state slot it keeps, or -1 for a fresh one.</param>
    public HybridRows ReqAllocHybrid(int[] reuse) {
      int n = NotNull(reuse, "reuse").Length;
      int[] rows = new int[n];
      int[] slots = new int[n];
      Kvpool.kvreq_alloc_hybrid(this, reuse, Len(reuse), rows, Len(rows), slots, Len(slots));
      return new HybridRows(rows, slots);
    }

    /// <summary>Frees hybrid rows, and with freeState their state slots.</summary>
    /// <param name="keep">With ping-pong slots: index (0 or 1) of the one to keep, or -1.</param>
    public void ReqFreeHybrid(int[] rows, bool freeState, int keep) {
      Kvpool.kvreq_free_hybrid(this, rows, Len(rows), freeState ? 1 : 0, keep);
    }

    /// <summary>The state slot and ping-pong slots of an allocated hybrid row.</summary>
    public MambaSlots ReqMambaSlots(int row) {
      int slot;
      int[] pingPong = new int[2];
      Kvpool.kvreq_mamba_slots(this, row, out slot, pingPong, Len(pingPong));
      return new MambaSlots(slot, pingPong);
    }

    // ------------------------------------------------------------------
    // Self-check and statistics (check.h)
    // ------------------------------------------------------------------

    /// <summary>Verifies the ownership and accounting invariants; returns the one-line summary,
    /// e.g. "ok: 2 pages held, 14 free, 0 rows held".</summary>
    /// <exception cref="KvPoolException">Status.CheckFailed whose message is the report (every
    /// leaked or double-owned slot, page, row or state slot, one per line).</exception>
    public string Check() {
      byte[] report = new byte[4096];
      while (true) {
        try {
          Kvpool.kvpool_check(this, report, Len(report));
        } catch (KvPoolException e) {
          string failed = Utf8.FromC(report);
          if (e.Status == Status.CheckFailed && failed.Length > 0 && !e.Message.Contains(failed)) {
            throw new KvPoolException(e.Code, e.Message + "\n" + failed);
          }
          throw;
        }
        string text = Utf8.FromC(report);
        // A full buffer may have cut the report: try again with more room.
        if (text.Length < report.Length - 1 || report.Length >= 1 << 24) return text;
        report = new byte[report.Length * 4];
      }
    }

    /// <summary>Availability, sizes and counters of this pool.</summary>
    public Stats Stats() {
      Stats stats = new Stats();
      Kvpool.kvpool_get_stats(this, stats);
      return stats;
    }

    /// <summary>The pool's counters and sizes in the Prometheus text exposition format (version
    /// 0.0.4), ready to serve on a /metrics endpoint with the content type
    /// "text/plain; version=0.0.4" (metrics.h; docs/services.md lists every family). A read: it
    /// changes nothing.</summary>
    public string MetricsText() {
      byte[] text = new byte[16384];
      while (true) {
        ulong length = 0;
        try {
          Kvpool.kvpool_metrics_text(this, text, Len(text), out length);
        } catch (KvPoolException e) {
          // Too small: the library told the length; counters may grow before the next call.
          if (e.Status != Status.BufferTooSmall || length < (ulong)text.Length || length > int.MaxValue - 1024) throw;
          text = new byte[length + 1024];
          continue;
        }
        return System.Text.Encoding.UTF8.GetString(text, 0, (int)length);
      }
    }

    // ------------------------------------------------------------------
    // KV buffers (buffers.h). Data passes as bytes in the dtype the call
    // names, rows contiguous (Buffer.BlockCopy converts float[] and byte[]).
    // ------------------------------------------------------------------

    /// <summary>Describes one buffer of the pool; layer is a global layer id (ignored for
    /// ReqTable and SwaMapping).</summary>
    /// <exception cref="KvPoolException">Status.Unsupported if the pool has no such buffer.</exception>
    public BufferInfo Buffer(BufferKind kind, int layer) {
      BufferDescriptor d = new BufferDescriptor();
      try {
        Kvpool.kvpool_get_buffer(this, (int)kind, layer, d);
        int ndim = d.Ndim;
        long[] shape = new long[ndim];
        long[] strides = new long[ndim];
        for (int i = 0; i < ndim; i++) {
          shape[i] = d.ShapeAt(i);
          strides[i] = d.StrideAt(i);
        }
        return new BufferInfo((DType)d.Dtype, new global::System.IntPtr((long)d.DataAddress()), d.DeviceType,
                              d.DeviceId, shape, strides, d.Bytes);
      } finally {
        d.Dispose();
      }
    }

    /// <summary>Writes K and V rows of one layer at the given slots (SGLang's set_kv_buffer): k and v
    /// hold slots.Length x heads x head_dim values of srcDtype (mla: k whole rows, v null); values of
    /// another dtype than the pool's are divided by their scale and cast.</summary>
    public void SetKv(int layer, long[] slots, byte[] k, byte[] v, DType srcDtype, float kScale = 1.0f, float vScale = 1.0f) {
      Kvpool.kvpool_set_kv(this, layer, slots, Len(slots), k, Len(k), v, Len(v), (int)srcDtype, kScale, vScale);
    }

    /// <summary>mla/nsa: writes the nope and rope parts of each row.</summary>
    public void SetMlaKv(int layer, long[] slots, byte[] nope, byte[] rope, DType srcDtype) {
      Kvpool.kvpool_set_mla_kv(this, layer, slots, Len(slots), nope, Len(nope), rope, Len(rope), (int)srcDtype);
    }

    /// <summary>double_sparse: writes label rows [heads, heavy_channels] in the pool's kv_dtype.</summary>
    public void SetLabel(int layer, long[] slots, byte[] labels) {
      Kvpool.kvpool_set_label(this, layer, slots, Len(slots), labels, Len(labels));
    }

    /// <summary>nsa: writes indexer keys (128 fp8 bytes per token) and one scale per token.</summary>
    public void SetIndexer(int layer, long[] slots, byte[] keys, float[] scales) {
      Kvpool.kvpool_set_indexer(this, layer, slots, Len(slots), keys, Len(keys), scales, Len(scales));
    }

    /// <summary>Gathers K and V rows of one layer into k and v, converted to dstDtype (mla: v null).</summary>
    public void GetKv(int layer, long[] slots, byte[] k, byte[] v, DType dstDtype) {
      Kvpool.kvpool_get_kv(this, layer, slots, Len(slots), k, Len(k), v, Len(v), (int)dstDtype);
    }

    /// <summary>For every layer: row[dst[i]] = old row[src[i]] (overlaps are safe).</summary>
    public void MoveKv(long[] dst, long[] src) {
      Kvpool.kvpool_move_kv(this, dst, Len(dst), src, Len(src));
    }

    /// <summary>Bytes CopyToHost needs for numSlots tokens.</summary>
    public ulong HostCopyBytes(ulong numSlots) {
      ulong bytes;
      Kvpool.kvpool_host_copy_bytes(this, numSlots, out bytes);
      return bytes;
    }

    /// <summary>Copies the KV of some slots, every layer, into a new array (retraction).</summary>
    public byte[] CopyToHost(long[] slots) {
      ulong size = HostCopyBytes((ulong)NotNull(slots, "slots").Length);
      if (size > int.MaxValue) {
        throw new KvPoolException((int)Status.HostMemory, "kvpool_copy_to_host: " + size + " bytes do not fit an array");
      }
      byte[] host = new byte[size];
      CopyToHost(slots, host);
      return host;
    }

    /// <summary>Copies the KV of some slots into host (exactly HostCopyBytes bytes).</summary>
    public void CopyToHost(long[] slots, byte[] host) {
      Kvpool.kvpool_copy_to_host(this, slots, Len(slots), host, Len(host));
    }

    /// <summary>Scatters a CopyToHost copy back, possibly at other slots.</summary>
    public void LoadFromHost(long[] slots, byte[] host) {
      Kvpool.kvpool_load_from_host(this, slots, Len(slots), host, Len(host));
    }

    // ------------------------------------------------------------------
    // Radix prefix cache and KV events (radix.h); docs/prefix_cache.md.
    // Keys are int tokens in a namespace, extraKey (null = the default one);
    // node handles are opaque ulong values.
    // ------------------------------------------------------------------

    /// <summary>Values per event that kvpool_take_events_flat writes (kvpool.i).</summary>
    private const int EventFields = 6;

    /// <summary>The longest cached prefix of tokens (whole pages) and the node where it ends. A node
    /// matched part-way is split; the matched path becomes most recently used.</summary>
    /// <param name="extraKey">Namespace (LoRA id, cache salt), or null for the default one.</param>
    /// <exception cref="KvPoolException">Status.Unsupported if the pool has no radix cache.</exception>
    public MatchResult Match(int[] tokens, string extraKey = null) {
      // tokens.Length always suffices.
      long[] slots = new long[NotNull(tokens, "tokens").Length];
      ulong matched, node;
      Kvpool.radix_match(this, tokens, Len(tokens), extraKey, slots, Len(slots), out matched, out node);
      if ((ulong)slots.Length != matched) global::System.Array.Resize(ref slots, (int)matched);
      return new MatchResult(slots, node);
    }

    /// <summary>Inserts a page-aligned key with one slot per token. The tree takes the slots of the
    /// new part; the caller keeps owning the first PrefixLength slots (duplicates).</summary>
    /// <param name="priority">For the "priority" eviction policy (higher stays longer).</param>
    /// <exception cref="KvPoolException">Status.InvalidArgument for a key that is not page-aligned,
    /// slots not allocated or already the tree's (nothing changes).</exception>
    public InsertResult Insert(int[] tokens, long[] slots, string extraKey = null, int priority = 0) {
      ulong prefix, node;
      Kvpool.radix_insert(this, tokens, Len(tokens), slots, Len(slots), extraKey, priority, out prefix, out node);
      return new InsertResult(prefix, node);
    }

    /// <summary>Protects a node and its ancestors from eviction (counted: unlock as often as locked).</summary>
    public void Lock(ulong node) {
      Kvpool.radix_lock(this, node);
    }

    /// <summary>Releases one Lock.</summary>
    /// <exception cref="KvPoolException">Status.InvalidArgument for a stale or unlocked node.</exception>
    public void Unlock(ulong node) {
      Kvpool.radix_unlock(this, node);
    }

    /// <summary>Evicts whole unlocked leaves in policy order until tokens are back in the allocator or
    /// none are left; returns the tokens freed (may exceed tokens).</summary>
    public ulong Evict(ulong tokens) {
      ulong evicted;
      Kvpool.radix_evict(this, tokens, out evicted);
      return evicted;
    }

    /// <summary>Tokens in the tree: evictable, protected and their total.</summary>
    public RadixSizes RadixSizes() {
      ulong evictable, protectedTokens, total;
      Kvpool.radix_sizes(this, out evictable, out protectedTokens, out total);
      return new RadixSizes(evictable, protectedTokens, total);
    }

    /// <summary>Match on a hybrid_linear pool: the longest prefix that ends at a node with a cached mamba
    /// state, and that state's slot (MatchResult.MambaSlot, owned by the tree). With cowSlot &gt;= 0 (a slot
    /// from MambaAlloc) the node's state is also copied into cowSlot (copy-on-write); -1 copies nothing.</summary>
    /// <exception cref="KvPoolException">Status.Unsupported if the pool has no mamba radix cache.</exception>
    public MatchResult MatchMamba(int[] tokens, string extraKey = null, int cowSlot = -1) {
      long[] slots = new long[NotNull(tokens, "tokens").Length];
      ulong matched, node;
      int state;
      Kvpool.radix_match_mamba(this, tokens, Len(tokens), extraKey, cowSlot, slots, Len(slots), out matched, out node, out state);
      if ((ulong)slots.Length != matched) global::System.Array.Resize(ref slots, (int)matched);
      return new MatchResult(slots, node, state);
    }

    /// <summary>Caches a sequence and the mamba state after its last token (hybrid_linear pools). As
    /// Insert the caller keeps the first PrefixLength slots; the tree takes mambaSlot too unless
    /// InsertResult.StateExisted.</summary>
    public InsertResult InsertMamba(int[] tokens, long[] slots, int mambaSlot, string extraKey = null) {
      ulong prefix, node;
      int exist;
      Kvpool.radix_insert_mamba(this, tokens, Len(tokens), slots, Len(slots), extraKey, mambaSlot, out prefix, out exist, out node);
      return new InsertResult(prefix, node, exist != 0);
    }

    /// <summary>Frees up to states cached mamba states, least recently used first (internal nodes become
    /// tombstones, leaves are evicted entirely); returns the states freed.</summary>
    public ulong EvictMamba(ulong states) {
      ulong evicted;
      Kvpool.radix_evict_mamba(this, states, out evicted);
      return evicted;
    }

    /// <summary>SGLang's swa insert (swa pools): the first prevPrefixLen slots are the tree's own from a
    /// match; of the rest the tree frees duplicates, revives unlocked tombstones and takes the new tail,
    /// so the caller owns none of them afterwards. Tokens before swaEvictedLen have no window slot.</summary>
    public InsertResult InsertSwa(int[] tokens, long[] slots, ulong prevPrefixLen, ulong swaEvictedLen, string extraKey = null) {
      ulong prefix, node;
      Kvpool.radix_insert_swa(this, tokens, Len(tokens), slots, Len(slots), extraKey, prevPrefixLen, swaEvictedLen, out prefix, out node);
      return new InsertResult(prefix, node);
    }

    /// <summary>Evicts on a swa pool: unlocked leaves until tokens full slots are freed, then, while fewer
    /// than swaTokens window slots were freed, window KV only (tombstones). Returns {full, window} freed.</summary>
    public ulong[] EvictSwa(ulong tokens, ulong swaTokens) {
      ulong full, window;
      Kvpool.radix_evict_swa(this, tokens, swaTokens, out full, out window);
      return new ulong[] { full, window };
    }

    /// <summary>The tree's second resource: mamba states (hybrid_linear) or window tokens (swa).</summary>
    public RadixSizes StateSizes() {
      ulong evictable, protectedCount;
      Kvpool.radix_state_sizes(this, out evictable, out protectedCount);
      return new RadixSizes(evictable, protectedCount, evictable + protectedCount);
    }

    /// <summary>Empties the tree, returning its slots to the allocator (emits AllBlocksCleared).</summary>
    /// <exception cref="KvPoolException">Status.InvalidArgument while a request is active or a node is locked.</exception>
    public void ResetCache() {
      Kvpool.radix_reset(this);
    }

    /// <summary>Drains the queued KV events, oldest first (needs prefix_cache.events).</summary>
    public KvEvent[] TakeEvents() {
      long[] fields = new long[16 * EventFields];
      int[] tokens = new int[256];
      ulong eventCount, tokenCount;
      while (true) {
        eventCount = 0;
        tokenCount = 0;
        try {
          Kvpool.kvpool_take_events_flat(this, fields, Len(fields), out eventCount, tokens, Len(tokens), out tokenCount);
          break;
        } catch (KvPoolException e) {
          // BUFFER_TOO_SMALL reports the needed sizes; the queue is unchanged.
          if (e.Status != Status.BufferTooSmall || eventCount > int.MaxValue / EventFields || tokenCount > int.MaxValue) throw;
          if (eventCount * EventFields > (ulong)fields.Length) fields = new long[eventCount * EventFields];
          if (tokenCount > (ulong)tokens.Length) tokens = new int[tokenCount];
        }
      }
      KvEvent[] events = new KvEvent[eventCount];
      for (int i = 0; i < events.Length; i++) {
        int f = i * EventFields;
        int[] page = new int[fields[f + 5]];
        global::System.Array.Copy(tokens, fields[f + 4], page, 0, page.Length);
        events[i] = new KvEvent((EventType)fields[f], fields[f + 2], fields[f + 3], fields[f + 1] != 0, page);
      }
      return events;
    }

    /// <summary>The page hash of KV events: SHA-256 over the parent page's digest (null for a first
    /// page) and each token as 4 little-endian bytes; its Id is what KvEvent.BlockHash carries. Safe
    /// from any thread.</summary>
    /// <param name="parent">The previous page's Digest, or null.</param>
    public static PageHash PageHash(int[] tokens, byte[] parent = null) {
      byte[] digest = new byte[32];
      long id;
      if (parent != null && parent.Length == 0) parent = null;
      Kvpool.radix_page_hash(tokens, Len(tokens), parent, Len(parent), digest, Len(digest), out id);
      return new PageHash(digest, id);
    }

    // ------------------------------------------------------------------
    // Requests (seq.h): Begin -> SeqExtend (prefill chunks) -> SeqDecode ->
    // Finish, or Abort / Retract. The library owns each request's slots,
    // row and lock. OutOfMemory from SeqExtend/SeqDecode changes nothing.
    // ------------------------------------------------------------------

    /// <summary>Starts a request: matches the longest cached prefix of its prompt (at most
    /// Length - 1 tokens) and locks it.</summary>
    /// <param name="extraKey">Prefix-cache namespace, or null for the default one.</param>
    public SeqBegin Begin(int[] tokens, string extraKey = null) {
      ulong seq, cached;
      Kvpool.kvseq_begin(this, tokens, Len(tokens), extraKey, out seq, out cached);
      return new SeqBegin(seq, cached);
    }

    /// <summary>Computes the next prompt chunk of each request of a batch (all or nothing); returns
    /// the new tokens' slots, request-major.</summary>
    /// <param name="chunkLens">Tokens to compute per request (>= 1).</param>
    /// <exception cref="KvPoolException">Status.OutOfMemory if rows or slots are short even after eviction.</exception>
    public long[] SeqExtend(ulong[] seqs, long[] chunkLens) {
      long total = 0;
      foreach (long c in NotNull(chunkLens, "chunkLens")) {
        total += global::System.Math.Max(0, c);
        if (total > int.MaxValue) {
          throw new KvPoolException((int)Status.OutOfMemory, "kvseq_extend: the batch needs more than " + int.MaxValue + " new slots");
        }
      }
      long[] slots = new long[total];
      Kvpool.kvseq_extend(this, seqs, Len(seqs), chunkLens, Len(chunkLens), slots, Len(slots));
      return slots;
    }

    /// <summary>Appends tokens[i] to request seqs[i] (a decode step); returns one slot per request.</summary>
    public long[] SeqDecode(ulong[] seqs, int[] tokens) {
      long[] slots = new long[NotNull(seqs, "seqs").Length];
      Kvpool.kvseq_decode(this, seqs, Len(seqs), tokens, Len(tokens), slots, Len(slots));
      return slots;
    }

    /// <summary>Finishes a request: caches its first committed tokens, releases the rest, forgets it.</summary>
    /// <exception cref="KvPoolException">Status.InvalidArgument for an unknown (e.g. already finished) request.</exception>
    public void Finish(ulong seq, ulong committed) {
      Kvpool.kvseq_finish(this, seq, committed);
    }

    /// <summary>Aborts a request: releases everything without caching, forgets it.</summary>
    public void Abort(ulong seq) {
      Kvpool.kvseq_abort(this, seq);
    }

    /// <summary>Retracts a request under memory pressure: releases as Abort does but keeps its tokens;
    /// returns the tokens found in the cache now (a later SeqExtend recomputes only the rest).</summary>
    public ulong Retract(ulong seq) {
      ulong cached;
      Kvpool.kvseq_retract(this, seq, out cached);
      return cached;
    }

    /// <summary>Row and lengths of a request.</summary>
    public SeqInfo SeqInfo(ulong seq) {
      SeqInfo info = new SeqInfo();
      Kvpool.kvseq_get_info(this, seq, info);
      return info;
    }

    /// <summary>The slots of a request's computed tokens, in token order.</summary>
    public long[] SeqSlots(ulong seq) {
      long[] slots = new long[64];
      while (true) {
        ulong length = 0;
        try {
          Kvpool.kvseq_get_slots(this, seq, slots, Len(slots), out length);
        } catch (KvPoolException e) {
          if (e.Status != Status.BufferTooSmall || length <= (ulong)slots.Length || length > int.MaxValue) throw;
          slots = new long[length];
          continue;
        }
        if ((ulong)slots.Length != length) global::System.Array.Resize(ref slots, (int)length);
        return slots;
      }
    }

    /// <summary>SGLang's scheduler accounting: Available + Evictable + Protected + Uncached == Capacity.</summary>
    public Accounting Accounting() {
      ulong available, evictable, protectedTokens, uncached, capacity;
      Kvpool.kvseq_accounting(this, out available, out evictable, out protectedTokens, out uncached, out capacity);
      return new Accounting(available, evictable, protectedTokens, uncached, capacity);
    }

    /// <summary>The mamba state slot a request owns (hybrid_linear pools): Begin filled it with the cached
    /// prefix's state (copy-on-write) or zeroes.</summary>
    public int SeqMambaSlot(ulong seq) {
      int slot;
      Kvpool.kvseq_mamba_slot(this, seq, out slot);
      return slot;
    }

    // ------------------------------------------------------------------
    // The host-memory tier (L2) of the radix cache (host.h); docs/host-tier.md.
    // With a host_cache section nodes are device-only, device+host or
    // host-only: Evict keeps backed-up nodes on the host, HostEvict drops
    // host-only leaves, HostLoadBack (and Begin, see SeqInfo.HostHit) brings
    // a host-only prefix back. Pools without a host tier throw
    // Status.Unsupported. Streams are cudaStream_t values as IntPtr
    // (IntPtr.Zero = the legacy default stream), as in the device.h calls;
    // node handles are those of the radix calls.
    // ------------------------------------------------------------------

    /// <summary>The host tier's sizes and counters.</summary>
    /// <exception cref="KvPoolException">Status.Unsupported if the pool has no host tier.</exception>
    public HostStats HostStats() {
      HostStats stats = new HostStats();
      Kvpool.kvhost_get_stats(this, stats);
      return stats;
    }

    /// <summary>Starts the backups that inserts since the last call asked for (never in the insert
    /// itself: the engine writes the KV after inserting), then releases the nodes of copies that have
    /// landed (with wait, after blocking until every copy in flight has landed); returns the number of
    /// copies released (always 0 on CPU pools, whose copies land at once).</summary>
    /// <exception cref="KvPoolException">Status.Cuda if a copy failed.</exception>
    public ulong HostPoll(bool wait = false) {
      ulong completed;
      Kvpool.kvhost_poll(this, wait ? 1 : 0, out completed);
      return completed;
    }

    /// <summary>Sets the compute stream: backups wait for the work already on it, and HostWaitLayer
    /// with IntPtr.Zero makes it wait. CPU pools ignore it.</summary>
    public void HostSetStream(global::System.IntPtr stream) {
      Kvpool.kvhost_set_stream(this, stream);
    }

    /// <summary>Moves load-backs to the next of the three load sets (once per batch, before the
    /// batch's Begin / HostLoadBack calls); returns the new current set (0, 1 or 2).</summary>
    public int HostNextLoadSet() {
      int set;
      Kvpool.kvhost_next_load_set(this, out set);
      return set;
    }

    /// <summary>The load set that load-backs go to now (0, 1 or 2).</summary>
    public int HostLoadSet() {
      int set;
      Kvpool.kvhost_load_set(this, out set);
      return set;
    }

    /// <summary>Makes stream (IntPtr.Zero: the compute stream of HostSetStream) wait until layer (a
    /// global layer id) of the loads of set has landed; the host does not block. CPU pools: nothing
    /// to wait for.</summary>
    /// <exception cref="KvPoolException">Status.InvalidArgument for a set outside 0..2 or a layer the
    /// pool does not hold.</exception>
    public void HostWaitLayer(int set, int layer, global::System.IntPtr stream) {
      Kvpool.kvhost_wait_layer(this, set, layer, stream);
    }

    /// <summary>Match that also reports the host-only part of the match: the tokens found after the
    /// device part in host-only nodes, and the node to pass to HostLoadBack.</summary>
    /// <param name="extraKey">Namespace, or null for the default one.</param>
    public HostMatchResult HostMatch(int[] tokens, string extraKey = null) {
      // tokens.Length always suffices.
      long[] slots = new long[NotNull(tokens, "tokens").Length];
      ulong matched, hostMatched, node, hostNode;
      Kvpool.kvhost_match(this, tokens, Len(tokens), extraKey, slots, Len(slots), out matched, out hostMatched,
                          out node, out hostNode);
      if ((ulong)slots.Length != matched) global::System.Array.Resize(ref slots, (int)matched);
      return new HostMatchResult(slots, node, hostMatched, hostNode);
    }

    /// <summary>Brings the host-only nodes that end at hostNode (from HostMatch) back to the device:
    /// fresh device slots (evicting unlocked device nodes if needed), owned by the tree at once.
    /// Nothing is loaded for fewer than 10 tokens or when the device cannot make room.</summary>
    /// <exception cref="KvPoolException">Status.InvalidArgument for a stale handle.</exception>
    public HostLoadResult HostLoadBack(ulong hostNode) {
      long[] slots = new long[64];
      while (true) {
        ulong loaded = 0, node = 0;
        try {
          Kvpool.kvhost_load_back(this, hostNode, slots, Len(slots), out loaded, out node);
        } catch (KvPoolException e) {
          // BUFFER_TOO_SMALL changed nothing and tells the size.
          if (e.Status != Status.BufferTooSmall || loaded <= (ulong)slots.Length || loaded > int.MaxValue) throw;
          slots = new long[loaded];
          continue;
        }
        if ((ulong)slots.Length != loaded) global::System.Array.Resize(ref slots, (int)loaded);
        return new HostLoadResult(slots, node);
      }
    }

    /// <summary>Deletes unlocked host-only leaves in policy order until tokens host tokens are freed
    /// (or none are left); returns the host tokens freed.</summary>
    public ulong HostEvict(ulong tokens) {
      ulong evicted;
      Kvpool.kvhost_evict(this, tokens, out evicted);
      return evicted;
    }

    /// <summary>Where a node's tokens live.</summary>
    /// <exception cref="KvPoolException">Status.InvalidArgument for a stale handle.</exception>
    public HostNodeState HostNodeState(ulong node) {
      int onDevice, onHost;
      ulong tokens;
      Kvpool.kvhost_node_state(this, node, out onDevice, out onHost, out tokens);
      return new HostNodeState(onDevice != 0, onHost != 0, tokens);
    }

    // ------------------------------------------------------------------
    // The storage tier (L3) below the host tier (storage.h); docs/storage.md.
    // With a storage section (and a host_cache one) the host tier's pages are
    // backed up to a store shared by pools of the same model. A request's
    // prompt is prefetched into the host tier with StoragePrefetch, polled
    // with StoragePrefetchPoll and ended with StoragePrefetchEnd, which puts
    // what landed into the tree as host-only nodes; Begin then loads them back
    // (see SeqInfo.StorageHit). Pools without a storage tier throw
    // Status.Unsupported. Only StorageFlush and StorageClear wait for storage I/O.
    // ------------------------------------------------------------------

    /// <summary>The counters of the storage tier and its backend.</summary>
    /// <exception cref="KvPoolException">Status.Unsupported if the pool has no storage tier.</exception>
    public StorageStats StorageStats() {
      StorageStats stats = new StorageStats();
      Kvpool.kvstore_get_stats(this, stats);
      return stats;
    }

    /// <summary>Starts reading the stored continuation of a prompt into the host tier and returns at
    /// once: matches the prompt as Begin would (without locking) and, when the part past the cached
    /// prefix reaches the threshold, reads those pages on the storage thread. Returns the prefetch's
    /// id, or id 0 and the reason when nothing started.</summary>
    /// <param name="tokens">The prompt's token ids.</param>
    /// <param name="extraKey">Namespace, or null for the default one.</param>
    public StoragePrefetchResult StoragePrefetch(int[] tokens, string extraKey = null) {
      ulong id;
      int skipped;
      Kvpool.kvstore_prefetch(this, NotNull(tokens, "tokens"), Len(tokens), extraKey, out id, out skipped);
      return new StoragePrefetchResult(id, (StorageSkip)skipped);
    }

    /// <summary>Where a prefetch stands, without waiting.</summary>
    /// <exception cref="KvPoolException">Status.InvalidArgument for an unknown or ended id.</exception>
    public StoragePrefetchInfo StoragePrefetchPoll(ulong id) {
      StoragePrefetchInfo info = new StoragePrefetchInfo();
      Kvpool.kvstore_prefetch_poll(this, id, info);
      return info;
    }

    /// <summary>Ends a prefetch whatever its state (ask StoragePrefetchPoll for IsReady first, as the
    /// policy wants): what landed becomes host-only nodes of the tree, which Begin finds as a host
    /// hit. Returns the tokens added to the tree.</summary>
    /// <exception cref="KvPoolException">Status.InvalidArgument for an unknown or ended id.</exception>
    public ulong StoragePrefetchEnd(ulong id) {
      ulong inserted;
      Kvpool.kvstore_prefetch_end(this, id, out inserted);
      return inserted;
    }

    /// <summary>Waits until every queued backup has been written (blocks on storage I/O).</summary>
    public void StorageFlush() {
      Kvpool.kvstore_flush(this);
    }

    /// <summary>Removes every page the backend holds (blocks on storage I/O); other pools sharing the
    /// store lose their pages too, the pool's own trees are unchanged.</summary>
    /// <exception cref="KvPoolException">Status.Io when the backend failed.</exception>
    public void StorageClear() {
      Kvpool.kvstore_clear(this);
    }

    // ------------------------------------------------------------------

    /// <summary>Length of an array for the C side (0 for null, which passes NULL).</summary>
    private static ulong Len(global::System.Array array) {
      return array == null ? 0 : (ulong)array.LongLength;
    }

    private static T NotNull<T>(T value, string name) where T : class {
      if (value == null) throw new global::System.ArgumentNullException(name);
      return value;
    }

    private static int Count(int n, string name) {
      if (n < 0) throw new global::System.ArgumentOutOfRangeException(name, n, "a count cannot be negative");
      return n;
    }

    /// <summary>Sum of seqLens[i] - prefixLens[i]: the slots Extend returns.</summary>
    private static int NewTokens(long[] prefixLens, long[] seqLens, string function) {
      NotNull(prefixLens, "prefixLens");
      NotNull(seqLens, "seqLens");
      long total = 0;
      for (int i = 0; i < prefixLens.Length && i < seqLens.Length; i++) {
        total += global::System.Math.Max(0, seqLens[i] - prefixLens[i]);
        if (total > int.MaxValue) {
          // More than any pool holds (slot ids are int32 in the request table).
          throw new KvPoolException((int)Status.OutOfMemory,
                                    function + ": the batch needs more than " + int.MaxValue + " new slots");
        }
      }
      return (int)total;
    }
  }
}
