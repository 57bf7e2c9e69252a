// NUnit 2.6 tests of Pool's allocator, request-row, mamba, check and buffer methods.
using System;
using System.Collections.Generic;
using System.Linq;
using KvPool;
using NUnit.Framework;

namespace KvPool.Tests {

  static class Configs {
    // page_size 4, 64 tokens = pages 1..16 (slots 4..67), 2 layers of 2 heads x 8 f32.
    internal const string Paged =
        "{\"model\":{\"num_layers\":2,\"kv_heads\":2,\"head_dim\":8}," +
        "\"pool\":{\"kv_dtype\":\"f32\",\"page_size\":4,\"max_total_tokens\":64,\"max_running_requests\":8,\"max_context_len\":64}}";
    internal static readonly string Token =
        Paged.Replace("\"page_size\":4,\"max_total_tokens\":64", "\"page_size\":1,\"max_total_tokens\":16");
    internal static readonly string Prefill =
        Paged.Replace("\"max_context_len\":64}", "\"max_context_len\":64,\"disaggregation_mode\":\"prefill\"}");
    internal const string Swa =
        "{\"model\":{\"num_layers\":4,\"attention\":\"swa\",\"kv_heads\":2,\"head_dim\":8,\"sliding_window\":4," +
        "\"swa_layer_pattern\":\"SF\"},\"pool\":{\"kv_dtype\":\"f32\",\"max_total_tokens\":16,\"swa_full_tokens_ratio\":1.0," +
        "\"max_running_requests\":8,\"max_context_len\":64}}";
    internal const string Hybrid =
        "{\"model\":{\"num_layers\":4,\"attention\":\"hybrid_linear\",\"kv_heads\":2,\"head_dim\":8," +
        "\"full_attention_layers\":[3],\"mamba\":{\"conv_shape\":[4,3],\"ssm_shape\":[2,4,4],\"conv_dtype\":\"f32\"," +
        "\"ssm_dtype\":\"f32\"}},\"pool\":{\"kv_dtype\":\"f32\",\"max_total_tokens\":64,\"max_running_requests\":10," +
        "\"mamba_cache_size\":20,\"max_context_len\":32},\"prefix_cache\":{\"kind\":\"none\"}}";
    internal const string Mla =
        "{\"model\":{\"num_layers\":2,\"attention\":\"mla\",\"kv_lora_rank\":16,\"qk_rope_head_dim\":8}," +
        "\"pool\":{\"kv_dtype\":\"f32\",\"page_size\":4,\"max_total_tokens\":64,\"max_running_requests\":8,\"max_context_len\":64}}";
    internal const string DoubleSparse =
        "{\"model\":{\"num_layers\":2,\"attention\":\"double_sparse\",\"kv_heads\":2,\"head_dim\":8,\"heavy_channels\":4}," +
        "\"pool\":{\"kv_dtype\":\"f32\",\"max_total_tokens\":64,\"max_running_requests\":8,\"max_context_len\":64}}";
    internal const string Nsa =
        "{\"model\":{\"num_layers\":2,\"attention\":\"nsa\",\"kv_lora_rank\":128,\"qk_rope_head_dim\":64}," +
        "\"pool\":{\"kv_dtype\":\"bf16\",\"page_size\":64,\"max_total_tokens\":128,\"max_running_requests\":4,\"max_context_len\":128}}";

    // Runs body, which must throw KvPoolException with the given status and a message.
    internal static KvPoolException Expect(Status status, TestDelegate body) {
      KvPoolException e = Assert.Throws<KvPoolException>(body);
      Assert.AreEqual(status, e.Status, e.ToString());
      Assert.IsNotEmpty(e.Message);
      return e;
    }

    internal static long[] Range(long from, long to) {
      return Enumerable.Range(0, (int)(to - from + 1)).Select(i => from + i).ToArray();
    }

    internal static float[] Ramp(int n, float baseValue) {
      return Enumerable.Range(0, n).Select(i => baseValue + i * 0.5f).ToArray();
    }

    internal static byte[] Bytes(float[] values) {
      byte[] b = new byte[values.Length * 4];
      Buffer.BlockCopy(values, 0, b, 0, b.Length);
      return b;
    }

    internal static float[] Floats(byte[] bytes) {
      float[] f = new float[bytes.Length / 4];
      Buffer.BlockCopy(bytes, 0, f, 0, bytes.Length);
      return f;
    }

