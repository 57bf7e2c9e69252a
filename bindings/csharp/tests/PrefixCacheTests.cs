// NUnit 2.6 tests of the radix prefix cache, KV events and the request API (radix.h, seq.h).
using System;
using System.Linq;
using System.Security.Cryptography;
using KvPool;
using NUnit.Framework;

namespace KvPool.Tests {

  [TestFixture]
  public class PrefixCacheTests {
    // page_size 4, 128 tokens, a radix cache with LRU eviction and KV events.
    internal const string Cache =
        "{\"model\":{\"num_layers\":2,\"kv_heads\":2,\"head_dim\":8}," +
        "\"pool\":{\"kv_dtype\":\"f32\",\"page_size\":4,\"max_total_tokens\":128,\"max_running_requests\":8," +
        "\"max_context_len\":256},\"prefix_cache\":{\"kind\":\"radix\",\"eviction\":\"lru\",\"events\":true}}";
    // The same pool with the chunk cache (no radix tree).
    static readonly string Chunk =
        Cache.Replace("{\"kind\":\"radix\",\"eviction\":\"lru\",\"events\":true}", "{\"kind\":\"chunk\"}");

    internal static int[] Tokens(int from, int n) {
      return Enumerable.Range(from, n).ToArray();
    }

    static int[] Slice(int[] a, int from, int n) {
      return a.Skip(from).Take(n).ToArray();
    }

    internal static Accounting CheckAccounting(Pool pool) {
      Accounting a = pool.Accounting();
      Assert.AreEqual(128UL, a.Capacity);
      Assert.IsTrue(a.Holds, a.ToString());
      Assert.AreEqual(a.Capacity, a.Available + a.Evictable + a.Protected + a.Uncached, a.ToString());
      StringAssert.StartsWith("ok", pool.Check());
      return a;
    }

    [Test]
    public void PrefillDecodeFinishReuse() {
      using (Pool pool = new Pool(Cache)) {
        int[] prompt = Tokens(100, 10);
        SeqBegin a = pool.Begin(prompt);
        Assert.AreNotEqual(0UL, a.Seq);
        Assert.AreEqual(0UL, a.Cached);
        long[] slots = pool.SeqExtend(new[] { a.Seq }, new long[] { 10 });
        Assert.AreEqual(10, slots.Length);
        SeqInfo info = pool.SeqInfo(a.Seq);
        Assert.AreEqual(8UL, info.Cached);  // the two whole pages went to the tree
        Assert.AreEqual(10UL, info.Tokens);
        Assert.AreEqual(10UL, info.Computed);
        Assert.AreEqual(0UL, info.PrefixHit);
        Assert.GreaterOrEqual(info.Row, 1);
        CollectionAssert.AreEqual(slots, pool.SeqSlots(a.Seq));
        Accounting acc = CheckAccounting(pool);
        Assert.AreEqual(8UL, acc.Protected);
        Assert.AreEqual(116UL, acc.Available);

        long[] d = pool.SeqDecode(new[] { a.Seq }, new[] { 555 });
        CollectionAssert.AreEqual(new[] { slots[9] + 1 }, d);  // same page
        Assert.AreEqual(11UL, pool.SeqInfo(a.Seq).Tokens);
        pool.Finish(a.Seq, 11);
        RadixSizes sizes = pool.RadixSizes();
        Assert.AreEqual(8UL, sizes.Total);
        Assert.AreEqual(8UL, sizes.Evictable);
        Assert.AreEqual(0UL, sizes.Protected);
        Configs.Expect(Status.InvalidArgument, () => pool.Finish(a.Seq, 11));  // double finish
        Configs.Expect(Status.InvalidArgument, () => pool.SeqInfo(a.Seq));
        CheckAccounting(pool);

        // The same prompt again: its two pages come from the cache.
        SeqBegin b = pool.Begin(prompt, null);
        Assert.AreEqual(8UL, b.Cached);
        Assert.AreNotEqual(a.Seq, b.Seq);
        CollectionAssert.AreEqual(slots.Take(8).ToArray(), pool.SeqSlots(b.Seq));
        Assert.AreEqual(8UL, pool.SeqInfo(b.Seq).PrefixHit);
        Assert.AreEqual(-1, pool.SeqInfo(b.Seq).Row);
        Assert.AreEqual(2, pool.SeqExtend(new[] { b.Seq }, new long[] { 2 }).Length);
        Assert.AreEqual(10UL, pool.SeqInfo(b.Seq).Computed);

        // Retract keeps the request; SeqExtend recomputes only what is not cached.
        Assert.AreEqual(8UL, pool.Retract(b.Seq));
        Assert.AreEqual(-1, pool.SeqInfo(b.Seq).Row);
        CheckAccounting(pool);
        Assert.AreEqual(2, pool.SeqExtend(new[] { b.Seq }, new long[] { 2 }).Length);
        pool.Abort(b.Seq);
        Configs.Expect(Status.InvalidArgument, () => pool.Abort(b.Seq));

        // Another namespace shares nothing.
        SeqBegin c = pool.Begin(prompt, "lora-7");
        Assert.AreEqual(0UL, c.Cached);
        pool.Abort(c.Seq);
        CheckAccounting(pool);
      }
    }

