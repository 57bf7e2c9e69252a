// NUnit 2.6 tests of Pool's device.h methods on CPU pools: their "device
// memory" is host memory (Marshal.AllocHGlobal, passed by address), they run
// at once, and their results must equal those of the host-array calls on a
// second, identical pool. Also Pool.WithAllocator.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using KvPool;
using NUnit.Framework;

namespace KvPool.Tests {

  [TestFixture]
  public class DeviceTests {
    private readonly List<IntPtr> allocated = new List<IntPtr>();

    [TearDown]
    public void FreeNative() {
      foreach (IntPtr p in allocated) Marshal.FreeHGlobal(p);
      allocated.Clear();
    }

    private IntPtr Native(int bytes) {
      IntPtr p = Marshal.AllocHGlobal(Math.Max(bytes, 8));
      allocated.Add(p);
      Marshal.Copy(new byte[Math.Max(bytes, 8)], 0, p, Math.Max(bytes, 8));  // zero-filled
      return p;
    }

    private IntPtr Longs(params long[] values) {
      IntPtr p = Native(8 * values.Length);
      Marshal.Copy(values, 0, p, values.Length);
      return p;
    }

    private IntPtr Ints(params int[] values) {
      IntPtr p = Native(4 * values.Length);
      Marshal.Copy(values, 0, p, values.Length);
      return p;
    }

    private IntPtr Floats(float[] values) {
      IntPtr p = Native(4 * values.Length);
      Marshal.Copy(values, 0, p, values.Length);
      return p;
    }

    private static long[] ReadLongs(IntPtr p, int n) {
      long[] v = new long[n];
      Marshal.Copy(p, v, 0, n);
      return v;
    }

    private static float[] ReadFloats(IntPtr p, int n) {
      float[] v = new float[n];
      Marshal.Copy(p, v, 0, n);
      return v;
    }

    [Test]
    public void AllocatorMatchesHostCalls() {
      using (Pool host = new Pool(Configs.Paged))
      using (Pool dev = new Pool(Configs.Paged)) {
        dev.Synchronize(IntPtr.Zero);
        long[] prefix = { 0, 0 };
        long[] seq = { 5, 3 };
        long[] want = host.Extend(prefix, seq, new long[] { -1, -1 });
        CollectionAssert.AreEqual(new long[] { 4, 5, 6, 7, 8, 12, 13, 14 }, want);

        ulong pages = dev.ExtendPages(prefix, seq);
        Assert.AreEqual(3UL, pages);
        IntPtr slots = Longs(new long[want.Length]);
        IntPtr newPages = Longs(new long[pages]);
        dev.ExtendAsync(prefix, seq, Longs(prefix), Longs(seq), Longs(-1, -1), slots, (ulong)want.Length, newPages,
                        pages, IntPtr.Zero);
        dev.Synchronize(IntPtr.Zero);
        CollectionAssert.AreEqual(want, ReadLongs(slots, want.Length));
        CollectionAssert.AreEqual(new long[] { 1, 2, 3 }, ReadLongs(newPages, 3));

        long[] wantDecode = host.Decode(new long[] { 6, 4 }, new long[] { 8, 14 });
        IntPtr decSlots = Longs(0, 0);
        dev.DecodeAsync(new long[] { 6, 4 }, Longs(6, 4), Longs(8, 14), decSlots, IntPtr.Zero, 0, IntPtr.Zero);
        CollectionAssert.AreEqual(wantDecode, ReadLongs(decSlots, 2));
        CollectionAssert.AreEqual(new long[] { 9, 15 }, ReadLongs(decSlots, 2));

        long[] wantAlloc = host.Alloc(4);
        IntPtr allocSlots = Longs(0, 0, 0, 0);
        dev.AllocAsync(allocSlots, 4, IntPtr.Zero);
        CollectionAssert.AreEqual(wantAlloc, ReadLongs(allocSlots, 4));
        CollectionAssert.AreEqual(new long[] { 16, 17, 18, 19 }, ReadLongs(allocSlots, 4));
        Assert.AreEqual(host.Available(), dev.Available());
        Assert.AreEqual(64UL - 16, dev.Available());

        // The extend's pages go back, sorted, to the front of the free list.
        dev.FreePagesAsync(newPages, pages, IntPtr.Zero);
        dev.Synchronize(IntPtr.Zero);
        Assert.AreEqual(64UL - 4, dev.Available());
        CollectionAssert.AreEqual(new long[] { 1, 2, 3, 5 }, Configs.Slice(dev.FreeList(AllocList.Free), 0, 4));
      }
    }