    internal static T[] Slice<T>(T[] a, int from, int count) {
      T[] s = new T[count];
      Array.Copy(a, from, s, 0, count);
      return s;
    }
  }

  [TestFixture]
  public class AllocatorTests {
    // The worked example of SGLANG_SEMANTICS.md section 2.4 (page_size 4).
    [Test]
    public void WorkedExample() {
      using (Pool pool = new Pool(Configs.Paged)) {
        Assert.AreEqual(AllocKind.Paged, pool.AllocKind());
        Assert.AreEqual(64ul, pool.Available());
        CollectionAssert.AreEqual(Configs.Range(4, 67), pool.Alloc(64));  // pages 1..16 in order
        Assert.AreEqual(0ul, pool.Available());
        // Free one slot of each page, one call each: freed pages go, sorted, to the front.
        foreach (long page in new long[] { 11, 3, 7, 2, 9, 5 }) {
          pool.Free(new long[] { page * 4 + 1 });
        }
        CollectionAssert.AreEqual(new long[] { 5, 9, 2, 7, 3, 11 }, pool.FreeList(AllocList.Free));
        Assert.AreEqual(24ul, pool.Available());

        long[] extended = pool.Extend(new long[] { 6, 0, 8 }, new long[] { 13, 5, 10 }, new long[] { 45, -1, 55 });
        CollectionAssert.AreEqual(new long[] { 46, 47, 20, 21, 22, 23, 36, 8, 9, 10, 11, 28, 12, 13 }, extended);
        CollectionAssert.AreEqual(new long[] { 11 }, pool.FreeList(AllocList.Free));

        CollectionAssert.AreEqual(new long[] { 26, 44, 63 }, pool.Decode(new long[] { 7, 9, 12 }, new long[] { 25, 39, 62 }));
        CollectionAssert.IsEmpty(pool.FreeList(AllocList.Free));

        // A request needing a page now fails and changes nothing.
        Configs.Expect(Status.OutOfMemory, () => pool.Decode(new long[] { 5 }, new long[] { 7 }));
        Assert.AreEqual(0ul, pool.Available());
        StringAssert.StartsWith("ok: 16 pages held, 0 free", pool.Check());
      }
    }

    [Test]
    public void DoubleFreeIsRejectedWithAMessage() {
      using (Pool pool = new Pool(Configs.Paged)) {
        long[] slots = pool.Alloc(4);
        pool.Free(slots);
        KvPoolException e = Configs.Expect(Status.InvalidArgument, () => pool.Free(slots));
        StringAssert.Contains("kvalloc_free", e.Message);
        Assert.AreEqual(64ul, pool.Available());
        Configs.Expect(Status.InvalidArgument, () => pool.Free(new long[] { 0 }));
      }
    }

    [Test]
    public void OutOfMemoryChangesNothing() {
      using (Pool pool = new Pool(Configs.Paged)) {
        pool.Alloc(8);
        long[] before = pool.FreeList(AllocList.Free);
        Configs.Expect(Status.OutOfMemory, () => pool.Alloc(60));
        Configs.Expect(Status.OutOfMemory, () => pool.Extend(new long[] { 0 }, new long[] { 30000 }, new long[] { -1 }));
        Configs.Expect(Status.OutOfMemory, () => pool.Extend(new long[] { 0 }, new long[] { 1L << 40 }, new long[] { -1 }));
        Assert.AreEqual(56ul, pool.Available());
        CollectionAssert.AreEqual(before, pool.FreeList(AllocList.Free));
        Assert.AreEqual(2ul, pool.Stats().AllocFailures);  // the third failed before C
      }
    }

    [Test]
    public void BackupRestore() {
      using (Pool pool = new Pool(Configs.Paged)) {
        long[] first = pool.Alloc(8);
        long[] before = pool.FreeList(AllocList.Free);
        ulong token = pool.Backup();
        pool.Alloc(12);
        pool.Free(first);
        Assert.AreEqual(52ul, pool.Available());
        pool.Restore(token);
        Assert.AreEqual(56ul, pool.Available());
        CollectionAssert.AreEqual(before, pool.FreeList(AllocList.Free));
        Configs.Expect(Status.InvalidArgument, () => pool.Restore(token + 1));
        pool.Free(first);
      }
    }

