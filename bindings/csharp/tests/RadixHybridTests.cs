// NUnit 2.6 tests of the mamba (hybrid_linear) and swa radix caches and kvseq on those pools.
using System;
using System.Linq;
using KvPool;
using NUnit.Framework;

namespace KvPool.Tests {

  [TestFixture]
  public class RadixHybridTests {
    // hybrid_linear with the mamba radix cache: 64 tokens, 10 states, 2 rows, page_size 1.
    const string HybridRadix =
        "{\"model\":{\"num_layers\":4,\"attention\":\"hybrid_linear\",\"kv_heads\":2,\"head_dim\":8," +
        "\"full_attention_layers\":[3],\"mamba\":{\"conv_shape\":[4,3],\"ssm_shape\":[2,4,4]," +
        "\"conv_dtype\":\"f32\",\"ssm_dtype\":\"f32\"}},\"pool\":{\"kv_dtype\":\"f32\",\"max_total_tokens\":64," +
        "\"max_running_requests\":2,\"mamba_cache_size\":10,\"max_context_len\":64},\"prefix_cache\":{\"kind\":\"radix\"}}";
    // swa with the swa radix cache: window 4, 64 full and 32 window slots.
    const string SwaRadix =
        "{\"model\":{\"num_layers\":4,\"attention\":\"swa\",\"kv_heads\":2,\"head_dim\":8,\"sliding_window\":4," +
        "\"swa_layer_pattern\":\"SF\"},\"pool\":{\"kv_dtype\":\"f32\",\"max_total_tokens\":48,\"swa_full_tokens_ratio\":0.5," +
        "\"max_running_requests\":4,\"max_context_len\":64},\"prefix_cache\":{\"kind\":\"radix\"}}";

    static int[] Tokens(int from, int n) {
      return Enumerable.Range(from, n).ToArray();
    }

    static byte[] Floats(float b, int n) {
      byte[] bytes = new byte[4 * n];
      for (int i = 0; i < n; ++i) Buffer.BlockCopy(BitConverter.GetBytes(b + i), 0, bytes, 4 * i, 4);
      return bytes;
    }

    [Test]
    public void MambaMatchInsertCopyOnWriteAndEvict() {
      using (Pool pool = new Pool(HybridRadix)) {
        int[] key = Tokens(1, 6);
        long[] slots = pool.Alloc(6);
        int state = pool.MambaAlloc(1)[0];
        pool.MambaWrite(0, state, Floats(0.5f, 12), new byte[128]);
        InsertResult ins = pool.InsertMamba(key, slots, state);
        Assert.AreEqual(0UL, ins.PrefixLength);
        Assert.IsFalse(ins.StateExisted);
        Assert.AreEqual(1UL, pool.StateSizes().Evictable);

        int mine = pool.MambaAlloc(1)[0];
        MatchResult m = pool.MatchMamba(Tokens(1, 7), null, mine);
        CollectionAssert.AreEqual(slots, m.Slots);
        Assert.AreEqual(ins.Node, m.Node);
        Assert.AreEqual(state, m.MambaSlot);
        byte[] conv = new byte[48];
        pool.MambaRead(0, mine, conv, new byte[128]);
        CollectionAssert.AreEqual(Floats(0.5f, 12), conv);
        Assert.AreEqual(0, pool.MatchMamba(Tokens(1, 4)).Length);  // no state at its end
        Configs.Expect(Status.InvalidArgument, () => pool.InsertMamba(Tokens(50, 2), new long[] { slots[0], slots[1] }, mine));
        Configs.Expect(Status.Unsupported, () => pool.Insert(key, slots));
        Configs.Expect(Status.Unsupported, () => pool.EvictSwa(1, 1));
        Assert.AreEqual(1UL, pool.EvictMamba(1));
        Assert.AreEqual(0UL, pool.RadixSizes().Total);
      }
    }

    [Test]
    public void SeqOnHybridOwnsAStateSlot() {
      using (Pool pool = new Pool(HybridRadix)) {
        SeqBegin a = pool.Begin(Tokens(1, 8));
        int slot = pool.SeqMambaSlot(a.Seq);
        Assert.IsTrue(slot >= 1);
        pool.SeqExtend(new ulong[] { a.Seq }, new long[] { 8 });
        pool.Finish(a.Seq, 8);
        Assert.AreEqual(1UL, pool.StateSizes().Evictable);
        SeqBegin b = pool.Begin(Tokens(1, 9));
        Assert.AreEqual(8UL, b.Cached);
        Assert.AreNotEqual(slot, pool.SeqMambaSlot(b.Seq));
        pool.Abort(b.Seq);
        Configs.Expect(Status.InvalidArgument, () => pool.SeqMambaSlot(b.Seq));
        Accounting acc = pool.Accounting();
        Assert.AreEqual(acc.Capacity, acc.Available + acc.Evictable + acc.Protected + acc.Uncached);
        StringAssert.StartsWith("ok", pool.Check());
      }
    }

    [Test]
    public void SwaInsertEvictAndWindowFreeing() {
      using (Pool pool = new Pool(SwaRadix)) {
        int[] key = Tokens(1, 6);
        long[] slots = pool.Alloc(6);
        Assert.AreEqual(0UL, pool.InsertSwa(key, slots, 0, 0).PrefixLength);
        Assert.AreEqual(6UL, pool.StateSizes().Evictable);
        Assert.AreEqual(6UL, pool.InsertSwa(key, pool.Alloc(6), 0, 0).PrefixLength);  // the tree frees our duplicates
        SwaAvailability av = pool.SwaAvailable();
        Assert.AreEqual(58UL, av.Full);
        Assert.AreEqual(26UL, av.Swa);
        CollectionAssert.AreEqual(new ulong[] { 6, 6 }, pool.EvictSwa(6, 0));
        Configs.Expect(Status.Unsupported, () => pool.EvictMamba(1));
        Configs.Expect(Status.Unsupported, () => pool.SeqMambaSlot(1));
        Configs.Expect(Status.InvalidArgument, () => pool.InsertSwa(key, new long[5], 0, 0));

        SeqBegin a = pool.Begin(Tokens(100, 10));
        pool.SeqExtend(new ulong[] { a.Seq }, new long[] { 10 });
        pool.SeqDecode(new ulong[] { a.Seq }, new int[] { 7 });
        av = pool.SwaAvailable();
        Assert.AreEqual(53UL, av.Full);
        Assert.AreEqual(27UL, av.Swa);  // 6 window slots left the window of token 10
        pool.Finish(a.Seq, 11);
        StringAssert.StartsWith("ok", pool.Check());
      }
    }
  }
}