    [Test]
    public void RequestTable() {
      using (Pool pool = new Pool(Configs.Paged)) {
        int[] rows = pool.ReqAlloc(2);
        long[] slots = pool.Extend(new long[] { 0, 0 }, new long[] { 5, 3 }, new long[] { -1, -1 });
        IntPtr rowsDev = Ints(rows);
        IntPtr prefixDev = Longs(0, 0);
        IntPtr seqDev = Longs(5, 3);
        IntPtr extendDev = Longs(slots);
        pool.ReqWriteBatchAsync(rowsDev, prefixDev, seqDev, 2, IntPtr.Zero, 0, extendDev, (ulong)slots.Length,
                                IntPtr.Zero);
        CollectionAssert.AreEqual(Configs.Slice(slots, 0, 5), pool.ReqRead(rows[0], 0, 5));
        CollectionAssert.AreEqual(Configs.Slice(slots, 5, 3), pool.ReqRead(rows[1], 0, 3));

        long[] want = pool.LastLoc(rows, new long[] { 5, 2 });
        IntPtr lastLocs = Longs(0, 0);
        pool.LastLocAsync(rowsDev, Longs(5, 2), 2, lastLocs, IntPtr.Zero);
        CollectionAssert.AreEqual(want, ReadLongs(lastLocs, 2));
        CollectionAssert.AreEqual(new long[] { 8, 13 }, ReadLongs(lastLocs, 2));
        pool.LastLocAsync(rowsDev, Longs(0, 0), 2, lastLocs, IntPtr.Zero);
        CollectionAssert.AreEqual(new long[] { -1, -1 }, ReadLongs(lastLocs, 2));

        // A slot count that does not match the batch.
        Configs.Expect(Status.InvalidArgument, () => pool.ReqWriteBatchAsync(
            rowsDev, prefixDev, seqDev, 2, IntPtr.Zero, 0, extendDev, (ulong)slots.Length - 1, IntPtr.Zero));
      }
    }

    [Test]
    public void KvWriteReadMove() {
      using (Pool pool = new Pool(Configs.Paged)) {
        long[] slots = pool.Alloc(8);
        const int n = 3, rowFloats = 2 * 8;
        float[] k = Configs.Ramp(n * rowFloats, 1);
        float[] v = Configs.Ramp(n * rowFloats, -50);
        long[] three = Configs.Slice(slots, 0, n);
        IntPtr slotsDev = Longs(three);
        IntPtr kDev = Floats(k);
        IntPtr vDev = Floats(v);
        ulong bytes = (ulong)(4 * k.Length);
        pool.SetKvAsync(1, slotsDev, n, kDev, bytes, vDev, bytes, DType.F32, 1.0f, 1.0f, IntPtr.Zero);
        pool.Synchronize(IntPtr.Zero);

        byte[] gotK = new byte[bytes];
        byte[] gotV = new byte[bytes];
        pool.GetKv(1, three, gotK, gotV, DType.F32);
        CollectionAssert.AreEqual(k, Configs.Floats(gotK));
        CollectionAssert.AreEqual(v, Configs.Floats(gotV));
        pool.GetKv(0, three, gotK, gotV, DType.F32);
        CollectionAssert.AreEqual(new float[k.Length], Configs.Floats(gotK), "another layer was written");

        IntPtr outK = Native((int)bytes);
        IntPtr outV = Native((int)bytes);
        pool.GetKvAsync(1, slotsDev, n, outK, bytes, outV, bytes, DType.F32, IntPtr.Zero);
        CollectionAssert.AreEqual(k, ReadFloats(outK, k.Length));
        CollectionAssert.AreEqual(v, ReadFloats(outV, v.Length));

        long[] dst = Configs.Slice(slots, 4, n);
        IntPtr dstDev = Longs(dst);
        pool.MoveKvAsync(dstDev, n, slotsDev, n, IntPtr.Zero);
        pool.GetKv(1, dst, gotK, gotV, DType.F32);
        CollectionAssert.AreEqual(k, Configs.Floats(gotK));
        CollectionAssert.AreEqual(v, Configs.Floats(gotV));

        Configs.Expect(Status.InvalidArgument, () => pool.SetKvAsync(1, slotsDev, n, kDev, bytes - 4, vDev, bytes,
                                                                     DType.F32, 1.0f, 1.0f, IntPtr.Zero));
        Configs.Expect(Status.InvalidArgument, () => pool.MoveKvAsync(dstDev, n, slotsDev, n - 1, IntPtr.Zero));
      }
    }