    [Test]
    public void FreeGroup() {
      using (Pool pool = new Pool(Configs.Paged)) {
        long[] slots = pool.Alloc(8);
        pool.FreeGroupBegin();
        Configs.Expect(Status.InvalidArgument, () => pool.FreeGroupBegin());
        pool.Free(new long[] { slots[0] });
        pool.Free(new long[] { slots[4] });
        Assert.AreEqual(56ul, pool.Available());
        Assert.AreEqual(8ul, pool.Stats().TokenPending);
        pool.FreeGroupEnd();
        Assert.AreEqual(64ul, pool.Available());
        Configs.Expect(Status.InvalidArgument, () => pool.FreeGroupEnd());
      }
    }

    [Test]
    public void DeferredFreesMergeAndSort() {
      using (Pool pool = new Pool(Configs.Prefill)) {
        long[] slots = pool.Alloc(12);  // pages 1, 2, 3
        pool.Free(Configs.Slice(slots, 8, 4));
        pool.Free(Configs.Slice(slots, 0, 4));
        long[] released = pool.FreeList(AllocList.Release);
        Array.Sort(released);
        CollectionAssert.AreEqual(new long[] { 1, 3 }, released);
        CollectionAssert.AreEqual(Configs.Range(4, 16), pool.FreeList(AllocList.Free));
        Assert.AreEqual(60ul, pool.Available());
        pool.MergeAndSort();
        CollectionAssert.IsEmpty(pool.FreeList(AllocList.Release));
        CollectionAssert.AreEqual(new long[] { 1, 3 }.Concat(Configs.Range(4, 16)).ToArray(), pool.FreeList(AllocList.Free));
      }
    }

    [Test]
    public void TokenAllocatorAndClear() {
      using (Pool pool = new Pool(Configs.Token)) {
        Assert.AreEqual(AllocKind.Token, pool.AllocKind());
        CollectionAssert.AreEqual(new long[] { 1, 2, 3 }, pool.Alloc(3));
        pool.Free(new long[] { 1 });
        CollectionAssert.AreEqual(Configs.Range(4, 16).Concat(new long[] { 1 }).ToArray(), pool.FreeList(AllocList.Free));
        CollectionAssert.AreEqual(new long[] { 4, 5, 6 }, pool.Extend(new long[] { 0, 2 }, new long[] { 2, 3 }, new long[] { -1, 3 }));
        pool.ClearAllocator();
        Assert.AreEqual(16ul, pool.Available());
        CollectionAssert.AreEqual(Configs.Range(1, 16), pool.FreeList(AllocList.Free));
      }
      // A free list longer than FreeList's first buffer.
      using (Pool pool = new Pool(Configs.Token.Replace("\"max_total_tokens\":16", "\"max_total_tokens\":200"))) {
        CollectionAssert.AreEqual(Configs.Range(1, 200), pool.FreeList(AllocList.Free));
      }
    }

    [Test]
    public void SlidingWindow() {
      using (Pool pool = new Pool(Configs.Swa)) {
        Assert.AreEqual(AllocKind.Swa, pool.AllocKind());
        CheckSwa(pool.SwaAvailable(), 16, 16);
        long[] slots = pool.Alloc(3);
        CollectionAssert.AreEqual(new long[] { 1, 2, 3 }, slots);
        CheckSwa(pool.SwaAvailable(), 13, 13);
        long[] window = pool.TranslateSwa(slots);
        CollectionAssert.AllItemsAreUnique(window);
        foreach (long w in window) Assert.That(w >= 1 && w <= 16, "window slot " + w);
        pool.FreeSwa(new long[] { 1 });
        CheckSwa(pool.SwaAvailable(), 13, 14);
        CollectionAssert.AreEqual(new long[] { 0 }, pool.TranslateSwa(new long[] { 1 }));
        Assert.AreEqual(14, pool.FreeList(AllocList.SwaFree).Length);
        CollectionAssert.IsEmpty(pool.FreeList(AllocList.SwaRelease));
        pool.Free(slots);
        CheckSwa(pool.SwaAvailable(), 16, 16);
        Configs.Expect(Status.Unsupported, () => pool.Available());
        Configs.Expect(Status.Unsupported, () => pool.Extend(new long[] { 0 }, new long[] { 1 }, new long[] { -1 }));
        Stats stats = pool.Stats();
        Assert.AreEqual(AllocKind.Swa, stats.Kind);
        Assert.AreEqual(16ul, stats.SwaCapacity);
      }
      using (Pool paged = new Pool(Configs.Paged)) {
        Configs.Expect(Status.Unsupported, () => paged.SwaAvailable());
        Configs.Expect(Status.Unsupported, () => paged.TranslateSwa(new long[] { 4 }));
        Configs.Expect(Status.Unsupported, () => paged.FreeSwa(new long[] { 4 }));
        Configs.Expect(Status.Unsupported, () => paged.FreeList(AllocList.SwaFree));
      }
    }