    [Test]
    public void BatchesAndOutOfMemory() {
      using (Pool pool = new Pool(Cache)) {
        ulong a = pool.Begin(Tokens(0, 6)).Seq;
        ulong b = pool.Begin(Tokens(50, 3)).Seq;
        Assert.AreEqual(7, pool.SeqExtend(new[] { a, b }, new long[] { 4, 3 }).Length);
        Assert.AreEqual(2, pool.SeqExtend(new[] { a }, new long[] { 2 }).Length);
        Assert.AreEqual(2, pool.SeqDecode(new[] { a, b }, new[] { 7, 8 }).Length);
        Configs.Expect(Status.InvalidArgument, () => pool.SeqDecode(new[] { a, b }, new[] { 7 }));

        ulong c = pool.Begin(Tokens(1000, 100)).Seq;
        pool.SeqExtend(new[] { c }, new long[] { 100 });
        ulong d = pool.Begin(Tokens(5000, 100)).Seq;
        string before = CheckAccounting(pool).ToString();
        Configs.Expect(Status.OutOfMemory, () => pool.SeqExtend(new[] { d }, new long[] { 100 }));
        Assert.AreEqual(before, CheckAccounting(pool).ToString());  // nothing changed
        foreach (ulong s in new[] { a, b, c, d }) pool.Abort(s);
        Accounting acc = CheckAccounting(pool);
        Assert.AreEqual(0UL, acc.Uncached);
        Assert.AreEqual(0UL, acc.Protected);
      }
    }

    [Test]
    public void InsertMatchLockEvictReset() {
      using (Pool pool = new Pool(Cache)) {
        int[] key = Tokens(1, 8);
        long[] slots = pool.Alloc(8);
        InsertResult ins = pool.Insert(key, slots);
        Assert.AreEqual(0UL, ins.PrefixLength);
        Assert.AreNotEqual(0UL, ins.Node);
        Assert.AreEqual(8UL, pool.RadixSizes().Evictable);

        MatchResult m = pool.Match(Tokens(1, 10));  // the unaligned tail never matches
        CollectionAssert.AreEqual(slots, m.Slots);
        Assert.AreEqual(ins.Node, m.Node);
        CollectionAssert.AreEqual(slots.Take(4).ToArray(), pool.Match(new[] { 1, 2, 3, 4, 99, 98, 97, 96 }).Slots);
        Assert.AreEqual(0, pool.Match(key, "other namespace").Length);
        Assert.AreEqual(0, pool.Match(new int[0]).Length);

        pool.Lock(ins.Node);
        Assert.AreEqual(8UL, pool.RadixSizes().Protected);
        Assert.AreEqual(0UL, pool.RadixSizes().Evictable);
        Assert.AreEqual(0UL, pool.Evict(8));  // locked
        pool.Unlock(ins.Node);
        Configs.Expect(Status.InvalidArgument, () => pool.Unlock(ins.Node));

        long[] longer = pool.Alloc(12);
        Assert.AreEqual(8UL, pool.Insert(Tokens(1, 12), longer, "", 5).PrefixLength);
        pool.Free(longer.Take(8).ToArray());  // duplicates stay the caller's
        Assert.AreEqual(12UL, pool.RadixSizes().Total);
        long[] odd = pool.Alloc(8);
        Configs.Expect(Status.InvalidArgument, () => pool.Insert(Tokens(50, 6), odd.Take(6).ToArray()));
        pool.Free(odd);

        Assert.AreEqual(12UL, pool.Evict(100));
        Assert.AreEqual(0UL, pool.RadixSizes().Total);
        Assert.AreEqual(128UL, pool.Available());
        Configs.Expect(Status.InvalidArgument, () => pool.Lock(ins.Node));  // stale handle

        pool.Insert(key, pool.Alloc(8));
        pool.ResetCache();
        Assert.AreEqual(0UL, pool.RadixSizes().Total);
        Assert.AreEqual(128UL, pool.Available());
        StringAssert.StartsWith("ok", pool.Check());
      }
    }

    // The documented page hash, with System.Security.Cryptography.SHA256 only.
    static byte[] Sha256Page(byte[] parent, int[] tokens) {
      byte[] input = new byte[(parent == null ? 0 : parent.Length) + 4 * tokens.Length];
      int n = 0;
      if (parent != null) {
        Buffer.BlockCopy(parent, 0, input, 0, parent.Length);
        n = parent.Length;
      }
      foreach (int t in tokens) {
        uint u = (uint)t;
        input[n++] = (byte)u;
        input[n++] = (byte)(u >> 8);
        input[n++] = (byte)(u >> 16);
        input[n++] = (byte)(u >> 24);
      }
      using (SHA256 sha = SHA256.Create()) {
        return sha.ComputeHash(input);
      }
    }