    [Test]
    public void MlaKv() {
      using (Pool pool = new Pool(Configs.Mla)) {
        long[] slots = pool.Alloc(4);
        const int n = 2, rank = 16, rope = 8;
        float[] nope = Configs.Ramp(n * rank, 1);
        float[] ropeV = Configs.Ramp(n * rope, 100);
        pool.SetMlaKvAsync(0, Longs(slots[0], slots[1]), n, Floats(nope), (ulong)(4 * nope.Length), Floats(ropeV),
                           (ulong)(4 * ropeV.Length), DType.F32, IntPtr.Zero);
        float[] want = new float[n * (rank + rope)];
        for (int i = 0; i < n; i++) {
          Array.Copy(nope, i * rank, want, i * (rank + rope), rank);
          Array.Copy(ropeV, i * rope, want, i * (rank + rope) + rank, rope);
        }
        byte[] got = new byte[4 * want.Length];
        pool.GetKv(0, Configs.Slice(slots, 0, n), got, null, DType.F32);
        CollectionAssert.AreEqual(want, Configs.Floats(got));
      }
    }

    const int ConvBytes = 4 * 3 * 4;     // conv_shape [4, 3] of f32
    const int SsmBytes = 2 * 4 * 4 * 4;  // ssm_shape [2, 4, 4] of f32

    // Every layer's (0-2) conv and ssm bytes of a state slot.
    private static byte[] State(Pool pool, int slot) {
      byte[] all = new byte[3 * (ConvBytes + SsmBytes)];
      for (int layer = 0; layer < 3; layer++) {
        byte[] conv = new byte[ConvBytes];
        byte[] ssm = new byte[SsmBytes];
        pool.MambaRead(layer, slot, conv, ssm);
        Array.Copy(conv, 0, all, layer * (ConvBytes + SsmBytes), ConvBytes);
        Array.Copy(ssm, 0, all, layer * (ConvBytes + SsmBytes) + ConvBytes, SsmBytes);
      }
      return all;
    }