    static void CheckSwa(SwaAvailability a, ulong full, ulong swa) {
      Assert.AreEqual(full, a.Full, a.ToString());
      Assert.AreEqual(swa, a.Swa, a.ToString());
    }

    [Test]
    public void RequestRows() {
      using (Pool pool = new Pool(Configs.Paged)) {
        Assert.AreEqual(8ul, pool.ReqAvailable());
        int[] rows = pool.ReqAlloc(2);
        CollectionAssert.AreEqual(new int[] { 1, 2 }, rows);  // row 0 is reserved
        pool.ReqWrite(rows[0], 1, new long[] { 4, 5, 6 });
        CollectionAssert.AreEqual(new long[] { 4, 5, 6 }, pool.ReqRead(rows[0], 1, 3));
        pool.ReqWriteBatch(rows, new long[] { 2, 0 }, new long[] { 3, 2 }, new long[] { 4, 5 }, new long[] { 6, 8, 9 });
        CollectionAssert.AreEqual(new long[] { 4, 5, 6 }, pool.ReqRead(rows[0], 0, 3));
        CollectionAssert.AreEqual(new long[] { 8, 9 }, pool.ReqRead(rows[1], 0, 2));
        Configs.Expect(Status.InvalidArgument,
            () => pool.ReqWriteBatch(rows, new long[] { 2, 0 }, new long[] { 3, 2 }, new long[] { 4, 5 }, new long[] { 7 }));
        CollectionAssert.AreEqual(new long[] { 6, 9 }, pool.LastLoc(rows, new long[] { 3, 2 }));
        CollectionAssert.AreEqual(new long[] { -1, 8 }, pool.LastLoc(rows, new long[] { 0, 1 }));
        Configs.Expect(Status.InvalidArgument, () => pool.ReqRead(rows[0], 62, 3));
        Configs.Expect(Status.OutOfMemory, () => pool.ReqAlloc(7));
        Assert.AreEqual(6ul, pool.ReqAvailable());
        pool.ReqFree(new int[] { rows[0] });
        Configs.Expect(Status.InvalidArgument, () => pool.ReqFree(new int[] { rows[0] }));
        CollectionAssert.AreEqual(new int[] { 3, 4, 5, 6, 7, 8 }, pool.ReqAlloc(6));  // FIFO reuse
        pool.ReqClear();
        Assert.AreEqual(8ul, pool.ReqAvailable());
      }
    }

    // The engine loop: rows, extend from the last locations, write the batch, decode.
    [Test]
    public void PrefillThenDecode() {
      using (Pool pool = new Pool(Configs.Paged)) {
        int[] rows = pool.ReqAlloc(2);
        long[] prefix = { 0, 0 };
        long[] seqLens = { 5, 3 };
        long[] slots = pool.Extend(prefix, seqLens, pool.LastLoc(rows, prefix));
        CollectionAssert.AreEqual(new long[] { 4, 5, 6, 7, 8, 12, 13, 14 }, slots);
        pool.ReqWriteBatch(rows, prefix, seqLens, null, slots);
        long[] last = pool.LastLoc(rows, seqLens);
        CollectionAssert.AreEqual(new long[] { 8, 14 }, last);
        long[] next = pool.Decode(new long[] { 6, 4 }, last);
        CollectionAssert.AreEqual(new long[] { 9, 15 }, next);
        pool.ReqWrite(rows[0], 5, new long[] { next[0] });
        pool.ReqWrite(rows[1], 3, new long[] { next[1] });
        StringAssert.StartsWith("ok: 3 pages held, 13 free, 2 rows held", pool.Check());
      }
    }

