/*
 * java/pool_methods.i: the idiomatic Java methods of ai.kvpool.Pool, included
 * by the SWIGJAVA section of ../kvpool.i (the javacode typemap of the proxy
 * class of struct kvpool). They call the package-private raw functions of
 * the module class Kvpool; a failing status throws KvPoolException from
 * inside the native call, with the code and message of that call.
 *
 * Arrays go to C without copying (pinned with GetPrimitiveArrayCritical for
 * the duration of one call); output arrays are sized here from the inputs.
 * Like the C handle, a Pool is used by one thread at a time.
 */
%typemap(javacode) struct kvpool %{
  /**
   * Creates a pool from a JSON configuration (docs/config.md).
   * @throws KvPoolException CONFIG for a malformed or invalid configuration
   */
  public Pool(String json) {
    this(create(json), true);
  }

  /**
   * Creates a pool from a JSON configuration file.
   * @throws KvPoolException IO if the file cannot be read, else as {@link #Pool(String)}
   */
  public static Pool fromFile(String path) {
    long[] handle = new long[1];
    Kvpool.kvpool_create_from_file(path, handle);
    return new Pool(handle[0], true);
  }

  private static long create(String json) {
    long[] handle = new long[1];
    Kvpool.kvpool_create(json, handle);
    return handle[0];
  }

  /** Name of the backend the pool runs on: "cpu" or "cuda". */
  public String backend() {
    return Kvpool.kvpool_backend(this);
  }

  /** The plan (sizing) this pool was created with. */
  public PlanInfo plan() {
    PlanInfo info = new PlanInfo();
    Kvpool.kvpool_get_plan(this, info);
    return info;
  }

  /**
   * Validates a configuration and computes its sizing without allocating.
   * @throws KvPoolException CONFIG for a malformed or invalid configuration
   */
  public static PlanInfo plan(String json) {
    PlanInfo info = new PlanInfo();
    Kvpool.kvpool_plan(json, info);
    return info;
  }

  // ---------------------------------------------------------------------
  // Allocator (alloc.h). Slot ids are long; page ids in lists are long.
  // ---------------------------------------------------------------------

  /** The allocator this pool uses (token, paged or swa). */
  public AllocKind allocKind() {
    int[] kind = new int[1];
    Kvpool.kvalloc_get_kind(this, kind);
    return AllocKind.swigToEnum(kind[0]);
  }

  /**
   * Free tokens: (free + deferred pages) x page_size.
   * @throws KvPoolException UNSUPPORTED for a swa pool (use {@link #swaAvailable()})
   */
  public long available() {
    long[] tokens = new long[1];
    Kvpool.kvalloc_available(this, tokens);
    return tokens[0];
  }

  /**
   * Free slots of both pools of a swa allocator.
   * @throws KvPoolException UNSUPPORTED for other allocators
   */
  public SwaAvailability swaAvailable() {
    long[] full = new long[1];
    long[] swa = new long[1];
    Kvpool.kvalloc_swa_available(this, full, swa);
    return new SwaAvailability(full[0], swa[0]);
  }

  /**
   * Allocates n slots (paged: n must be a multiple of page_size).
   * @throws KvPoolException OUT_OF_MEMORY if fewer are free (nothing changes)
   */
  public long[] alloc(int n) {
    long[] slots = new long[count(n, "n")];
    Kvpool.kvalloc_alloc(this, slots);
    return slots;
  }

  /**
   * Frees slots (paged: the whole pages they lie in).
   * @throws KvPoolException INVALID_ARGUMENT for a double free, a reserved or
   *     never-allocated slot (nothing is freed)
   */
  public void free(long[] slots) {
    Kvpool.kvalloc_free(this, slots);
  }

  /**
   * Allocates the new slots of a prefill batch (SGLang's alloc_extend).
   * @param prefixLens tokens each request already has
   * @param seqLens    each request's new total length
   * @param lastLocs   slot of each request's last prefix token, or -1
   * @return the new slots, request-major (sum of seqLens - prefixLens)
   */
  public long[] extend(long[] prefixLens, long[] seqLens, long[] lastLocs) {
    long[] slots = new long[newTokens(prefixLens, seqLens, "kvalloc_extend")];
    Kvpool.kvalloc_extend(this, prefixLens, seqLens, lastLocs, slots);
    return slots;
  }

  /**
   * Allocates one decode slot per request (SGLang's alloc_decode).
   * @param seqLens  lengths including the new token
   * @param lastLocs slot of each request's token seq-2 (-1 when seq is 1)
   */
  public long[] decode(long[] seqLens, long[] lastLocs) {
    long[] slots = new long[Objects.requireNonNull(seqLens, "seqLens").length];
    Kvpool.kvalloc_decode(this, seqLens, lastLocs, slots);
    return slots;
  }

  /** swa: frees the window slots of tokens that slid out of the window. */
  public void freeSwa(long[] slots) {
    Kvpool.kvalloc_free_swa(this, slots);
  }

  /** swa: the window slot of each full slot (0 = none). */
  public long[] translateSwa(long[] slots) {
    long[] out = new long[Objects.requireNonNull(slots, "slots").length];
    Kvpool.kvalloc_translate_swa(this, slots, out);
    return out;
  }

  /** Starts a free group: later frees become available together at {@link #freeGroupEnd()}. */
  public void freeGroupBegin() {
    Kvpool.kvalloc_free_group_begin(this);
  }

  /** Ends the free group and frees everything collected in it. */
  public void freeGroupEnd() {
    Kvpool.kvalloc_free_group_end(this);
  }

  /** Snapshots the allocator; {@link #restore(long)} with the token reverts later changes. */
  public long backup() {
    long[] token = new long[1];
    Kvpool.kvalloc_backup(this, token);
    return token[0];
  }

  /** Reverts every allocation and free since {@link #backup()} returned token. */
  public void restore(long token) {
    Kvpool.kvalloc_restore(this, token);
  }

  /** Merges the deferred frees into the free list and sorts it (need_sort mode). */
  public void mergeAndSort() {
    Kvpool.kvalloc_merge_and_sort(this);
  }

  /** Makes every slot free again (free list, deferred frees, group and snapshot reset). */
  public void clearAllocator() {
    Kvpool.kvalloc_clear(this);
  }

  /** A copy of one of the allocator's lists, front first (page ids; slot ids for page_size 1). */
  public long[] freeList(AllocList list) {
    Objects.requireNonNull(list, "list");
    long[] length = new long[1];
    long[] ids = new long[64];
    while (true) {
      try {
        Kvpool.kvalloc_free_list(this, list.swigValue(), ids, length);
        return length[0] == ids.length ? ids : Arrays.copyOf(ids, (int) length[0]);
      } catch (KvPoolException e) {
        if (e.getStatus() != Status.BUFFER_TOO_SMALL || length[0] <= ids.length) {
          throw e;
        }
        ids = new long[count(length[0], "list length")];
      }
    }
  }

  // ---------------------------------------------------------------------
  // Request rows (req.h)
  // ---------------------------------------------------------------------

  /** Request rows that can be allocated now. */
  public long reqAvailable() {
    long[] rows = new long[1];
    Kvpool.kvreq_available(this, rows);
    return rows[0];
  }

  /**
   * Allocates n request rows (never row 0).
   * @throws KvPoolException OUT_OF_MEMORY if fewer are free (nothing changes)
   */
  public int[] reqAlloc(int n) {
    int[] rows = new int[count(n, "n")];
    Kvpool.kvreq_alloc(this, rows);
    return rows;
  }

  /** Returns rows to the back of the free list. */
  public void reqFree(int[] rows) {
    Kvpool.kvreq_free(this, rows);
  }

  /** Writes slot ids into columns start.. of an allocated row. */
  public void reqWrite(int row, long start, long[] slots) {
    Kvpool.kvreq_write(this, row, start, slots);
  }

  /** Reads n columns from start of an allocated row. */
  public long[] reqRead(int row, long start, int n) {
    long[] slots = new long[count(n, "n")];
    Kvpool.kvreq_read(this, row, start, slots);
    return slots;
  }

  /** Frees every row (the table contents are kept). */
  public void reqClear() {
    Kvpool.kvreq_clear(this);
  }

  /**
   * Writes a batch's prefix and new slots into its rows (SGLang's write_cache_indices).
   * @param prefixSlots all prefixes' slots, concatenated
   * @param extendSlots all new slots, concatenated (what {@link #extend} returned)
   */
  public void reqWriteBatch(int[] rows, long[] prefixLens, long[] seqLens, long[] prefixSlots, long[] extendSlots) {
    Kvpool.kvreq_write_batch(this, rows, prefixLens, seqLens, prefixSlots, extendSlots);
  }

  /** The slot of each request's last prefix token, or -1 for an empty prefix (input of {@link #extend}). */
  public long[] lastLoc(int[] rows, long[] prefixLens) {
    long[] lastLocs = new long[Objects.requireNonNull(rows, "rows").length];
    Kvpool.kvreq_last_loc(this, rows, prefixLens, lastLocs);
    return lastLocs;
  }

  // ---------------------------------------------------------------------
  // Mamba state slots and hybrid rows (mamba.h); hybrid_linear pools only
  // ---------------------------------------------------------------------

  /** Free mamba state slots. */
  public long mambaAvailable() {
    long[] slots = new long[1];
    Kvpool.kvpool_mamba_available(this, slots);
    return slots[0];
  }

  /** Allocates n state slots (zeroed). */
  public int[] mambaAlloc(int n) {
    int[] slots = new int[count(n, "n")];
    Kvpool.kvpool_mamba_alloc(this, slots);
    return slots;
  }

  /** Returns state slots to the free list. */
  public void mambaFree(int[] slots) {
    Kvpool.kvpool_mamba_free(this, slots);
  }

  /** Copies every layer's state from src to dst. */
  public void mambaCopy(int src, int dst) {
    Kvpool.kvpool_mamba_copy(this, src, dst);
  }

  /** Allocates one slot holding a copy of src; returns it. */
  public int mambaFork(int src) {
    int[] dst = new int[1];
    Kvpool.kvpool_mamba_fork(this, src, dst);
    return dst[0];
  }

  /** Writes one layer's conv and temporal state of a slot (bytes in their configured dtypes). */
  public void mambaWrite(int layer, int slot, byte[] conv, byte[] ssm) {
    Kvpool.kvpool_mamba_write(this, layer, slot, conv, ssm);
  }

  /** Reads one layer's conv and temporal state of a slot into conv and ssm. */
  public void mambaRead(int layer, int slot, byte[] conv, byte[] ssm) {
    Kvpool.kvpool_mamba_read(this, layer, slot, conv, ssm);
  }

  /**
   * Allocates request rows with their state slots (SGLang's HybridReqToTokenPool.alloc).
   * @param reuse per request a state slot it keeps, or -1 for a fresh one
   */
  public HybridRows reqAllocHybrid(int[] reuse) {
    int n = Objects.requireNonNull(reuse, "reuse").length;
    int[] rows = new int[n];
    int[] slots = new int[n];
    Kvpool.kvreq_alloc_hybrid(this, reuse, rows, slots);
    return new HybridRows(rows, slots);
  }

  /**
   * Frees hybrid rows, and with freeState their state slots.
   * @param keep with ping-pong slots: index (0 or 1) of the one to keep, or -1
   */
  public void reqFreeHybrid(int[] rows, boolean freeState, int keep) {
    Kvpool.kvreq_free_hybrid(this, rows, freeState ? 1 : 0, keep);
  }

  /** The state slot and ping-pong slots of an allocated hybrid row. */
  public MambaSlots reqMambaSlots(int row) {
    int[] slot = new int[1];
    int[] pingPong = new int[2];
    Kvpool.kvreq_mamba_slots(this, row, slot, pingPong);
    return new MambaSlots(slot[0], pingPong);
  }

  // ---------------------------------------------------------------------
  // Self-check and statistics (check.h)
  // ---------------------------------------------------------------------

  /**
   * Verifies the ownership and accounting invariants.
   * @return the one-line summary, e.g. "ok: 2 pages held, 14 free, 0 rows held"
   * @throws KvPoolException CHECK_FAILED whose message is the report (every
   *     leaked or double-owned slot, page, row or state slot, one per line)
   */
  public String check() {
    byte[] report = new byte[4096];
    while (true) {
      try {
        Kvpool.kvpool_check(this, report);
      } catch (KvPoolException e) {
        if (e.getStatus() == Status.CHECK_FAILED) {
          String text = Utf8.fromC(report);
          if (!e.getMessage().contains(text)) {
            throw new KvPoolException(e.getCode(), e.getMessage() + "\n" + text);
          }
        }
        throw e;
      }
      String text = Utf8.fromC(report);
      // A full buffer may have cut the report: try again with more room.
      if (text.length() < report.length - 1 || report.length >= (1 << 24)) {
        return text;
      }
      report = new byte[report.length * 4];
    }
  }

  /** Availability, sizes and counters of this pool. */
  public Stats stats() {
    Stats stats = new Stats();
    Kvpool.kvpool_get_stats(this, stats);
    return stats;
  }

  /**
   * The pool's counters and sizes in the Prometheus text exposition format (version 0.0.4),
   * ready to serve on a /metrics endpoint with the content type
   * "text/plain; version=0.0.4" (metrics.h; docs/services.md lists every family). A read:
   * it changes nothing.
   */
  public String metricsText() {
    byte[] text = new byte[16384];
    long[] length = new long[1];
    while (true) {
      try {
        Kvpool.kvpool_metrics_text(this, text, length);
        return new String(text, 0, (int) length[0], java.nio.charset.StandardCharsets.UTF_8);
      } catch (KvPoolException e) {
        // Too small: the library told the length; counters may grow before the next call.
        if (e.getStatus() != Status.BUFFER_TOO_SMALL || length[0] < text.length) {
          throw e;
        }
        text = new byte[count(length[0] + 1024, "metrics text length")];
      }
    }
  }

  // ---------------------------------------------------------------------
  // KV buffers (buffers.h). Data passes as bytes in the dtype the call
  // names (rows contiguous); float[] overloads are f32, ByteBuffer overloads
  // take direct buffers and use their position..limit window (the position
  // is not moved).
  // ---------------------------------------------------------------------

  /**
   * Describes one buffer of the pool.
   * @param layer global layer id (ignored for REQ_TABLE and SWA_MAPPING)
   * @throws KvPoolException UNSUPPORTED if the pool has no such buffer
   */
  public BufferInfo buffer(BufferKind kind, int layer) {
    BufferDescriptor d = new BufferDescriptor();
    try {
      Kvpool.kvpool_get_buffer(this, Objects.requireNonNull(kind, "kind").swigValue(), layer, d);
      int ndim = d.getNdim();
      long[] shape = new long[ndim];
      long[] strides = new long[ndim];
      for (int i = 0; i < ndim; i++) {
        shape[i] = d.shapeAt(i);
        strides[i] = d.strideAt(i);
      }
      return new BufferInfo(DType.swigToEnum(d.getDtype()), d.dataAddress(), d.getDeviceType(), d.getDeviceId(),
          shape, strides, d.getBytes());
    } finally {
      d.delete();
    }
  }

  /**
   * Writes K and V rows of one layer at the given slots (SGLang's set_kv_buffer).
   * @param k        slots.length x heads x head_dim values of srcDtype (mla: whole rows)
   * @param v        as k (mla: null)
   * @param srcDtype f32, f16, bf16 or the pool's kv_dtype; other values are divided by
   *                 their scale and cast
   */
  public void setKv(int layer, long[] slots, byte[] k, byte[] v, DType srcDtype, float kScale, float vScale) {
    Kvpool.kvpool_set_kv(this, layer, slots, k, v, code(srcDtype), kScale, vScale);
  }

  /** {@link #setKv(int, long[], byte[], byte[], DType, float, float)} with scales 1. */
  public void setKv(int layer, long[] slots, byte[] k, byte[] v, DType srcDtype) {
    setKv(layer, slots, k, v, srcDtype, 1.0f, 1.0f);
  }

  /** Writes f32 K and V values (converted to the pool's kv_dtype, scales 1). */
  public void setKv(int layer, long[] slots, float[] k, float[] v) {
    Kvpool.kvpool_java_set_kv_f32(this, layer, slots, k, v, DType.F32.swigValue(), 1.0f, 1.0f);
  }

  /** As the byte[] overload, from direct buffers (position..limit). */
  public void setKv(int layer, long[] slots, ByteBuffer k, ByteBuffer v, DType srcDtype, float kScale, float vScale) {
    Kvpool.kvpool_java_set_kv_nio(this, layer, slots, window(k, "k"), window(v, "v"), code(srcDtype), kScale, vScale);
  }

  /** mla/nsa: writes the nope and rope parts of each row. */
  public void setMlaKv(int layer, long[] slots, byte[] nope, byte[] rope, DType srcDtype) {
    Kvpool.kvpool_set_mla_kv(this, layer, slots, nope, rope, code(srcDtype));
  }

  /** double_sparse: writes label rows [heads, heavy_channels] in the pool's kv_dtype. */
  public void setLabel(int layer, long[] slots, byte[] labels) {
    Kvpool.kvpool_set_label(this, layer, slots, labels);
  }

  /** nsa: writes indexer keys (128 fp8 bytes per token) and one scale per token. */
  public void setIndexer(int layer, long[] slots, byte[] keys, float[] scales) {
    Kvpool.kvpool_set_indexer(this, layer, slots, keys, scales);
  }

  /** Gathers K and V rows of one layer into k and v, converted to dstDtype (mla: v null). */
  public void getKv(int layer, long[] slots, byte[] k, byte[] v, DType dstDtype) {
    Kvpool.kvpool_get_kv(this, layer, slots, k, v, code(dstDtype));
  }

  /** Gathers K and V rows of one layer as f32 values. */
  public void getKv(int layer, long[] slots, float[] k, float[] v) {
    Kvpool.kvpool_java_get_kv_f32(this, layer, slots, k, v, DType.F32.swigValue());
  }

  /** As the byte[] overload, into direct buffers (position..limit). */
  public void getKv(int layer, long[] slots, ByteBuffer k, ByteBuffer v, DType dstDtype) {
    Kvpool.kvpool_java_get_kv_nio(this, layer, slots, window(k, "k"), window(v, "v"), code(dstDtype));
  }

  /** For every layer: row[dst[i]] = old row[src[i]] (overlaps are safe). */
  public void moveKv(long[] dst, long[] src) {
    Kvpool.kvpool_move_kv(this, dst, src);
  }

  /** Bytes {@link #copyToHost} needs for numSlots tokens. */
  public long hostCopyBytes(long numSlots) {
    long[] bytes = new long[1];
    Kvpool.kvpool_host_copy_bytes(this, numSlots, bytes);
    return bytes[0];
  }

  /** Copies the KV of some slots, every layer, into a new array (retraction). */
  public byte[] copyToHost(long[] slots) {
    long size = hostCopyBytes(Objects.requireNonNull(slots, "slots").length);
    if (size > Integer.MAX_VALUE - 8) {
      throw new KvPoolException(Status.HOST_MEMORY.swigValue(),
          "kvpool_copy_to_host: " + size + " bytes do not fit a Java array; use a direct ByteBuffer");
    }
    byte[] host = new byte[(int) size];
    Kvpool.kvpool_copy_to_host(this, slots, host);
    return host;
  }

  /** Copies the KV of some slots into host (exactly {@link #hostCopyBytes} bytes). */
  public void copyToHost(long[] slots, byte[] host) {
    Kvpool.kvpool_copy_to_host(this, slots, host);
  }

  /** Copies the KV of some slots into a direct buffer (position..limit). */
  public void copyToHost(long[] slots, ByteBuffer host) {
    Kvpool.kvpool_java_copy_to_host_nio(this, slots, window(host, "host"));
  }

  /** Scatters a {@link #copyToHost} copy back, possibly at other slots. */
  public void loadFromHost(long[] slots, byte[] host) {
    Kvpool.kvpool_load_from_host(this, slots, host);
  }

  /** Scatters a copy held in a direct buffer (position..limit) back. */
  public void loadFromHost(long[] slots, ByteBuffer host) {
    Kvpool.kvpool_java_load_from_host_nio(this, slots, window(host, "host"));
  }

  // ---------------------------------------------------------------------
  // Radix prefix cache and KV events (radix.h); docs/prefix_cache.md.
  // Keys are int tokens in a namespace, extraKey (null = the default one);
  // node handles are opaque long values.
  // ---------------------------------------------------------------------

  /** Values per event that kvpool_take_events_flat writes (kvpool.i). */
  private static final int EVENT_FIELDS = 6;

  /**
   * The longest cached prefix of tokens (whole pages) and the node where it ends. A node matched
   * part-way is split; the matched path becomes most recently used.
   * @param extraKey namespace (LoRA id, cache salt), or null for the default one
   * @throws KvPoolException UNSUPPORTED if the pool has no radix cache
   */
  public MatchResult match(int[] tokens, String extraKey) {
    // tokens.length always suffices.
    long[] slots = new long[Objects.requireNonNull(tokens, "tokens").length];
    long[] matched = new long[1];
    long[] node = new long[1];
    Kvpool.radix_match(this, tokens, extraKey, slots, matched, node);
    return new MatchResult(matched[0] == slots.length ? slots : Arrays.copyOf(slots, (int) matched[0]), node[0]);
  }

  /**
   * Inserts a page-aligned key with one slot per token. The tree takes the slots of the new part;
   * the caller keeps owning the first {@link InsertResult#getPrefixLength()} slots (duplicates).
   * @param priority for the "priority" eviction policy (higher stays longer)
   * @throws KvPoolException INVALID_ARGUMENT for a key that is not page-aligned, slots not allocated
   *     or already the tree's (nothing changes)
   */
  public InsertResult insert(int[] tokens, long[] slots, String extraKey, int priority) {
    long[] prefix = new long[1];
    long[] node = new long[1];
    Kvpool.radix_insert(this, tokens, slots, extraKey, priority, prefix, node);
    return new InsertResult(prefix[0], node[0]);
  }

  /** {@link #insert(int[], long[], String, int)} in the default namespace with priority 0. */
  public InsertResult insert(int[] tokens, long[] slots) {
    return insert(tokens, slots, null, 0);
  }

  /** Protects a node and its ancestors from eviction (counted: unlock as often as locked). */
  public void lock(long node) {
    Kvpool.radix_lock(this, node);
  }

  /**
   * Releases one {@link #lock(long)}.
   * @throws KvPoolException INVALID_ARGUMENT for a stale or unlocked node
   */
  public void unlock(long node) {
    Kvpool.radix_unlock(this, node);
  }

  /**
   * Evicts whole unlocked leaves in policy order until tokens are back in the allocator or none
   * are left; returns the tokens freed (may exceed tokens).
   */
  public long evict(long tokens) {
    long[] evicted = new long[1];
    Kvpool.radix_evict(this, tokens, evicted);
    return evicted[0];
  }

  /** Tokens in the tree: evictable, protected and their total. */
  public RadixSizes radixSizes() {
    long[] evictable = new long[1];
    long[] protectedTokens = new long[1];
    long[] total = new long[1];
    Kvpool.radix_sizes(this, evictable, protectedTokens, total);
    return new RadixSizes(evictable[0], protectedTokens[0], total[0]);
  }

  /**
   * {@link #match(int[], String)} on a hybrid_linear pool: the longest prefix that ends at a node
   * with a cached mamba state, and that state's slot ({@link MatchResult#getMambaSlot()}, owned by
   * the tree). With cowSlot &gt;= 0 (a slot from {@link #mambaAlloc(int)}) the node's state is also
   * copied into cowSlot (copy-on-write); -1 copies nothing.
   * @throws KvPoolException UNSUPPORTED if the pool has no mamba radix cache
   */
  public MatchResult matchMamba(int[] tokens, String extraKey, int cowSlot) {
    long[] slots = new long[Objects.requireNonNull(tokens, "tokens").length];
    long[] matched = new long[1];
    long[] node = new long[1];
    int[] state = new int[1];
    Kvpool.radix_match_mamba(this, tokens, extraKey, cowSlot, slots, matched, node, state);
    return new MatchResult(matched[0] == slots.length ? slots : Arrays.copyOf(slots, (int) matched[0]), node[0], state[0]);
  }

  /**
   * Caches a sequence and the mamba state after its last token (hybrid_linear pools). As
   * {@link #insert(int[], long[], String, int)} the caller keeps the first prefixLength slots; the
   * tree takes mambaSlot too unless {@link InsertResult#isStateExisted()}.
   */
  public InsertResult insertMamba(int[] tokens, long[] slots, String extraKey, int mambaSlot) {
    long[] prefix = new long[1];
    int[] exist = new int[1];
    long[] node = new long[1];
    Kvpool.radix_insert_mamba(this, tokens, slots, extraKey, mambaSlot, prefix, exist, node);
    return new InsertResult(prefix[0], node[0], exist[0] != 0);
  }

  /**
   * Frees up to states cached mamba states, least recently used first (internal nodes become
   * tombstones, leaves are evicted entirely); returns the states freed.
   */
  public long evictMamba(long states) {
    long[] evicted = new long[1];
    Kvpool.radix_evict_mamba(this, states, evicted);
    return evicted[0];
  }

  /**
   * SGLang's swa insert (swa pools): the first prevPrefixLen slots are the tree's own from a match;
   * of the rest the tree frees duplicates, revives unlocked tombstones and takes the new tail, so the
   * caller owns none of them afterwards. Tokens before swaEvictedLen have no window slot any more.
   */
  public InsertResult insertSwa(int[] tokens, long[] slots, String extraKey, long prevPrefixLen, long swaEvictedLen) {
    long[] prefix = new long[1];
    long[] node = new long[1];
    Kvpool.radix_insert_swa(this, tokens, slots, extraKey, prevPrefixLen, swaEvictedLen, prefix, node);
    return new InsertResult(prefix[0], node[0]);
  }

  /**
   * Evicts on a swa pool: unlocked leaves until tokens full slots are freed, then, while fewer than
   * swaTokens window slots were freed, window KV only (tombstones). Returns {full, window} freed.
   */
  public long[] evictSwa(long tokens, long swaTokens) {
    long[] full = new long[1];
    long[] window = new long[1];
    Kvpool.radix_evict_swa(this, tokens, swaTokens, full, window);
    return new long[] {full[0], window[0]};
  }

  /**
   * The tree's second resource: mamba states (hybrid_linear) or window tokens (swa), as evictable,
   * protected and total.
   */
  public RadixSizes stateSizes() {
    long[] evictable = new long[1];
    long[] protectedCount = new long[1];
    Kvpool.radix_state_sizes(this, evictable, protectedCount);
    return new RadixSizes(evictable[0], protectedCount[0], evictable[0] + protectedCount[0]);
  }

  /**
   * Empties the tree, returning its slots to the allocator (emits ALL_BLOCKS_CLEARED).
   * @throws KvPoolException INVALID_ARGUMENT while a request is active or a node is locked
   */
  public void resetCache() {
    Kvpool.radix_reset(this);
  }

  /** Drains the queued KV events, oldest first (needs prefix_cache.events). */
  public List<KvEvent> takeEvents() {
    long[] fields = new long[16 * EVENT_FIELDS];
    int[] tokens = new int[256];
    long[] eventCount = new long[1];
    long[] tokenCount = new long[1];
    while (true) {
      try {
        Kvpool.kvpool_take_events_flat(this, fields, eventCount, tokens, tokenCount);
        break;
      } catch (KvPoolException e) {
        if (e.getStatus() != Status.BUFFER_TOO_SMALL) {
          throw e;
        }
        // The queue is unchanged: retry with the sizes C reported.
        if (eventCount[0] * EVENT_FIELDS > fields.length) {
          fields = new long[count(eventCount[0] * EVENT_FIELDS, "event count")];
        }
        if (tokenCount[0] > tokens.length) {
          tokens = new int[count(tokenCount[0], "event token count")];
        }
      }
    }
    int n = (int) eventCount[0];
    List<KvEvent> events = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      int f = i * EVENT_FIELDS;
      int offset = (int) fields[f + 4];
      events.add(new KvEvent(EventType.swigToEnum((int) fields[f]), fields[f + 2], fields[f + 3], fields[f + 1] != 0,
          Arrays.copyOfRange(tokens, offset, offset + (int) fields[f + 5])));
    }
    return Collections.unmodifiableList(events);
  }

  /**
   * The page hash of KV events: SHA-256 over the parent page's digest (null for a first page) and
   * each token as 4 little-endian bytes; its id is what {@link KvEvent#getBlockHash()} carries.
   * Safe from any thread.
   * @param parent the previous page's {@link PageHash#getDigest()}, or null
   */
  public static PageHash pageHash(int[] tokens, byte[] parent) {
    byte[] digest = new byte[32];
    long[] id = new long[1];
    Kvpool.radix_page_hash(tokens, parent != null && parent.length == 0 ? null : parent, digest, id);
    return new PageHash(digest, id[0]);
  }

  // ---------------------------------------------------------------------
  // Requests (seq.h): begin -> seqExtend (prefill chunks) -> seqDecode ->
  // finish, or abort / retract. The library owns each request's slots, row
  // and lock. OUT_OF_MEMORY from seqExtend/seqDecode changes nothing.
  // Request ids are unsigned 64-bit values in a long (never 0).
  // ---------------------------------------------------------------------

  /**
   * Starts a request: matches the longest cached prefix of its prompt (at most length - 1
   * tokens) and locks it.
   * @param extraKey prefix-cache namespace, or null for the default one
   */
  public SeqBegin begin(int[] tokens, String extraKey) {
    long[] seq = new long[1];
    long[] cached = new long[1];
    Kvpool.kvseq_begin(this, tokens, extraKey, seq, cached);
    return new SeqBegin(seq[0], cached[0]);
  }

  /**
   * Computes the next prompt chunk of each request of a batch (all or nothing).
   * @param chunkLens tokens to compute per request (>= 1)
   * @return the new tokens' slots, request-major
   * @throws KvPoolException OUT_OF_MEMORY if rows or slots are short even after eviction
   */
  public long[] seqExtend(long[] seqs, long[] chunkLens) {
    long total = 0;
    for (long c : Objects.requireNonNull(chunkLens, "chunkLens")) {
      total += Math.max(0, c);
    }
    long[] slots = new long[count(total, "sum of chunkLens")];
    Kvpool.kvseq_extend(this, seqs, chunkLens, slots);
    return slots;
  }

  /** Appends tokens[i] to request seqs[i] (a decode step); returns one slot per request. */
  public long[] seqDecode(long[] seqs, int[] tokens) {
    long[] slots = new long[Objects.requireNonNull(seqs, "seqs").length];
    Kvpool.kvseq_decode(this, seqs, tokens, slots);
    return slots;
  }

  /**
   * Finishes a request: caches its first committed tokens, releases the rest, forgets it.
   * @throws KvPoolException INVALID_ARGUMENT for an unknown (e.g. already finished) request
   */
  public void finish(long seq, long committed) {
    Kvpool.kvseq_finish(this, seq, committed);
  }

  /** Aborts a request: releases everything without caching, forgets it. */
  public void abort(long seq) {
    Kvpool.kvseq_abort(this, seq);
  }

  /**
   * Retracts a request under memory pressure: releases as abort does but keeps its tokens;
   * returns the tokens found in the cache now (a later seqExtend recomputes only the rest).
   */
  public long retract(long seq) {
    long[] cached = new long[1];
    Kvpool.kvseq_retract(this, seq, cached);
    return cached[0];
  }

  /** Row and lengths of a request. */
  public SeqInfo seqInfo(long seq) {
    SeqInfo info = new SeqInfo();
    Kvpool.kvseq_get_info(this, seq, info);
    return info;
  }

  /** The slots of a request's computed tokens, in token order. */
  public long[] seqSlots(long seq) {
    long[] slots = new long[64];
    long[] length = new long[1];
    while (true) {
      try {
        Kvpool.kvseq_get_slots(this, seq, slots, length);
        return length[0] == slots.length ? slots : Arrays.copyOf(slots, (int) length[0]);
      } catch (KvPoolException e) {
        if (e.getStatus() != Status.BUFFER_TOO_SMALL || length[0] <= slots.length) {
          throw e;
        }
        slots = new long[count(length[0], "slot count")];
      }
    }
  }

  /** SGLang's scheduler accounting: available + evictable + protected + uncached == capacity. */
  public Accounting accounting() {
    long[] available = new long[1];
    long[] evictable = new long[1];
    long[] protectedTokens = new long[1];
    long[] uncached = new long[1];
    long[] capacity = new long[1];
    Kvpool.kvseq_accounting(this, available, evictable, protectedTokens, uncached, capacity);
    return new Accounting(available[0], evictable[0], protectedTokens[0], uncached[0], capacity[0]);
  }

  /**
   * The mamba state slot a request owns (hybrid_linear pools): begin filled it with the cached
   * prefix's state (copy-on-write) or zeroes.
   */
  public int seqMambaSlot(long seq) {
    int[] slot = new int[1];
    Kvpool.kvseq_mamba_slot(this, seq, slot);
    return slot[0];
  }

  // ---------------------------------------------------------------------
  // The host-memory tier (L2) of the radix cache (host.h); docs/host-tier.md.
  // With a host_cache section nodes are device-only, device+host or
  // host-only: evict() keeps backed-up nodes on the host, hostEvict() drops
  // host-only leaves, hostLoadBack() (and begin(), see SeqInfo.getHostHit())
  // brings a host-only prefix back. Pools without a host tier throw
  // UNSUPPORTED. Streams are cudaStream_t values as long (0 = the legacy
  // default stream), as in the device.h calls; node handles are those of the
  // radix calls.
  // ---------------------------------------------------------------------

  /**
   * The host tier's sizes and counters.
   * @throws KvPoolException UNSUPPORTED if the pool has no host tier
   */
  public HostStats hostStats() {
    HostStats stats = new HostStats();
    Kvpool.kvhost_get_stats(this, stats);
    return stats;
  }

  /**
   * Starts the backups that inserts since the last call asked for (never in the insert itself: the
   * engine writes the KV after inserting), then releases the nodes of copies that have landed (with
   * wait, after blocking until every copy in flight has landed); returns the number of copies
   * released (always 0 on CPU pools, whose copies land at once).
   * @throws KvPoolException CUDA if a copy failed
   */
  public long hostPoll(boolean wait) {
    long[] completed = new long[1];
    Kvpool.kvhost_poll(this, wait ? 1 : 0, completed);
    return completed[0];
  }

  /**
   * Sets the compute stream: backups wait for the work already on it, and
   * {@link #hostWaitLayer(int, int, long)} with stream 0 makes it wait. CPU pools ignore it.
   */
  public void hostSetStream(long stream) {
    Kvpool.kvhost_set_stream(this, stream);
  }

  /**
   * Moves load-backs to the next of the three load sets (once per batch, before the batch's begin /
   * hostLoadBack calls); returns the new current set (0, 1 or 2).
   */
  public int hostNextLoadSet() {
    int[] set = new int[1];
    Kvpool.kvhost_next_load_set(this, set);
    return set[0];
  }

  /** The load set that load-backs go to now (0, 1 or 2). */
  public int hostLoadSet() {
    int[] set = new int[1];
    Kvpool.kvhost_load_set(this, set);
    return set[0];
  }

  /**
   * Makes stream (0: the compute stream of {@link #hostSetStream(long)}) wait until layer (a global
   * layer id) of the loads of set has landed; the host does not block. CPU pools: nothing to wait for.
   * @throws KvPoolException INVALID_ARGUMENT for a set outside 0..2 or a layer the pool does not hold
   */
  public void hostWaitLayer(int set, int layer, long stream) {
    Kvpool.kvhost_wait_layer(this, set, layer, stream);
  }

  /**
   * {@link #match(int[], String)} that also reports the host-only part of the match: the tokens
   * found after the device part in host-only nodes, and the node to pass to
   * {@link #hostLoadBack(long)}.
   * @param extraKey namespace, or null for the default one
   */
  public HostMatchResult hostMatch(int[] tokens, String extraKey) {
    // tokens.length always suffices.
    long[] slots = new long[Objects.requireNonNull(tokens, "tokens").length];
    long[] matched = new long[1];
    long[] hostMatched = new long[1];
    long[] node = new long[1];
    long[] hostNode = new long[1];
    Kvpool.kvhost_match(this, tokens, extraKey, slots, matched, hostMatched, node, hostNode);
    return new HostMatchResult(matched[0] == slots.length ? slots : Arrays.copyOf(slots, (int) matched[0]), node[0],
        hostMatched[0], hostNode[0]);
  }

  /**
   * Brings the host-only nodes that end at hostNode (from {@link #hostMatch(int[], String)}) back to
   * the device: fresh device slots (evicting unlocked device nodes if needed), owned by the tree at
   * once. Nothing is loaded for fewer than 10 tokens or when the device cannot make room.
   * @throws KvPoolException INVALID_ARGUMENT for a stale handle
   */
  public HostLoadResult hostLoadBack(long hostNode) {
    long[] slots = new long[64];
    long[] loaded = new long[1];
    long[] node = new long[1];
    while (true) {
      try {
        Kvpool.kvhost_load_back(this, hostNode, slots, loaded, node);
        return new HostLoadResult(loaded[0] == slots.length ? slots : Arrays.copyOf(slots, (int) loaded[0]), node[0]);
      } catch (KvPoolException e) {
        // BUFFER_TOO_SMALL changed nothing and tells the size.
        if (e.getStatus() != Status.BUFFER_TOO_SMALL || loaded[0] <= slots.length) {
          throw e;
        }
        slots = new long[count(loaded[0], "host chain length")];
      }
    }
  }

  /**
   * Deletes unlocked host-only leaves in policy order until tokens host tokens are freed (or none
   * are left); returns the host tokens freed.
   */
  public long hostEvict(long tokens) {
    long[] evicted = new long[1];
    Kvpool.kvhost_evict(this, length(tokens, "tokens"), evicted);
    return evicted[0];
  }

  /**
   * Where a node's tokens live.
   * @throws KvPoolException INVALID_ARGUMENT for a stale handle
   */
  public HostNodeState hostNodeState(long node) {
    int[] onDevice = new int[1];
    int[] onHost = new int[1];
    long[] tokens = new long[1];
    Kvpool.kvhost_node_state(this, node, onDevice, onHost, tokens);
    return new HostNodeState(onDevice[0] != 0, onHost[0] != 0, tokens[0]);
  }

  // ---------------------------------------------------------------------
  // The storage tier (L3) below the host tier (storage.h); docs/storage.md.
  // With a storage section (and a host_cache one) the host tier's pages are
  // backed up to a store shared by pools of the same model. A request's
  // prompt is prefetched into the host tier with storagePrefetch(), polled
  // with storagePrefetchPoll() and ended with storagePrefetchEnd(), which puts
  // what landed into the tree as host-only nodes; begin() then loads them
  // back (see SeqInfo.getStorageHit()). Pools without a storage tier throw
  // UNSUPPORTED. Only storageFlush() and storageClear() wait for storage I/O.
  // ---------------------------------------------------------------------

  /**
   * The counters of the storage tier and its backend.
   * @throws KvPoolException UNSUPPORTED if the pool has no storage tier
   */
  public StorageStats storageStats() {
    StorageStats stats = new StorageStats();
    Kvpool.kvstore_get_stats(this, stats);
    return stats;
  }

  /**
   * Starts reading the stored continuation of a prompt into the host tier and returns at once:
   * matches the prompt as {@link #begin(int[], String)} would (without locking) and, when the part
   * past the cached prefix reaches the threshold, reads those pages on the storage thread. Returns
   * the prefetch's id, or id 0 and the reason when nothing started.
   * @param extraKey namespace, or null for the default one
   */
  public StoragePrefetchResult storagePrefetch(int[] tokens, String extraKey) {
    long[] id = new long[1];
    int[] skipped = new int[1];
    Kvpool.kvstore_prefetch(this, Objects.requireNonNull(tokens, "tokens"), extraKey, id, skipped);
    return new StoragePrefetchResult(id[0], StorageSkip.swigToEnum(skipped[0]));
  }

  /**
   * Where a prefetch stands, without waiting.
   * @throws KvPoolException INVALID_ARGUMENT for an unknown or ended id
   */
  public StoragePrefetchInfo storagePrefetchPoll(long id) {
    StoragePrefetchInfo info = new StoragePrefetchInfo();
    Kvpool.kvstore_prefetch_poll(this, id, info);
    return info;
  }

  /**
   * Ends a prefetch whatever its state (ask {@link #storagePrefetchPoll(long)} for isReady() first,
   * as the policy wants): what landed becomes host-only nodes of the tree, which begin() finds as a
   * host hit. Returns the tokens added to the tree.
   * @throws KvPoolException INVALID_ARGUMENT for an unknown or ended id
   */
  public long storagePrefetchEnd(long id) {
    long[] inserted = new long[1];
    Kvpool.kvstore_prefetch_end(this, id, inserted);
    return inserted[0];
  }

  /** Waits until every queued backup has been written (blocks on storage I/O). */
  public void storageFlush() {
    Kvpool.kvstore_flush(this);
  }

  /**
   * Removes every page the backend holds (blocks on storage I/O); other pools sharing the store
   * lose their pages too, the pool's own trees are unchanged.
   * @throws KvPoolException IO when the backend failed
   */
  public void storageClear() {
    Kvpool.kvstore_clear(this);
  }

  // ---------------------------------------------------------------------
  // Stream-ordered operations on device memory (device.h).
  //
  // Every `long` named as an address below is the ADDRESS of device memory of
  // the pool's device (host memory for a CPU pool, e.g. Pool.address() of a
  // direct ByteBuffer in native byte order) holding the int64 slots/lengths,
  // int32 rows or bytes the C documentation describes; `stream` is a
  // cudaStream_t as a long (0 = the legacy default stream; ignored on CPU
  // pools). On a CUDA pool the calls enqueue their work on the stream and
  // return at once: inputs must stay valid (and a ByteBuffer reachable) until
  // the stream reaches the call. Device-side problems fault the pool: the
  // next call or synchronize() throws DEVICE_FAULT; clearAllocator() clears
  // it. On a CPU pool the calls run at once with the results of their host
  // counterparts and report bad input directly (INVALID_ARGUMENT). The
  // allocator calls need "pool": {"free_list": "device"} on a CUDA pool.
  // The slot ids of mambaAllocAsync/mambaForkAsync are host values (returned
  // as by mambaAlloc/mambaFork): only their stream is an address. The request
  // ids, chunk lengths and tokens of seqExtendAsync/seqDecodeAsync are Java
  // arrays as in seqExtend/seqDecode: only their slots and stream are addresses.
  // The lengths of decodeWatermark/decodeGraphAdvance are host arrays too.
  // Lengths are element counts (byte counts for k/v/nope/rope); a negative
  // one throws IllegalArgumentException.
  // ---------------------------------------------------------------------

  /**
   * Creates a pool whose buffers come from a kvpool_allocator (pool.h).
   * @param allocator the address of a kvpool_allocator struct made in C (its callbacks are C
   *     functions: custom allocators cannot be written in Java), or 0 for the default allocator,
   *     which makes this {@link #Pool(String)}
   * @throws KvPoolException INVALID_ARGUMENT for a bad allocator struct, else as {@link #Pool(String)}
   */
  public static Pool withAllocator(String json, long allocator) {
    long[] handle = new long[1];
    Kvpool.kvpool_create_with_allocator(json, allocator, handle);
    return new Pool(handle[0], true);
  }

  /**
   * Creates a pool whose storage tier is the engine's own store (docs/storage-custom.md): the
   * configuration's {@code storage} section says {@code "backend": "custom"}, and the pool's
   * storage threads call backend's methods. Pools given the same backend share its values. The
   * pool keeps backend reachable until it is closed.
   * @throws KvPoolException INVALID_ARGUMENT for a null backend; CONFIG when the configuration
   *     has no storage section or names another backend, else as {@link #Pool(String)}
   */
  public static Pool withStorage(String json, StorageBackend backend) {
    long[] handle = new long[1];
    Kvpool.kvpool_create_with_storage(json, backend, backend != null && backend.implementsClear() ? 1 : 0, handle);
    return new Pool(handle[0], true);
  }

  /**
   * The address of a direct buffer's position (0 for null): host memory to pass to the
   * device.h methods of a CPU pool. Keep the buffer reachable while the address is in use.
   * @throws IllegalArgumentException for a heap (non-direct) buffer
   */
  public static long address(ByteBuffer buffer) {
    return Kvpool.kvpool_java_address(window(buffer, "buffer"));
  }

  /**
   * Waits until everything enqueued on stream has finished (CPU pools: returns at once).
   * @throws KvPoolException DEVICE_FAULT if a device-side check failed, CUDA for a CUDA error
   */
  public void synchronize(long stream) {
    Kvpool.kvpool_synchronize(this, stream);
  }

  /**
   * Free-list pages an extend batch takes (tokens for page size 1): the capacity
   * {@link #extendAsync}'s newPages needs. Host arithmetic only.
   */
  public long extendPages(long[] prefixLensHost, long[] seqLensHost) {
    sameBatch(prefixLensHost, seqLensHost, "kvalloc_extend_pages");
    long[] pages = new long[1];
    Kvpool.kvalloc_extend_pages(this, prefixLensHost, seqLensHost, pages);
    return pages[0];
  }

  /**
   * Allocates the new slots of a prefill batch on the device, with {@link #extend}'s result.
   * @param prefixLensHost host copy of the prefix lengths (capacity check)
   * @param seqLensHost    host copy of the new lengths
   * @param prefixLens     address: prefix lengths (int64, one per request)
   * @param seqLens        address: new lengths
   * @param lastLocs       address: slot of each request's last prefix token, or -1
   * @param slots          address: receives slotsLen = sum(seqLens - prefixLens) slots, request-major
   * @param newPages       address (0 for none): receives the ids of the pages taken, in order
   * @param newPagesLen    capacity of newPages (at least {@link #extendPages})
   * @param stream         cudaStream_t (0: default stream)
   * @throws KvPoolException OUT_OF_MEMORY (nothing changes), INVALID_ARGUMENT, UNSUPPORTED
   */
  public void extendAsync(long[] prefixLensHost, long[] seqLensHost, long prefixLens, long seqLens, long lastLocs,
                          long slots, long slotsLen, long newPages, long newPagesLen, long stream) {
    sameBatch(prefixLensHost, seqLensHost, "kvalloc_extend_async");
    Kvpool.kvalloc_extend_async(this, prefixLensHost, seqLensHost, prefixLens, seqLens, lastLocs, slots,
        length(slotsLen, "slotsLen"), newPages, length(newPagesLen, "newPagesLen"), stream);
  }

  /**
   * Allocates one decode slot per request on the device, with {@link #decode}'s result: seqLens
   * (addresses of lengths including the new token), lastLocs and slots hold seqLensHost.length
   * values; newPages (0 for none) receives the ids of the pages taken.
   */
  public void decodeAsync(long[] seqLensHost, long seqLens, long lastLocs, long slots, long newPages, long newPagesLen,
                          long stream) {
    Objects.requireNonNull(seqLensHost, "seqLensHost");
    Kvpool.kvalloc_decode_async(this, seqLensHost, seqLens, lastLocs, slots, newPages,
        length(newPagesLen, "newPagesLen"), stream);
  }

  /** Allocates n slots on the device into the address slots, with {@link #alloc}'s result. */
  public void allocAsync(long slots, long n, long stream) {
    Kvpool.kvalloc_alloc_async(this, slots, length(n, "n"), stream);
  }

  /**
   * Gives n pages (page ids: slot / page_size, e.g. an extend's newPages) at the address pages
   * back on the device, in the allocator's order.
   */
  public void freePagesAsync(long pages, long n, long stream) {
    Kvpool.kvalloc_free_pages_async(this, pages, length(n, "n"), stream);
  }

  /**
   * Writes a batch's new slots into the request table on the device, like {@link #reqWriteBatch}:
   * rows (int32), prefixLens and seqLens hold batch values; prefixSlots (0 for none) and
   * extendSlots hold prefixSlotsLen and extendSlotsLen slots, request-major.
   */
  public void reqWriteBatchAsync(long rows, long prefixLens, long seqLens, long batch, long prefixSlots,
                                 long prefixSlotsLen, long extendSlots, long extendSlotsLen, long stream) {
    Kvpool.kvreq_write_batch_async(this, rows, prefixLens, seqLens, length(batch, "batch"), prefixSlots,
        length(prefixSlotsLen, "prefixSlotsLen"), extendSlots, length(extendSlotsLen, "extendSlotsLen"), stream);
  }

  /**
   * Writes into lastLocs the slot of each request's last prefix token (-1 for an empty prefix),
   * like {@link #lastLoc}: rows (int32), prefixLens and lastLocs hold batch values.
   */
  public void lastLocAsync(long rows, long prefixLens, long batch, long lastLocs, long stream) {
    Kvpool.kvreq_last_loc_async(this, rows, prefixLens, length(batch, "batch"), lastLocs, stream);
  }

  /**
   * Writes K and V rows of one layer at n slots, like
   * {@link #setKv(int, long[], byte[], byte[], DType, float, float)}: k and v hold kBytes and
   * vBytes bytes of srcDtype data (mla/double_sparse: whole rows in k, v 0).
   */
  public void setKvAsync(int layer, long slots, long n, long k, long kBytes, long v, long vBytes, DType srcDtype,
                         float kScale, float vScale, long stream) {
    Kvpool.kvpool_set_kv_async(this, layer, slots, length(n, "n"), k, length(kBytes, "kBytes"), v,
        length(vBytes, "vBytes"), code(srcDtype), kScale, vScale, stream);
  }

  /** mla/nsa: writes the nope and rope parts of n rows, like {@link #setMlaKv}. */
  public void setMlaKvAsync(int layer, long slots, long n, long nope, long nopeBytes, long rope, long ropeBytes,
                            DType srcDtype, long stream) {
    Kvpool.kvpool_set_mla_kv_async(this, layer, slots, length(n, "n"), nope, length(nopeBytes, "nopeBytes"), rope,
        length(ropeBytes, "ropeBytes"), code(srcDtype), stream);
  }

  /** Gathers K and V rows of one layer at n slots into k and v (mla: v 0), like getKv. */
  public void getKvAsync(int layer, long slots, long n, long k, long kBytes, long v, long vBytes, DType dstDtype,
                         long stream) {
    Kvpool.kvpool_get_kv_async(this, layer, slots, length(n, "n"), k, length(kBytes, "kBytes"), v,
        length(vBytes, "vBytes"), code(dstDtype), stream);
  }

  /** For every layer: row[dst[i]] = old row[src[i]] (overlaps are safe), like {@link #moveKv}. */
  public void moveKvAsync(long dst, long dstLen, long src, long srcLen, long stream) {
    Kvpool.kvpool_move_kv_async(this, dst, length(dstLen, "dstLen"), src, length(srcLen, "srcLen"), stream);
  }

  /**
   * Allocates n mamba state slots with {@link #mambaAlloc}'s ids (host values, returned); zeroing
   * their states is enqueued on the stream. hybrid_linear pools only.
   * @throws KvPoolException OUT_OF_MEMORY (nothing changes), UNSUPPORTED
   */
  public int[] mambaAllocAsync(int n, long stream) {
    int[] slots = new int[count(n, "n")];
    Kvpool.kvpool_mamba_alloc_async(this, slots, stream);
    return slots;
  }

  /**
   * Allocates one state slot (a host id, returned) whose states become a copy of src's, copied on
   * the stream, like {@link #mambaFork}.
   * @throws KvPoolException INVALID_ARGUMENT for a src that is not allocated, else as mambaAllocAsync
   */
  public int mambaForkAsync(int src, long stream) {
    int[] dst = new int[1];
    Kvpool.kvpool_mamba_fork_async(this, src, dst, stream);
    return dst[0];
  }

  /**
   * For each i: copies every layer's state of slot src[i] to slot dst[i], like
   * {@link #mambaCopy}: src and dst are addresses of srcLen and dstLen (= srcLen) int32 slots;
   * the destinations must be distinct and must not be sources of the same call.
   */
  public void mambaCopyAsync(long src, long srcLen, long dst, long dstLen, long stream) {
    Kvpool.kvpool_mamba_copy_async(this, src, length(srcLen, "srcLen"), dst, length(dstLen, "dstLen"), stream);
  }

  /**
   * A decode step that a CUDA graph can capture once and replay: the lengths, lastLocs and the
   * free-list position are read (and the page count and capacity checked) when the step runs; a
   * replay past the watermark faults the pool (DEVICE_FAULT). Same slots as {@link #decodeAsync}
   * for the same lengths. The host counters do not move: after the steps ran, and before any
   * other allocator call, call {@link #decodeGraphAdvance}. On a CPU pool it is {@link #decode}
   * at once.
   * @param batch    number of requests
   * @param seqLens  address: lengths including the new token (int64, batch values)
   * @param lastLocs address: slot of token seq-2 (-1 when seq is 1)
   * @param slots    address: receives one slot per request
   * @param stream   cudaStream_t (0: default stream), the capturing stream
   * @throws KvPoolException OUT_OF_MEMORY (CPU pools), INVALID_ARGUMENT, UNSUPPORTED, DEVICE_FAULT
   */
  public void decodeGraphAsync(long batch, long seqLens, long lastLocs, long slots, long stream) {
    Kvpool.kvalloc_decode_graph_async(this, length(batch, "batch"), seqLens, lastLocs, slots, stream);
  }

  /**
   * How many consecutive {@link #decodeGraphAsync} steps fit in the free list (a graph's
   * watermark): step k gives every request one more token (lengths seqLensHost[i] + k). Host
   * arithmetic, no synchronization.
   * @param seqLensHost lengths at the first step, including its new token (each >= 1; not empty)
   * @throws KvPoolException INVALID_ARGUMENT (an empty batch, a length below 1), UNSUPPORTED
   */
  public long decodeWatermark(long[] seqLensHost) {
    Objects.requireNonNull(seqLensHost, "seqLensHost");
    long[] steps = new long[1];
    Kvpool.kvalloc_decode_watermark(this, seqLensHost, steps);
    return steps[0];
  }

  /**
   * Records that steps {@link #decodeGraphAsync} steps ran, from the lengths seqLensHost at the
   * first of them: the host counters advance as the device cursor did. On a CPU pool, which
   * allocated at each step, it only checks its arguments.
   * @throws KvPoolException INVALID_ARGUMENT, UNSUPPORTED, DEVICE_FAULT
   */
  public void decodeGraphAdvance(long[] seqLensHost, long steps) {
    Objects.requireNonNull(seqLensHost, "seqLensHost");
    Kvpool.kvalloc_decode_graph_advance(this, seqLensHost, length(steps, "steps"));
  }

  /**
   * {@link #seqExtend} with the request-table writes enqueued on the stream and the new slots
   * written to the address slots: request seqs[i] gets chunkLens[i] (>= 1) more prompt tokens.
   * seqs and chunkLens are host arrays; the new slots are decided on the host exactly as
   * seqExtend decides them. All or nothing for the batch.
   * @param slots    address: receives slotsLen = sum(chunkLens) slots (int64), request-major
   * @param slotsLen number of new slots
   * @param stream   cudaStream_t (0: default stream)
   * @throws KvPoolException OUT_OF_MEMORY (nothing changes), INVALID_ARGUMENT
   */
  public void seqExtendAsync(long[] seqs, long[] chunkLens, long slots, long slotsLen, long stream) {
    Objects.requireNonNull(seqs, "seqs");
    Objects.requireNonNull(chunkLens, "chunkLens");
    Kvpool.kvseq_extend_async(this, seqs, chunkLens, slots, length(slotsLen, "slotsLen"), stream);
  }

  /**
   * {@link #seqDecode} with the request-table writes enqueued on the stream: appends tokens[i] to
   * request seqs[i] (host arrays) and writes one slot per request to the address slots
   * (slotsLen = seqs.length int64 values).
   */
  public void seqDecodeAsync(long[] seqs, int[] tokens, long slots, long slotsLen, long stream) {
    Objects.requireNonNull(seqs, "seqs");
    Objects.requireNonNull(tokens, "tokens");
    Kvpool.kvseq_decode_async(this, seqs, tokens, slots, length(slotsLen, "slotsLen"), stream);
  }

  // ---------------------------------------------------------------------

  /** A non-negative array size. */
  private static int count(long n, String what) {
    if (n < 0 || n > Integer.MAX_VALUE - 8) {
      throw new IllegalArgumentException(what + " is " + n + ", not a valid array size");
    }
    return (int) n;
  }

  /** Sum of seqLens[i] - prefixLens[i]: the slots extend() returns. */
  private static int newTokens(long[] prefixLens, long[] seqLens, String function) {
    Objects.requireNonNull(prefixLens, "prefixLens");
    Objects.requireNonNull(seqLens, "seqLens");
    long total = 0;
    for (int i = 0; i < Math.min(prefixLens.length, seqLens.length); i++) {
      total += Math.max(0, seqLens[i] - prefixLens[i]);
      if (total > Integer.MAX_VALUE - 8) {
        // More than any pool holds (slot ids are int32 in the request table).
        throw new KvPoolException(Status.OUT_OF_MEMORY.swigValue(),
            function + ": the batch needs more than " + (Integer.MAX_VALUE - 8) + " new slots");
      }
    }
    return (int) total;
  }

  /** A non-negative length passed to C as a size_t. */
  private static long length(long n, String what) {
    if (n < 0) {
      throw new IllegalArgumentException(what + " is " + n + ", a length cannot be negative");
    }
    return n;
  }

  /** The host length arrays of one batch must have one length each per request. */
  private static void sameBatch(long[] prefixLensHost, long[] seqLensHost, String function) {
    Objects.requireNonNull(prefixLensHost, "prefixLensHost");
    Objects.requireNonNull(seqLensHost, "seqLensHost");
    if (prefixLensHost.length != seqLensHost.length) {
      throw new KvPoolException(Status.INVALID_ARGUMENT.swigValue(), function + ": prefixLensHost has "
          + prefixLensHost.length + " lengths, seqLensHost " + seqLensHost.length);
    }
  }

  private static int code(DType dtype) {
    return Objects.requireNonNull(dtype, "dtype").swigValue();
  }

  /** The position..limit window of a direct buffer (null stays null). */
  private static ByteBuffer window(ByteBuffer buffer, String name) {
    if (buffer == null) {
      return null;
    }
    if (!buffer.isDirect()) {
      throw new IllegalArgumentException(name + " must be a direct ByteBuffer (ByteBuffer.allocateDirect)");
    }
    return buffer.slice();
  }
%}

%typemap(javaimports) struct kvpool %{
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
%}