    [Test]
    public void MambaStates() {
      using (Pool host = new Pool(Configs.Hybrid))
      using (Pool dev = new Pool(Configs.Hybrid))
      using (Pool plain = new Pool(Configs.Paged)) {
        // Dirty a state slot of both pools and free it: a slot handed out again must be zeroed.
        foreach (Pool p in new Pool[] { host, dev }) {
          int[] dirty = p.MambaAlloc(1);
          p.MambaWrite(1, dirty[0], Configs.Bytes(Configs.Ramp(12, 9)), Configs.Bytes(Configs.Ramp(32, 9)));
          p.MambaFree(dirty);
        }
        // Every slot: the ids of MambaAlloc on the twin pool, all states zero.
        int[] want = host.MambaAlloc(20);
        int[] slots = dev.MambaAllocAsync(20, IntPtr.Zero);
        dev.Synchronize(IntPtr.Zero);
        CollectionAssert.AreEqual(want, slots);
        byte[] zero = new byte[3 * (ConvBytes + SsmBytes)];
        foreach (int slot in slots) CollectionAssert.AreEqual(zero, State(dev, slot), "slot " + slot + " is not zeroed");
        Assert.AreEqual(0UL, dev.MambaAvailable());
        Configs.Expect(Status.OutOfMemory, () => dev.MambaAllocAsync(1, IntPtr.Zero));
        dev.MambaFree(Configs.Slice(slots, 10, 10));

        // Fork: a new slot holding a copy of a written state.
        dev.MambaWrite(1, slots[0], Configs.Bytes(Configs.Ramp(12, 1)), Configs.Bytes(Configs.Ramp(32, -3)));
        int fork = dev.MambaForkAsync(slots[0], IntPtr.Zero);
        dev.Synchronize(IntPtr.Zero);
        Assert.IsTrue(fork >= 1 && fork != slots[0], "fork " + fork);
        CollectionAssert.AreEqual(State(dev, slots[0]), State(dev, fork));
        Assert.AreEqual(9UL, dev.MambaAvailable());

        // Batched copy, slot ids at host addresses: slots[2] <- slots[1], fork <- slots[1].
        dev.MambaWrite(1, slots[1], Configs.Bytes(Configs.Ramp(12, 40)), Configs.Bytes(Configs.Ramp(32, -40)));
        IntPtr src = Ints(slots[1], slots[1]);
        IntPtr dst = Ints(slots[2], fork);
        dev.MambaCopyAsync(src, 2, dst, 2, IntPtr.Zero);
        dev.Synchronize(IntPtr.Zero);
        CollectionAssert.AreEqual(State(dev, slots[1]), State(dev, slots[2]));
        CollectionAssert.AreEqual(State(dev, slots[1]), State(dev, fork));
        CollectionAssert.AreNotEqual(State(dev, slots[1]), State(dev, slots[0]));

        // Lengths that differ, a free slot (nothing copied), a free fork source, a negative count.
        Configs.Expect(Status.InvalidArgument, () => dev.MambaCopyAsync(src, 2, dst, 1, IntPtr.Zero));
        IntPtr freeDst = Ints(slots[3], slots[15]);
        Configs.Expect(Status.InvalidArgument, () => dev.MambaCopyAsync(src, 2, freeDst, 2, IntPtr.Zero));
        CollectionAssert.AreEqual(zero, State(dev, slots[3]), "slot of a rejected copy");
        Configs.Expect(Status.InvalidArgument, () => dev.MambaForkAsync(slots[15], IntPtr.Zero));
        Assert.Throws<ArgumentOutOfRangeException>(() => dev.MambaAllocAsync(-1, IntPtr.Zero));
        Assert.AreEqual(9UL, dev.MambaAvailable());
        dev.Check();

        // No mamba states: unsupported.
        Configs.Expect(Status.Unsupported, () => plain.MambaAllocAsync(1, IntPtr.Zero));
        Configs.Expect(Status.Unsupported, () => plain.MambaForkAsync(1, IntPtr.Zero));
        Configs.Expect(Status.Unsupported, () => plain.MambaCopyAsync(src, 1, dst, 1, IntPtr.Zero));
      }
    }