    [Test]
    public void CheckAndStats() {
      using (Pool pool = new Pool(Configs.Paged)) {
        StringAssert.StartsWith("ok: 0 pages held, 16 free, 0 rows held", pool.Check());
        long[] slots = pool.Alloc(8);
        Configs.Expect(Status.OutOfMemory, () => pool.Alloc(100));
        pool.Free(new long[] { slots[0] });
        Configs.Expect(Status.InvalidArgument, () => pool.Free(new long[] { slots[0] }));
        pool.ReqAlloc(2);
        StringAssert.StartsWith("ok: 1 pages held, 15 free, 2 rows held", pool.Check());

        Stats s = pool.Stats();
        Assert.AreEqual(AllocKind.Paged, s.Kind);
        Assert.AreEqual(64ul, s.TokenCapacity);
        Assert.AreEqual(60ul, s.TokenAvailable);
        Assert.AreEqual(4ul, s.TokenHeld);
        Assert.AreEqual(0ul, s.TokenPending);
        Assert.AreEqual(0ul, s.SwaCapacity);
        Assert.AreEqual(8ul, s.ReqCapacity);
        Assert.AreEqual(6ul, s.ReqAvailable);
        Assert.AreEqual(0ul, s.MambaCapacity);
        Assert.AreEqual(pool.Plan().KvMemoryBytes, s.KvBytes);
        Assert.AreEqual(pool.Plan().ReqTableBytes, s.ReqTableBytes);
        Assert.AreEqual(1ul, s.AllocCalls);
        Assert.AreEqual(1ul, s.FreeCalls);
        Assert.AreEqual(1ul, s.AllocFailures);
        Assert.AreEqual(1ul, s.RejectedCalls);
      }
    }

    [Test]
    public void DisposedPoolThrows() {
      Pool pool = new Pool(Configs.Paged);
      pool.Dispose();
      Configs.Expect(Status.InvalidArgument, () => pool.Alloc(4));
      Configs.Expect(Status.InvalidArgument, () => pool.Check());
      Configs.Expect(Status.InvalidArgument, () => pool.Stats());
      Configs.Expect(Status.InvalidArgument, () => pool.ReqAlloc(1));
    }

    [Test]
    public void ArgumentsCheckedInCSharp() {
      using (Pool pool = new Pool(Configs.Paged)) {
        Assert.Throws<ArgumentOutOfRangeException>(() => pool.Alloc(-1));
        Assert.Throws<ArgumentNullException>(() => pool.Extend(null, new long[0], new long[0]));
        Assert.AreEqual(0, pool.Alloc(0).Length);
        // A null array is (NULL, 0): freeing nothing is fine.
        pool.Free(null);
      }
    }

    // Every enum value of the headers has a PascalCase name (kvpool.i renames them).
    [Test]
    public void EnumsHavePascalCaseNames() {
      foreach (Type t in new Type[] { typeof(DType), typeof(BufferKind), typeof(AllocKind), typeof(AllocList), typeof(EventType), typeof(LogLevel) }) {
        foreach (string name in Enum.GetNames(t)) {
          Assert.IsFalse(name.StartsWith("KV") || name.Contains("_"), t.Name + "." + name + " needs a %rename in kvpool.i");
        }
      }
      Assert.AreEqual(9, Enum.GetNames(typeof(DType)).Length);
      Assert.AreEqual(12, Enum.GetNames(typeof(BufferKind)).Length);
      Assert.AreEqual(2, (int)DType.Bf16);
      Assert.AreEqual(11, (int)BufferKind.MambaIntermediateConv);
      Assert.AreEqual(3, (int)AllocList.SwaRelease);
      Assert.AreEqual(3, (int)LogLevel.Debug);
    }
  }

  [TestFixture]
  public class MambaTests {
    const int ConvBytes = 4 * 3 * 4;     // conv_shape [4, 3] of f32
    const int SsmBytes = 2 * 4 * 4 * 4;  // ssm_shape [2, 4, 4] of f32