    static long IdOf(byte[] digest) {
      ulong id = 0;
      for (int i = 0; i < 8; i++) id = (id << 8) | digest[i];
      return unchecked((long)id);
    }

    [Test]
    public void EventsAndPageHash() {
      using (Pool pool = new Pool(Cache)) {
        Assert.AreEqual(0, pool.TakeEvents().Length);
        int[] prompt = Tokens(100, 10);
        ulong a = pool.Begin(prompt).Seq;
        pool.SeqExtend(new[] { a }, new long[] { 10 });
        pool.Finish(a, 10);
        KvEvent[] events = pool.TakeEvents();
        Assert.AreEqual(2, events.Length);
        KvEvent first = events[0], second = events[1];
        Assert.AreEqual(EventType.BlockStored, first.Type);
        Assert.AreEqual(EventType.BlockStored, second.Type);
        Assert.IsFalse(first.HasParent);
        Assert.IsTrue(second.HasParent);
        Assert.AreEqual(first.BlockHash, second.ParentHash);
        Assert.AreNotEqual(first.BlockHash, second.BlockHash);
        CollectionAssert.AreEqual(Slice(prompt, 0, 4), first.Tokens);
        CollectionAssert.AreEqual(Slice(prompt, 4, 4), second.Tokens);

        PageHash h1 = Pool.PageHash(Slice(prompt, 0, 4));
        PageHash h2 = Pool.PageHash(Slice(prompt, 4, 4), h1.Digest);
        Assert.AreEqual(first.BlockHash, h1.Id);
        Assert.AreEqual(second.BlockHash, h2.Id);
        byte[] want1 = Sha256Page(null, Slice(prompt, 0, 4));
        byte[] want2 = Sha256Page(want1, Slice(prompt, 4, 4));
        CollectionAssert.AreEqual(want1, h1.Digest);
        CollectionAssert.AreEqual(want2, h2.Digest);
        Assert.AreEqual(IdOf(want1), h1.Id);
        Assert.AreEqual(IdOf(want2), h2.Id);
        Configs.Expect(Status.InvalidArgument, () => Pool.PageHash(prompt, new byte[] { 1, 2, 3 }));
        Assert.AreEqual(0, pool.TakeEvents().Length);

        // 25 events: more than TakeEvents first makes room for.
        ulong b = pool.Begin(Tokens(1000, 101)).Seq;
        pool.SeqExtend(new[] { b }, new long[] { 101 });
        pool.Finish(b, 101);
        events = pool.TakeEvents();
        Assert.AreEqual(25, events.Length);
        for (int i = 0; i < events.Length; i++) {
          Assert.AreEqual(EventType.BlockStored, events[i].Type);
          CollectionAssert.AreEqual(Tokens(1000 + 4 * i, 4), events[i].Tokens);
          if (i > 0) Assert.AreEqual(events[i - 1].BlockHash, events[i].ParentHash);
        }

        Assert.GreaterOrEqual(pool.Evict(4), 4UL);
        events = pool.TakeEvents();
        Assert.IsNotEmpty(events);
        Assert.AreEqual(EventType.BlockRemoved, events[0].Type);
        Assert.AreEqual(0, events[0].Tokens.Length);
        pool.ResetCache();
        events = pool.TakeEvents();
        Assert.AreEqual(EventType.AllBlocksCleared, events[events.Length - 1].Type);
      }
    }

    [Test]
    public void RadixUnsupportedWithoutTree() {
      using (Pool pool = new Pool(Chunk)) {
        Configs.Expect(Status.Unsupported, () => pool.Match(Tokens(1, 4)));
        long[] slots = pool.Alloc(4);
        Configs.Expect(Status.Unsupported, () => pool.Insert(Tokens(1, 4), slots));
        Configs.Expect(Status.Unsupported, () => pool.RadixSizes());
        Configs.Expect(Status.Unsupported, () => pool.Evict(4));
        Configs.Expect(Status.Unsupported, () => pool.Lock(1));
        Configs.Expect(Status.Unsupported, () => pool.Unlock(1));
        Configs.Expect(Status.Unsupported, () => pool.ResetCache());
        Configs.Expect(Status.Unsupported, () => pool.TakeEvents());
        // Requests work without a tree, sharing nothing.
        ulong a = pool.Begin(Tokens(1, 10)).Seq;
        pool.SeqExtend(new[] { a }, new long[] { 10 });
        pool.Finish(a, 10);
        SeqBegin again = pool.Begin(Tokens(1, 10));
        Assert.AreEqual(0UL, again.Cached);
        pool.Abort(again.Seq);
      }
    }
  }
}