    [Test]
    public void Errors() {
      using (Pool pool = new Pool(Configs.Paged))
      using (Pool swa = new Pool(Configs.Swa)) {
        IntPtr slots = Longs(0, 0, 0, 0);
        IntPtr lens = Longs(0);
        IntPtr seq = Longs(4);
        IntPtr last = Longs(-1);
        // A NULL address with a length, a wrong slot count.
        Configs.Expect(Status.InvalidArgument, () => pool.AllocAsync(IntPtr.Zero, 4, IntPtr.Zero));
        Configs.Expect(Status.InvalidArgument, () => pool.ExtendAsync(
            new long[] { 0 }, new long[] { 4 }, lens, seq, last, slots, 3, IntPtr.Zero, 0, IntPtr.Zero));
        // Host lengths that disagree with each other, or with the "device" ones.
        Configs.Expect(Status.InvalidArgument, () => pool.ExtendAsync(
            new long[] { 0 }, new long[] { 4, 4 }, lens, seq, last, slots, 4, IntPtr.Zero, 0, IntPtr.Zero));
        Configs.Expect(Status.InvalidArgument, () => pool.ExtendPages(new long[] { 0, 0 }, new long[] { 4 }));
        IntPtr otherSeq = Longs(8);
        KvPoolException e = Configs.Expect(Status.InvalidArgument, () => pool.ExtendAsync(
            new long[] { 0 }, new long[] { 4 }, lens, otherSeq, last, slots, 4, IntPtr.Zero, 0, IntPtr.Zero));
        StringAssert.Contains("seq_lens", e.Message);
        Assert.AreEqual(64UL, pool.Available());
        // A page that is not allocated.
        Configs.Expect(Status.InvalidArgument, () => pool.FreePagesAsync(Longs(2), 1, IntPtr.Zero));
        // swa has no stream-ordered allocation.
        Configs.Expect(Status.Unsupported, () => swa.AllocAsync(slots, 4, IntPtr.Zero));
      }
      // A disposed pool (its handle is NULL).
      Pool closed = new Pool(Configs.Paged);
      closed.Dispose();
      Configs.Expect(Status.InvalidArgument, () => closed.Synchronize(IntPtr.Zero));
      Configs.Expect(Status.InvalidArgument, () => closed.AllocAsync(Longs(0), 1, IntPtr.Zero));
      Assert.AreEqual(11, (int)Status.DeviceFault);
    }

    [Test]
    public void CreateWithAllocator() {
      using (Pool pool = Pool.WithAllocator(Configs.Paged, IntPtr.Zero)) {
        Assert.AreEqual("cpu", pool.Backend());
        long[] slots = pool.Alloc(8);
        CollectionAssert.AreEqual(Configs.Range(4, 11), slots);
        byte[] k = Configs.Bytes(Configs.Ramp(16, 3));
        pool.SetKv(0, new long[] { slots[0] }, k, k, DType.F32);
        byte[] gotK = new byte[k.Length];
        byte[] gotV = new byte[k.Length];
        pool.GetKv(0, new long[] { slots[0] }, gotK, gotV, DType.F32);
        CollectionAssert.AreEqual(k, gotK);
        CollectionAssert.AreEqual(k, gotV);
      }
      // A kvpool_allocator whose struct_size is 0 (zeroed memory) is rejected.
      IntPtr zeroed = Native(64);
      Configs.Expect(Status.InvalidArgument, () => Pool.WithAllocator(Configs.Paged, zeroed).Dispose());
      Configs.Expect(Status.Config, () => Pool.WithAllocator("{", IntPtr.Zero).Dispose());
    }

    /// <summary>A request's state as comparable values: SeqInfo's fields, then its slots.</summary>
    private static List<long> SeqState(Pool pool, ulong seq) {
      SeqInfo info = pool.SeqInfo(seq);
      var state = new List<long> { info.Row, (long)info.Tokens, (long)info.Computed, (long)info.Cached,
                                   (long)info.PrefixHit };
      state.AddRange(pool.SeqSlots(seq));
      return state;
    }

    private static void SameState(string what, Pool host, Pool dev, params ulong[] seqs) {
      foreach (ulong seq in seqs) {
        CollectionAssert.AreEqual(SeqState(host, seq), SeqState(dev, seq), what + ": request " + seq);
      }
      Assert.AreEqual(PrefixCacheTests.CheckAccounting(host).ToString(), PrefixCacheTests.CheckAccounting(dev).ToString(),
                      what);
    }