    [Test]
    public void StatesAndHybridRows() {
      using (Pool pool = new Pool(Configs.Hybrid)) {
        Assert.AreEqual(20ul, pool.MambaAvailable());
        int[] slots = pool.MambaAlloc(2);
        CollectionAssert.AreEqual(new int[] { 1, 2 }, slots);
        Assert.AreEqual(18ul, pool.MambaAvailable());

        byte[] conv = new byte[ConvBytes];
        byte[] ssm = new byte[SsmBytes];
        pool.MambaRead(1, slots[0], conv, ssm);
        CollectionAssert.AreEqual(new byte[ConvBytes], conv, "fresh state is zero");
        byte[] wantConv = Configs.Bytes(Configs.Ramp(12, 1));
        byte[] wantSsm = Configs.Bytes(Configs.Ramp(32, -3));
        pool.MambaWrite(1, slots[0], wantConv, wantSsm);
        pool.MambaRead(1, slots[0], conv, ssm);
        CollectionAssert.AreEqual(wantConv, conv);
        CollectionAssert.AreEqual(wantSsm, ssm);
        pool.MambaRead(0, slots[0], conv, ssm);
        CollectionAssert.AreEqual(new byte[ConvBytes], conv, "other layers untouched");

        pool.MambaCopy(slots[0], slots[1]);
        pool.MambaRead(1, slots[1], conv, ssm);
        CollectionAssert.AreEqual(wantConv, conv);
        CollectionAssert.AreEqual(wantSsm, ssm);
        int fork = pool.MambaFork(slots[0]);
        Assert.AreEqual(3, fork);
        pool.MambaRead(1, fork, conv, ssm);
        CollectionAssert.AreEqual(wantSsm, ssm);

        Configs.Expect(Status.InvalidArgument, () => pool.MambaWrite(1, slots[0], new byte[4], wantSsm));
        Configs.Expect(Status.InvalidArgument, () => pool.MambaRead(3, slots[0], new byte[ConvBytes], new byte[SsmBytes]));
        pool.MambaFree(new int[] { fork });
        Configs.Expect(Status.InvalidArgument, () => pool.MambaFree(new int[] { fork }));
        Configs.Expect(Status.OutOfMemory, () => pool.MambaAlloc(19));

        HybridRows hybrid = pool.ReqAllocHybrid(new int[] { -1, slots[1] });
        int[] rows = hybrid.Rows;
        int[] states = hybrid.Slots;
        Assert.AreEqual(2, rows.Length);
        Assert.AreNotEqual(rows[0], rows[1]);
        Assert.AreEqual(slots[1], states[1]);
        Assert.That(states[0] >= 1 && states[0] != slots[0] && states[0] != slots[1], "fresh state " + states[0]);
        MambaSlots ms = pool.ReqMambaSlots(rows[0]);
        Assert.AreEqual(states[0], ms.Slot);
        CollectionAssert.AreEqual(new int[] { -1, -1 }, ms.PingPong);
        Configs.Expect(Status.InvalidArgument, () => pool.MambaFree(new int[] { states[1] }));
        Configs.Expect(Status.InvalidArgument, () => pool.ReqFree(new int[] { rows[0] }));
        StringAssert.StartsWith("ok: 0 slots held, 64 free, 2 rows held, 3 mamba slots held", pool.Check());

        pool.ReqFreeHybrid(rows, true, -1);
        Assert.AreEqual(19ul, pool.MambaAvailable());
        Assert.AreEqual(10ul, pool.ReqAvailable());
        pool.MambaFree(new int[] { slots[0] });
        Stats stats = pool.Stats();
        Assert.AreEqual(20ul, stats.MambaCapacity);
        Assert.AreEqual(20ul, stats.MambaAvailable);
        Assert.Greater(stats.MambaBytes, 0ul);
      }
      using (Pool paged = new Pool(Configs.Paged)) {
        Configs.Expect(Status.Unsupported, () => paged.MambaAvailable());
        Configs.Expect(Status.Unsupported, () => paged.MambaAlloc(1));
        Configs.Expect(Status.Unsupported, () => paged.ReqAllocHybrid(new int[] { -1 }));
      }
    }
  }

  [TestFixture]
  public class BufferTests {
    const int Row = 2 * 8;  // floats of one token of K (or V) in one layer

