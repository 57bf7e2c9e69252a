package ai.kvpool.tests;

import static ai.kvpool.tests.Configs.expect;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertTrue;

import ai.kvpool.Accounting;
import ai.kvpool.InsertResult;
import ai.kvpool.MatchResult;
import ai.kvpool.Pool;
import ai.kvpool.RadixSizes;
import ai.kvpool.SeqBegin;
import ai.kvpool.Status;
import ai.kvpool.SwaAvailability;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.stream.IntStream;
import org.junit.Test;

/** The mamba (hybrid_linear) and swa radix caches and kvseq on those pools (radix.h, seq.h). */
public class RadixHybridTest {
  /** hybrid_linear with the mamba radix cache: 64 tokens, 10 states, 2 rows, page_size 1. */
  static final String HYBRID_RADIX = "{\"model\":{\"num_layers\":4,\"attention\":\"hybrid_linear\",\"kv_heads\":2,"
      + "\"head_dim\":8,\"full_attention_layers\":[3],\"mamba\":{\"conv_shape\":[4,3],\"ssm_shape\":[2,4,4],"
      + "\"conv_dtype\":\"f32\",\"ssm_dtype\":\"f32\"}},\"pool\":{\"kv_dtype\":\"f32\",\"max_total_tokens\":64,"
      + "\"max_running_requests\":2,\"mamba_cache_size\":10,\"max_context_len\":64},\"prefix_cache\":{\"kind\":\"radix\"}}";
  /** swa with the swa radix cache: window 4, 64 full and 32 window slots. */
  static final String SWA_RADIX = "{\"model\":{\"num_layers\":4,\"attention\":\"swa\",\"kv_heads\":2,\"head_dim\":8,"
      + "\"sliding_window\":4,\"swa_layer_pattern\":\"SF\"},\"pool\":{\"kv_dtype\":\"f32\",\"max_total_tokens\":48,"
      + "\"swa_full_tokens_ratio\":0.5,\"max_running_requests\":4,\"max_context_len\":64},\"prefix_cache\":{\"kind\":\"radix\"}}";

  static int[] tokens(int from, int n) {
    return IntStream.range(from, from + n).toArray();
  }

  static byte[] floats(float base, int n) {
    ByteBuffer b = ByteBuffer.allocate(4 * n).order(ByteOrder.nativeOrder());
    for (int i = 0; i < n; ++i) b.putFloat(base + i);
    return b.array();
  }

  @Test
  public void mambaMatchInsertCopyOnWriteAndEvict() {
    try (Pool pool = new Pool(HYBRID_RADIX)) {
      int[] key = tokens(1, 6);
      long[] slots = pool.alloc(6);
      int state = pool.mambaAlloc(1)[0];
      pool.mambaWrite(0, state, floats(0.5f, 12), new byte[128]);
      InsertResult ins = pool.insertMamba(key, slots, null, state);
      assertEquals(0, ins.getPrefixLength());
      assertFalse(ins.isStateExisted());
      RadixSizes states = pool.stateSizes();
      assertEquals(1, states.getEvictable());
      assertEquals(0, states.getProtected());

      int mine = pool.mambaAlloc(1)[0];
      MatchResult m = pool.matchMamba(tokens(1, 7), null, mine);
      assertArrayEquals(slots, m.getSlots());
      assertEquals(ins.getNode(), m.getNode());
      assertEquals(state, m.getMambaSlot());
      byte[] conv = new byte[48];
      pool.mambaRead(0, mine, conv, new byte[128]);
      assertArrayEquals(floats(0.5f, 12), conv);
      assertEquals(0, pool.matchMamba(tokens(1, 4), null, -1).getLength());  // no state at its end
      expect(Status.INVALID_ARGUMENT, () -> pool.insertMamba(tokens(50, 2), new long[] {slots[0], slots[1]}, null, mine));
      expect(Status.UNSUPPORTED, () -> pool.insert(key, slots, null, 0));
      expect(Status.UNSUPPORTED, () -> pool.evictSwa(1, 1));
      assertEquals(1, pool.evictMamba(1));
      assertEquals(0, pool.radixSizes().getTotal());
    }
  }

  @Test
  public void seqOnHybridOwnsAStateSlot() {
    try (Pool pool = new Pool(HYBRID_RADIX)) {
      SeqBegin a = pool.begin(tokens(1, 8), null);
      int slot = pool.seqMambaSlot(a.getSeq());
      assertTrue(slot >= 1);
      pool.seqExtend(new long[] {a.getSeq()}, new long[] {8});
      pool.finish(a.getSeq(), 8);
      assertEquals(1, pool.stateSizes().getEvictable());
      SeqBegin b = pool.begin(tokens(1, 9), null);
      assertEquals(8, b.getCached());
      assertNotEquals(slot, pool.seqMambaSlot(b.getSeq()));
      pool.abort(b.getSeq());
      expect(Status.INVALID_ARGUMENT, () -> pool.seqMambaSlot(b.getSeq()));
      Accounting acc = pool.accounting();
      assertEquals(acc.getCapacity(), acc.getAvailable() + acc.getEvictable() + acc.getProtected() + acc.getUncached());
      pool.check();
    }
  }

  @Test
  public void swaInsertEvictAndWindowFreeing() {
    try (Pool pool = new Pool(SWA_RADIX)) {
      int[] key = tokens(1, 6);
      long[] slots = pool.alloc(6);
      InsertResult ins = pool.insertSwa(key, slots, null, 0, 0);
      assertEquals(0, ins.getPrefixLength());
      assertEquals(6, pool.stateSizes().getEvictable());
      InsertResult dup = pool.insertSwa(key, pool.alloc(6), null, 0, 0);  // the tree frees our duplicates
      assertEquals(6, dup.getPrefixLength());
      SwaAvailability av = pool.swaAvailable();
      assertEquals(58, av.getFull());
      assertEquals(26, av.getSwa());
      assertArrayEquals(new long[] {6, 6}, pool.evictSwa(6, 0));
      expect(Status.UNSUPPORTED, () -> pool.evictMamba(1));
      expect(Status.UNSUPPORTED, () -> pool.seqMambaSlot(1));
      expect(Status.INVALID_ARGUMENT, () -> pool.insertSwa(key, new long[5], null, 0, 0));

      SeqBegin a = pool.begin(tokens(100, 10), null);
      pool.seqExtend(new long[] {a.getSeq()}, new long[] {10});
      pool.seqDecode(new long[] {a.getSeq()}, new int[] {7});
      av = pool.swaAvailable();
      assertEquals(53, av.getFull());
      assertEquals(27, av.getSwa());  // 6 window slots left the window of token 10
      pool.finish(a.getSeq(), 11);
      pool.check();
    }
  }
}