    [Test]
    public void SeqMatchesHostCalls() {
      using (Pool host = new Pool(PrefixCacheTests.Cache))
      using (Pool dev = new Pool(PrefixCacheTests.Cache)) {
        // Two requests with a shared 8-token prefix, begun on both pools.
        int[] promptA = PrefixCacheTests.Tokens(100, 10);
        int[] promptB = new int[11];
        Array.Copy(promptA, promptB, 8);
        promptB[8] = 500;
        promptB[9] = 501;
        promptB[10] = 502;
        ulong a = host.Begin(promptA).Seq;
        ulong b = host.Begin(promptB).Seq;
        Assert.AreEqual(a, dev.Begin(promptA).Seq);
        Assert.AreEqual(b, dev.Begin(promptB).Seq);

        // Two prefill chunks of the batch: {6, 5} then {4, 6}.
        foreach (long[] chunks in new[] { new long[] { 6, 5 }, new long[] { 4, 6 } }) {
          long[] wantChunk = host.SeqExtend(new[] { a, b }, chunks);
          IntPtr chunkSlots = Longs(new long[wantChunk.Length]);
          dev.SeqExtendAsync(new[] { a, b }, chunks, chunkSlots, (ulong)wantChunk.Length, IntPtr.Zero);
          dev.Synchronize(IntPtr.Zero);
          CollectionAssert.AreEqual(wantChunk, ReadLongs(chunkSlots, wantChunk.Length));
          SameState("SeqExtendAsync", host, dev, a, b);
        }

        // A third request reuses A's cached prefix (two whole pages).
        int[] promptC = (int[])promptA.Clone();
        promptC[8] = 7;
        promptC[9] = 8;
        SeqBegin hc = host.Begin(promptC);
        SeqBegin dc = dev.Begin(promptC);
        Assert.AreEqual(hc.Seq, dc.Seq);
        Assert.AreEqual(8UL, hc.Cached);
        Assert.AreEqual(8UL, dc.Cached);
        ulong c = hc.Seq;
        long[] want = host.SeqExtend(new[] { c }, new long[] { 2 });
        IntPtr slots = Longs(0, 0);
        dev.SeqExtendAsync(new[] { c }, new long[] { 2 }, slots, 2, IntPtr.Zero);
        CollectionAssert.AreEqual(want, ReadLongs(slots, 2));
        SameState("SeqExtendAsync (cached prefix)", host, dev, a, b, c);

        // A decode step of all three.
        ulong[] seqs = { a, b, c };
        int[] tokens = { 901, 902, 903 };
        long[] wantDecode = host.SeqDecode(seqs, tokens);
        IntPtr decSlots = Longs(0, 0, 0);
        dev.SeqDecodeAsync(seqs, tokens, decSlots, 3, IntPtr.Zero);
        dev.Synchronize(IntPtr.Zero);
        CollectionAssert.AreEqual(wantDecode, ReadLongs(decSlots, 3));
        SameState("SeqDecodeAsync", host, dev, a, b, c);

        // A slot count other than the batch's is rejected and changes nothing.
        List<long> before = SeqState(dev, a);
        Configs.Expect(Status.InvalidArgument, () => dev.SeqDecodeAsync(seqs, tokens, decSlots, 2, IntPtr.Zero));
        ulong d = dev.Begin(PrefixCacheTests.Tokens(300, 6)).Seq;
        IntPtr big = Longs(new long[6]);
        Configs.Expect(Status.InvalidArgument, () => dev.SeqExtendAsync(new[] { d }, new long[] { 6 }, big, 5,
                                                                         IntPtr.Zero));
        Configs.Expect(Status.InvalidArgument, () => dev.SeqExtendAsync(new[] { d }, new long[] { 6, 1 }, big, 6,
                                                                         IntPtr.Zero));
        CollectionAssert.AreEqual(before, SeqState(dev, a));
        Assert.AreEqual(0UL, dev.SeqInfo(d).Computed);
        PrefixCacheTests.CheckAccounting(dev);
        dev.SeqExtendAsync(new[] { d }, new long[] { 6 }, big, 6, IntPtr.Zero);
        foreach (ulong seq in seqs) {
          host.Finish(seq, 11);
          dev.Finish(seq, 11);
        }
        dev.Abort(d);
        PrefixCacheTests.CheckAccounting(host);
        PrefixCacheTests.CheckAccounting(dev);
      }
    }