    [Test]
    public void SetGetKvRoundTrip() {
      using (Pool pool = new Pool(Configs.Paged)) {
        long[] slots = pool.Alloc(4);
        long[] three = Configs.Slice(slots, 0, 3);
        float[] k = Configs.Ramp(3 * Row, 1);
        float[] v = Configs.Ramp(3 * Row, 100);
        pool.SetKv(0, three, Configs.Bytes(k), Configs.Bytes(v), DType.F32);
        byte[] gotK = new byte[k.Length * 4];
        byte[] gotV = new byte[v.Length * 4];
        pool.GetKv(0, three, gotK, gotV, DType.F32);
        CollectionAssert.AreEqual(k, Configs.Floats(gotK));
        CollectionAssert.AreEqual(v, Configs.Floats(gotV));

        // Converted on the way out: 1.0 and 100.0 in bf16.
        byte[] kb = new byte[Row * 2];
        byte[] vb = new byte[Row * 2];
        pool.GetKv(0, new long[] { slots[0] }, kb, vb, DType.Bf16);
        CollectionAssert.AreEqual(new byte[] { 0x80, 0x3f }, Configs.Slice(kb, 0, 2));
        CollectionAssert.AreEqual(new byte[] { 0xc8, 0x42 }, Configs.Slice(vb, 0, 2));

        Configs.Expect(Status.InvalidArgument, () => pool.SetKv(0, three, new byte[20], Configs.Bytes(v), DType.F32));
        Configs.Expect(Status.InvalidArgument, () => pool.SetKv(7, three, Configs.Bytes(k), Configs.Bytes(v), DType.F32));

        // MoveKv copies every layer's rows.
        pool.SetKv(1, new long[] { slots[0] }, Configs.Bytes(Configs.Slice(v, 0, Row)), Configs.Bytes(Configs.Slice(k, 0, Row)),
                   DType.F32, 1.0f, 1.0f);
        pool.MoveKv(new long[] { slots[3] }, new long[] { slots[0] });
        byte[] oneK = new byte[Row * 4];
        byte[] oneV = new byte[Row * 4];
        pool.GetKv(1, new long[] { slots[3] }, oneK, oneV, DType.F32);
        CollectionAssert.AreEqual(Configs.Slice(v, 0, Row), Configs.Floats(oneK));
        pool.GetKv(0, new long[] { slots[3] }, oneK, oneV, DType.F32);
        CollectionAssert.AreEqual(Configs.Slice(k, 0, Row), Configs.Floats(oneK));
        CollectionAssert.AreEqual(Configs.Slice(v, 0, Row), Configs.Floats(oneV));

        // The descriptor points at the very memory SetKv wrote.
        BufferInfo kbuf = pool.Buffer(BufferKind.K, 0);
        Assert.AreEqual(DType.F32, kbuf.DType, kbuf.ToString());
        Assert.AreEqual(BufferInfo.DeviceCpu, kbuf.DeviceType);
        Assert.AreEqual(0, kbuf.DeviceId);
        Assert.AreEqual(3, kbuf.Ndim);
        CollectionAssert.AreEqual(new long[] { 68, 2, 8 }, kbuf.Shape);
        CollectionAssert.AreEqual(new long[] { 16, 8, 1 }, kbuf.Strides);
        Assert.AreEqual(68ul * Row * 4, kbuf.Bytes);
        float[] row = new float[Row];
        System.Runtime.InteropServices.Marshal.Copy(new IntPtr(kbuf.Data.ToInt64() + slots[0] * Row * 4), row, 0, Row);
        CollectionAssert.AreEqual(Configs.Slice(k, 0, Row), row);
        Assert.AreNotEqual(kbuf.Data, pool.Buffer(BufferKind.V, 1).Data);
        BufferInfo table = pool.Buffer(BufferKind.ReqTable, 0);
        Assert.AreEqual(DType.I32, table.DType);
        CollectionAssert.AreEqual(new long[] { 9, 64 }, table.Shape);
        Configs.Expect(Status.Unsupported, () => pool.Buffer(BufferKind.Label, 0));
        Configs.Expect(Status.InvalidArgument, () => pool.Buffer(BufferKind.K, 9));
      }
    }

    [Test]
    public void HostCopyRoundTrip() {
      using (Pool pool = new Pool(Configs.Paged)) {
        long[] slots = pool.Alloc(8);
        long[] src = Configs.Slice(slots, 0, 3);
        long[] dst = Configs.Slice(slots, 4, 3);
        byte[] k = Configs.Bytes(Configs.Ramp(3 * Row, 1));
        byte[] v = Configs.Bytes(Configs.Ramp(3 * Row, -50));
        pool.SetKv(0, src, k, v, DType.F32);
        pool.SetKv(1, src, v, k, DType.F32);
        ulong n = pool.HostCopyBytes(3);
        Assert.AreEqual(2ul * 2 * 3 * Row * 4, n);  // layers x (K, V) x tokens x row bytes
        byte[] host = pool.CopyToHost(src);
        Assert.AreEqual((int)n, host.Length);
        byte[] again = new byte[n];
        pool.CopyToHost(src, again);
        CollectionAssert.AreEqual(host, again);
        pool.LoadFromHost(dst, host);
        byte[] gotK = new byte[k.Length];
        byte[] gotV = new byte[v.Length];
        pool.GetKv(1, dst, gotK, gotV, DType.F32);
        CollectionAssert.AreEqual(v, gotK);
        CollectionAssert.AreEqual(k, gotV);
        Configs.Expect(Status.InvalidArgument, () => pool.LoadFromHost(dst, Configs.Slice(host, 0, host.Length - 1)));
      }
    }

    [Test]
    public void MlaRows() {
      using (Pool pool = new Pool(Configs.Mla)) {
        long[] slots = pool.Alloc(4);
        long[] three = Configs.Slice(slots, 0, 3);
        float[] nope = Configs.Ramp(3 * 16, 1);
        float[] rope = Configs.Ramp(3 * 8, 200);
        pool.SetMlaKv(0, three, Configs.Bytes(nope), Configs.Bytes(rope), DType.F32);
        byte[] rows = new byte[3 * 24 * 4];
        pool.GetKv(0, three, rows, null, DType.F32);
        float[] got = Configs.Floats(rows);
        for (int i = 0; i < 3; i++) {
          CollectionAssert.AreEqual(Configs.Slice(nope, i * 16, 16), Configs.Slice(got, i * 24, 16));
          CollectionAssert.AreEqual(Configs.Slice(rope, i * 8, 8), Configs.Slice(got, i * 24 + 16, 8));
        }
        byte[] whole = Configs.Bytes(Configs.Ramp(24, -9));
        pool.SetKv(1, new long[] { slots[3] }, whole, null, DType.F32);
        byte[] back = new byte[whole.Length];
        pool.GetKv(1, new long[] { slots[3] }, back, null, DType.F32);
        CollectionAssert.AreEqual(whole, back);
        CollectionAssert.AreEqual(new long[] { 68, 1, 24 }, pool.Buffer(BufferKind.K, 0).Shape);
      }
      using (Pool mha = new Pool(Configs.Paged)) {
        Configs.Expect(Status.Unsupported, () => mha.SetMlaKv(0, new long[] { 4 }, new byte[64], new byte[32], DType.F32));
      }
    }

    [Test]
    public void LabelsAndIndexer() {
      using (Pool pool = new Pool(Configs.DoubleSparse)) {
        long[] slots = pool.Alloc(2);
        float[] labels = Configs.Ramp(2 * 2 * 4, 7);
        pool.SetLabel(0, slots, Configs.Bytes(labels));
        BufferInfo lb = pool.Buffer(BufferKind.Label, 0);
        CollectionAssert.AreEqual(new long[] { 65, 2, 4 }, lb.Shape);
        float[] row = new float[8];
        System.Runtime.InteropServices.Marshal.Copy(new IntPtr(lb.Data.ToInt64() + slots[1] * 32), row, 0, 8);
        CollectionAssert.AreEqual(Configs.Slice(labels, 8, 8), row);
        Configs.Expect(Status.InvalidArgument, () => pool.SetLabel(0, slots, new byte[3]));
      }
      using (Pool pool = new Pool(Configs.Nsa)) {
        long[] slots = pool.Alloc(64);
        byte[] keys = Enumerable.Range(0, 256).Select(i => (byte)(i * 7 + 3)).ToArray();
        pool.SetIndexer(0, Configs.Slice(slots, 0, 2), keys, new float[] { 0.5f, 2f });
        Assert.AreEqual(DType.U8, pool.Buffer(BufferKind.Indexer, 0).DType);
        Configs.Expect(Status.InvalidArgument, () => pool.SetIndexer(0, Configs.Slice(slots, 0, 2), keys, new float[] { 1f }));
      }
      using (Pool mha = new Pool(Configs.Paged)) {
        Configs.Expect(Status.Unsupported, () => mha.SetLabel(0, new long[] { 4 }, new byte[32]));
        Configs.Expect(Status.Unsupported, () => mha.SetIndexer(0, new long[] { 4 }, new byte[128], new float[] { 1f }));
      }
    }
  }
}