    [Test]
    public void DecodeGraphMatchesDecode() {
      using (Pool host = new Pool(Configs.Paged))
      using (Pool dev = new Pool(Configs.Paged))
      using (Pool swa = new Pool(Configs.Swa)) {
        // Three requests get their first 5, 3 and 2 tokens: pages 1-2, 3 and 4, 12 of the 16 pages
        // stay free.
        long[] prefix = { 0, 0, 0 };
        long[] first = { 5, 3, 2 };
        long[] none = { -1, -1, -1 };
        long[] want = host.Extend(prefix, first, none);
        CollectionAssert.AreEqual(new long[] { 4, 5, 6, 7, 8, 12, 13, 14, 16, 17 }, want);
        CollectionAssert.AreEqual(want, dev.Extend(prefix, first, none));

        // Bad input is refused and takes nothing.
        IntPtr out1 = Longs(-7);
        Configs.Expect(Status.InvalidArgument, () => dev.DecodeGraphAsync(1, Longs(0), Longs(8), out1, IntPtr.Zero));
        Configs.Expect(Status.InvalidArgument, () => dev.DecodeGraphAsync(1, IntPtr.Zero, Longs(8), out1, IntPtr.Zero));
        CollectionAssert.AreEqual(new long[] { -7 }, ReadLongs(out1, 1));
        Configs.Expect(Status.InvalidArgument, () => dev.DecodeWatermark(new long[0]));  // an empty batch
        Configs.Expect(Status.InvalidArgument, () => dev.DecodeWatermark(new long[] { 6, 0, 3 }));  // a length of 0
        Configs.Expect(Status.InvalidArgument, () => dev.DecodeGraphAdvance(new long[] { 0 }, 1));
        Assert.Throws<ArgumentNullException>(() => dev.DecodeWatermark(null));
        Assert.AreEqual(64UL - 16, dev.Available());

        // The steps start at lengths 6, 4 and 3; a request takes a page at lengths 5, 9, 13, ...:
        // 17 steps take the 12 free pages, an 18th would take a 13th.
        long[] seq = { 6, 4, 3 };
        ulong steps = dev.DecodeWatermark(seq);
        Assert.AreEqual(17UL, steps);
        Assert.AreEqual(steps, host.DecodeWatermark(seq));

        // The graph's buffers: the engine's kernel would make each step's slots the next step's
        // lastLocs and add one to every length.
        IntPtr seqDev = Longs(seq);
        IntPtr lastDev = Longs(8, 14, 17);
        IntPtr slotsDev = Longs(0, 0, 0);
        long[] hostLast = { 8, 14, 17 };
        for (ulong k = 0; k < steps; k++) {
          long[] lens = ReadLongs(seqDev, 3);
          long[] wantStep = host.Decode(lens, hostLast);
          dev.DecodeGraphAsync((ulong)seq.Length, seqDev, lastDev, slotsDev, IntPtr.Zero);
          CollectionAssert.AreEqual(wantStep, ReadLongs(slotsDev, 3), "step " + k);
          Marshal.Copy(wantStep, 0, lastDev, 3);
          for (int i = 0; i < 3; i++) lens[i]++;
          Marshal.Copy(lens, 0, seqDev, 3);
          hostLast = wantStep;
        }
        dev.Synchronize(IntPtr.Zero);
        dev.DecodeGraphAdvance(seq, steps);
        Assert.AreEqual(0UL, host.Available());
        Assert.AreEqual(0UL, dev.Available());

        // The step after the watermark does not fit, on either pool.
        long[] after = ReadLongs(seqDev, 3);
        CollectionAssert.AreEqual(new long[] { 23, 21, 20 }, after);
        Configs.Expect(Status.OutOfMemory, () => dev.DecodeGraphAsync(3, seqDev, lastDev, slotsDev, IntPtr.Zero));
        Configs.Expect(Status.OutOfMemory, () => host.Decode(after, hostLast));
        Assert.AreEqual(0UL, dev.DecodeWatermark(after));
        dev.Check();

        // swa has no pages to count.
        Configs.Expect(Status.Unsupported, () => swa.DecodeWatermark(new long[] { 1 }));
      }
    }
  }
}
