package ai.kvpool.tests;

import static ai.kvpool.tests.Configs.expect;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import ai.kvpool.AllocList;
import ai.kvpool.DType;
import ai.kvpool.KvPoolException;
import ai.kvpool.Pool;
import ai.kvpool.SeqBegin;
import ai.kvpool.SeqInfo;
import ai.kvpool.Status;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.Test;

/**
 * The device.h calls on CPU pools: their "device memory" is host memory (direct ByteBuffers,
 * passed by address), they run at once, and their results must equal those of the host-array
 * calls on a second, identical pool.
 */
public class DeviceTest {
  /**
   * Every buffer a test made: an address is only valid while its buffer is reachable, and
   * buffers made inline (addr(longs(1, 2))) would otherwise be garbage right after addr().
   */
  private final List<ByteBuffer> keep = new ArrayList<>();

  /** A direct buffer in native order holding the values. */
  private ByteBuffer longs(long... values) {
    ByteBuffer b = ByteBuffer.allocateDirect(Math.max(8, 8 * values.length)).order(ByteOrder.nativeOrder());
    b.asLongBuffer().put(values);
    keep.add(b);
    return b;
  }

  private ByteBuffer ints(int... values) {
    ByteBuffer b = ByteBuffer.allocateDirect(Math.max(4, 4 * values.length)).order(ByteOrder.nativeOrder());
    b.asIntBuffer().put(values);
    keep.add(b);
    return b;
  }

  private ByteBuffer floats(float[] values) {
    ByteBuffer b = ByteBuffer.allocateDirect(4 * values.length).order(ByteOrder.nativeOrder());
    b.asFloatBuffer().put(values);
    keep.add(b);
    return b;
  }

  private static long[] read(ByteBuffer b, int n) {
    long[] out = new long[n];
    b.asLongBuffer().get(out);
    return out;
  }

  private static float[] readFloats(ByteBuffer b) {
    float[] out = new float[b.capacity() / 4];
    b.asFloatBuffer().get(out);
    return out;
  }

  private static long addr(ByteBuffer b) {
    return Pool.address(b);
  }

  @Test
  public void allocatorMatchesHostCalls() {
    try (Pool host = new Pool(Configs.PAGED); Pool dev = new Pool(Configs.PAGED)) {
      dev.synchronize(0);
      long[] prefix = {0, 0};
      long[] seq = {5, 3};
      long[] want = host.extend(prefix, seq, new long[] {-1, -1});
      assertArrayEquals(new long[] {4, 5, 6, 7, 8, 12, 13, 14}, want);

      long pages = dev.extendPages(prefix, seq);
      assertEquals(3, pages);
      ByteBuffer prefixDev = longs(prefix);
      ByteBuffer seqDev = longs(seq);
      ByteBuffer lastDev = longs(-1, -1);
      ByteBuffer slots = longs(new long[want.length]);
      ByteBuffer newPages = longs(new long[(int) pages]);
      dev.extendAsync(prefix, seq, addr(prefixDev), addr(seqDev), addr(lastDev), addr(slots), want.length,
          addr(newPages), pages, 0);
      dev.synchronize(0);
      assertArrayEquals(want, read(slots, want.length));
      assertArrayEquals(new long[] {1, 2, 3}, read(newPages, 3));

      long[] wantDecode = host.decode(new long[] {6, 4}, new long[] {8, 14});
      ByteBuffer decSlots = longs(0, 0);
      dev.decodeAsync(new long[] {6, 4}, addr(longs(6, 4)), addr(longs(8, 14)), addr(decSlots), 0, 0, 0);
      assertArrayEquals(wantDecode, read(decSlots, 2));
      assertArrayEquals(new long[] {9, 15}, read(decSlots, 2));

      long[] wantAlloc = host.alloc(4);
      ByteBuffer allocSlots = longs(0, 0, 0, 0);
      dev.allocAsync(addr(allocSlots), 4, 0);
      assertArrayEquals(wantAlloc, read(allocSlots, 4));
      assertArrayEquals(new long[] {16, 17, 18, 19}, read(allocSlots, 4));
      assertEquals(host.available(), dev.available());
      assertEquals(64 - 16, dev.available());

      // The extend's pages go back, sorted, to the front of the free list.
      dev.freePagesAsync(addr(newPages), pages, 0);
      dev.synchronize(0);
      assertEquals(64 - 4, dev.available());
      assertArrayEquals(new long[] {1, 2, 3, 5}, Arrays.copyOf(dev.freeList(AllocList.FREE), 4));
    }
  }

  @Test
  public void requestTable() {
    try (Pool pool = new Pool(Configs.PAGED)) {
      int[] rows = pool.reqAlloc(2);
      long[] slots = pool.extend(new long[] {0, 0}, new long[] {5, 3}, new long[] {-1, -1});
      ByteBuffer rowsDev = ints(rows);
      ByteBuffer prefixDev = longs(0, 0);
      ByteBuffer seqDev = longs(5, 3);
      ByteBuffer extendDev = longs(slots);
      pool.reqWriteBatchAsync(addr(rowsDev), addr(prefixDev), addr(seqDev), 2, 0, 0, addr(extendDev), slots.length, 0);
      assertArrayEquals(Arrays.copyOfRange(slots, 0, 5), pool.reqRead(rows[0], 0, 5));
      assertArrayEquals(Arrays.copyOfRange(slots, 5, 8), pool.reqRead(rows[1], 0, 3));

      long[] want = pool.lastLoc(rows, new long[] {5, 2});
      ByteBuffer lastLocs = longs(0, 0);
      pool.lastLocAsync(addr(rowsDev), addr(longs(5, 2)), 2, addr(lastLocs), 0);
      assertArrayEquals(want, read(lastLocs, 2));
      assertArrayEquals(new long[] {8, 13}, read(lastLocs, 2));
      pool.lastLocAsync(addr(rowsDev), addr(longs(0, 0)), 2, addr(lastLocs), 0);
      assertArrayEquals(new long[] {-1, -1}, read(lastLocs, 2));

      // A slot count that does not match the batch.
      expect(Status.INVALID_ARGUMENT, () -> pool.reqWriteBatchAsync(addr(rowsDev), addr(prefixDev), addr(seqDev), 2,
          0, 0, addr(extendDev), slots.length - 1, 0));
    }
  }

  @Test
  public void kvWriteReadMove() {
    try (Pool pool = new Pool(Configs.PAGED)) {
      long[] slots = pool.alloc(8);
      int n = 3;
      int rowFloats = 2 * 8;
      float[] k = Configs.ramp(n * rowFloats, 1);
      float[] v = Configs.ramp(n * rowFloats, -50);
      ByteBuffer slotsDev = longs(Arrays.copyOf(slots, n));
      ByteBuffer kDev = floats(k);
      ByteBuffer vDev = floats(v);
      pool.setKvAsync(1, addr(slotsDev), n, addr(kDev), kDev.capacity(), addr(vDev), vDev.capacity(), DType.F32,
          1.0f, 1.0f, 0);
      pool.synchronize(0);

      float[] gotK = new float[k.length];
      float[] gotV = new float[v.length];
      pool.getKv(1, Arrays.copyOf(slots, n), gotK, gotV);
      assertArrayEquals(k, gotK, 0.0f);
      assertArrayEquals(v, gotV, 0.0f);
      pool.getKv(0, Arrays.copyOf(slots, n), gotK, gotV);
      assertArrayEquals("another layer was written", new float[k.length], gotK, 0.0f);

      ByteBuffer outK = floats(new float[k.length]);
      ByteBuffer outV = floats(new float[v.length]);
      pool.getKvAsync(1, addr(slotsDev), n, addr(outK), outK.capacity(), addr(outV), outV.capacity(), DType.F32, 0);
      assertArrayEquals(k, readFloats(outK), 0.0f);
      assertArrayEquals(v, readFloats(outV), 0.0f);

      long[] dst = Arrays.copyOfRange(slots, 4, 4 + n);
      ByteBuffer dstDev = longs(dst);
      pool.moveKvAsync(addr(dstDev), n, addr(slotsDev), n, 0);
      pool.getKv(1, dst, gotK, gotV);
      assertArrayEquals(k, gotK, 0.0f);
      assertArrayEquals(v, gotV, 0.0f);

      expect(Status.INVALID_ARGUMENT, () -> pool.setKvAsync(1, addr(slotsDev), n, addr(kDev), kDev.capacity() - 4,
          addr(vDev), vDev.capacity(), DType.F32, 1.0f, 1.0f, 0));
      expect(Status.INVALID_ARGUMENT, () -> pool.moveKvAsync(addr(dstDev), n, addr(slotsDev), n - 1, 0));
    }
  }

  @Test
  public void mlaKv() {
    try (Pool pool = new Pool(Configs.MLA)) {
      long[] slots = pool.alloc(4);
      int n = 2;
      int rank = 16;
      int rope = 8;
      float[] nope = Configs.ramp(n * rank, 1);
      float[] ropeV = Configs.ramp(n * rope, 100);
      ByteBuffer nopeDev = floats(nope);
      ByteBuffer ropeDev = floats(ropeV);
      pool.setMlaKvAsync(0, addr(longs(slots[0], slots[1])), n, addr(nopeDev), nopeDev.capacity(), addr(ropeDev),
          ropeDev.capacity(), DType.F32, 0);
      float[] want = new float[n * (rank + rope)];
      for (int i = 0; i < n; i++) {
        System.arraycopy(nope, i * rank, want, i * (rank + rope), rank);
        System.arraycopy(ropeV, i * rope, want, i * (rank + rope) + rank, rope);
      }
      float[] got = new float[want.length];
      pool.getKv(0, Arrays.copyOf(slots, n), got, null);
      assertArrayEquals(want, got, 0.0f);
    }
  }

  /** Every layer's (0-2) conv and ssm bytes of a state slot. */
  private static byte[] state(Pool pool, int slot) {
    byte[] all = new byte[3 * (MambaTest.CONV_BYTES + MambaTest.SSM_BYTES)];
    for (int layer = 0; layer < 3; layer++) {
      byte[] conv = new byte[MambaTest.CONV_BYTES];
      byte[] ssm = new byte[MambaTest.SSM_BYTES];
      pool.mambaRead(layer, slot, conv, ssm);
      int at = layer * (conv.length + ssm.length);
      System.arraycopy(conv, 0, all, at, conv.length);
      System.arraycopy(ssm, 0, all, at + conv.length, ssm.length);
    }
    return all;
  }

  @Test
  public void mambaStates() {
    try (Pool host = new Pool(Configs.HYBRID); Pool dev = new Pool(Configs.HYBRID);
         Pool plain = new Pool(Configs.PAGED)) {
      // Dirty a state slot of both pools and free it: a slot handed out again must be zeroed.
      for (Pool p : new Pool[] {host, dev}) {
        int[] dirty = p.mambaAlloc(1);
        p.mambaWrite(1, dirty[0], MambaTest.floats(Configs.ramp(12, 9)), MambaTest.floats(Configs.ramp(32, 9)));
        p.mambaFree(dirty);
      }
      // Every slot: the ids of mambaAlloc on the twin pool, all states zero.
      int[] want = host.mambaAlloc(20);
      int[] slots = dev.mambaAllocAsync(20, 0);
      dev.synchronize(0);
      assertArrayEquals(want, slots);
      byte[] zero = new byte[3 * (MambaTest.CONV_BYTES + MambaTest.SSM_BYTES)];
      for (int slot : slots) {
        assertArrayEquals("slot " + slot + " is not zeroed", zero, state(dev, slot));
      }
      assertEquals(0, dev.mambaAvailable());
      expect(Status.OUT_OF_MEMORY, () -> dev.mambaAllocAsync(1, 0));
      dev.mambaFree(Arrays.copyOfRange(slots, 10, 20));

      // Fork: a new slot holding a copy of a written state.
      byte[] wantConv = MambaTest.floats(Configs.ramp(12, 1));
      byte[] wantSsm = MambaTest.floats(Configs.ramp(32, -3));
      dev.mambaWrite(1, slots[0], wantConv, wantSsm);
      int fork = dev.mambaForkAsync(slots[0], 0);
      dev.synchronize(0);
      assertTrue("fork " + fork, fork >= 1 && fork != slots[0]);
      assertArrayEquals(state(dev, slots[0]), state(dev, fork));
      assertEquals(9, dev.mambaAvailable());

      // Batched copy, slot ids at host addresses: slots[2] <- slots[1], fork <- slots[1].
      dev.mambaWrite(1, slots[1], MambaTest.floats(Configs.ramp(12, 40)), MambaTest.floats(Configs.ramp(32, -40)));
      ByteBuffer src = ints(slots[1], slots[1]);
      ByteBuffer dst = ints(slots[2], fork);
      dev.mambaCopyAsync(addr(src), 2, addr(dst), 2, 0);
      dev.synchronize(0);
      assertArrayEquals(state(dev, slots[1]), state(dev, slots[2]));
      assertArrayEquals(state(dev, slots[1]), state(dev, fork));
      assertFalse(Arrays.equals(state(dev, slots[1]), state(dev, slots[0])));

      // Lengths that differ, a negative length, a free slot (nothing copied), a free fork source.
      expect(Status.INVALID_ARGUMENT, () -> dev.mambaCopyAsync(addr(src), 2, addr(dst), 1, 0));
      assertThrows(IllegalArgumentException.class, () -> dev.mambaCopyAsync(addr(src), -1, addr(dst), 2, 0));
      expect(Status.INVALID_ARGUMENT, () -> dev.mambaCopyAsync(addr(src), 2, addr(ints(slots[3], slots[15])), 2, 0));
      assertArrayEquals("slot of a rejected copy", zero, state(dev, slots[3]));
      expect(Status.INVALID_ARGUMENT, () -> dev.mambaForkAsync(slots[15], 0));
      assertThrows(IllegalArgumentException.class, () -> dev.mambaAllocAsync(-1, 0));
      assertEquals(9, dev.mambaAvailable());
      dev.check();

      // No mamba states: unsupported.
      expect(Status.UNSUPPORTED, () -> plain.mambaAllocAsync(1, 0));
      expect(Status.UNSUPPORTED, () -> plain.mambaForkAsync(1, 0));
      expect(Status.UNSUPPORTED, () -> plain.mambaCopyAsync(addr(src), 1, addr(dst), 1, 0));
    }
  }

  @Test
  public void errors() {
    try (Pool pool = new Pool(Configs.PAGED); Pool swa = new Pool(Configs.SWA)) {
      ByteBuffer slots = longs(0, 0, 0, 0);
      ByteBuffer lens = longs(0);
      ByteBuffer seq = longs(4);
      ByteBuffer last = longs(-1);
      // A NULL address with a length, a negative length, a wrong slot count.
      expect(Status.INVALID_ARGUMENT, () -> pool.allocAsync(0, 4, 0));
      assertThrows(IllegalArgumentException.class, () -> pool.allocAsync(addr(slots), -1, 0));
      expect(Status.INVALID_ARGUMENT, () -> pool.extendAsync(new long[] {0}, new long[] {4}, addr(lens), addr(seq),
          addr(last), addr(slots), 3, 0, 0, 0));
      // Host lengths that disagree with each other, or with the "device" ones.
      expect(Status.INVALID_ARGUMENT, () -> pool.extendAsync(new long[] {0}, new long[] {4, 4}, addr(lens),
          addr(seq), addr(last), addr(slots), 4, 0, 0, 0));
      expect(Status.INVALID_ARGUMENT, () -> pool.extendPages(new long[] {0, 0}, new long[] {4}));
      KvPoolException e = expect(Status.INVALID_ARGUMENT, () -> pool.extendAsync(new long[] {0}, new long[] {4},
          addr(lens), addr(longs(8)), addr(last), addr(slots), 4, 0, 0, 0));
      assertTrue(e.getMessage(), e.getMessage().contains("seq_lens"));
      assertEquals(64, pool.available());
      // A page that is not allocated.
      expect(Status.INVALID_ARGUMENT, () -> pool.freePagesAsync(addr(longs(2)), 1, 0));
      // swa has no stream-ordered allocation.
      expect(Status.UNSUPPORTED, () -> swa.allocAsync(addr(slots), 4, 0));
      // A heap buffer has no address.
      assertThrows(IllegalArgumentException.class, () -> Pool.address(ByteBuffer.allocate(8)));
      assertEquals(0, Pool.address(null));
    }
    // A closed pool (its handle is NULL).
    Pool closed = new Pool(Configs.PAGED);
    closed.close();
    expect(Status.INVALID_ARGUMENT, () -> closed.synchronize(0));
    expect(Status.INVALID_ARGUMENT, () -> closed.allocAsync(addr(longs(0)), 1, 0));
  }

  @Test
  public void createWithAllocator() {
    try (Pool pool = Pool.withAllocator(Configs.PAGED, 0)) {
      assertEquals("cpu", pool.backend());
      long[] slots = pool.alloc(8);
      assertArrayEquals(Configs.range(4, 11), slots);
      float[] k = Configs.ramp(16, 3);
      pool.setKv(0, new long[] {slots[0]}, k, k);
      float[] got = new float[16];
      float[] gotV = new float[16];
      pool.getKv(0, new long[] {slots[0]}, got, gotV);
      assertArrayEquals(k, got, 0.0f);
      assertArrayEquals(k, gotV, 0.0f);
    }
    // A kvpool_allocator whose struct_size is 0 (zeroed memory) is rejected.
    ByteBuffer zeroed = ByteBuffer.allocateDirect(64);
    keep.add(zeroed);
    assertNotEquals(0, Pool.address(zeroed));
    expect(Status.INVALID_ARGUMENT, () -> Pool.withAllocator(Configs.PAGED, Pool.address(zeroed)).close());
    expect(Status.CONFIG, () -> Pool.withAllocator("{", 0).close());
    assertEquals(11, Status.DEVICE_FAULT.swigValue());
  }

  /** A request's state as comparable values: SeqInfo's fields, then its slots. */
  private static List<Long> seqState(Pool pool, long seq) {
    SeqInfo info = pool.seqInfo(seq);
    List<Long> state = new ArrayList<>(Arrays.asList((long) info.getRow(), info.getTokens(), info.getComputed(),
        info.getCached(), info.getPrefixHit()));
    for (long slot : pool.seqSlots(seq)) {
      state.add(slot);
    }
    return state;
  }

  private static void sameState(String what, Pool host, Pool dev, long... seqs) {
    for (long seq : seqs) {
      assertEquals(what + ": request " + seq, seqState(host, seq), seqState(dev, seq));
    }
    assertEquals(what, PrefixCacheTest.accounting(host).toString(), PrefixCacheTest.accounting(dev).toString());
  }

  @Test
  public void seqMatchesHostCalls() {
    try (Pool host = new Pool(PrefixCacheTest.CACHE); Pool dev = new Pool(PrefixCacheTest.CACHE)) {
      // Two requests with a shared 8-token prefix, begun on both pools.
      int[] promptA = PrefixCacheTest.tokens(100, 10);
      int[] promptB = Arrays.copyOf(promptA, 11);
      promptB[8] = 500;
      promptB[9] = 501;
      promptB[10] = 502;
      long a = host.begin(promptA, null).getSeq();
      long b = host.begin(promptB, null).getSeq();
      assertEquals(a, dev.begin(promptA, null).getSeq());
      assertEquals(b, dev.begin(promptB, null).getSeq());

      // Two prefill chunks of the batch: {6, 5} then {4, 6}.
      for (long[] chunks : new long[][] {{6, 5}, {4, 6}}) {
        long[] want = host.seqExtend(new long[] {a, b}, chunks);
        ByteBuffer slots = longs(new long[want.length]);
        dev.seqExtendAsync(new long[] {a, b}, chunks, addr(slots), want.length, 0);
        dev.synchronize(0);
        assertArrayEquals(want, read(slots, want.length));
        sameState("seqExtendAsync", host, dev, a, b);
      }

      // A third request reuses A's cached prefix (two whole pages).
      int[] promptC = Arrays.copyOf(promptA, 10);
      promptC[8] = 7;
      promptC[9] = 8;
      SeqBegin hc = host.begin(promptC, null);
      SeqBegin dc = dev.begin(promptC, null);
      assertEquals(hc.getSeq(), dc.getSeq());
      assertEquals(8, hc.getCached());
      assertEquals(8, dc.getCached());
      long c = hc.getSeq();
      long[] want = host.seqExtend(new long[] {c}, new long[] {2});
      ByteBuffer slots = longs(0, 0);
      dev.seqExtendAsync(new long[] {c}, new long[] {2}, addr(slots), 2, 0);
      assertArrayEquals(want, read(slots, 2));
      sameState("seqExtendAsync (cached prefix)", host, dev, a, b, c);

      // A decode step of all three.
      long[] seqs = {a, b, c};
      int[] tokens = {901, 902, 903};
      long[] wantDecode = host.seqDecode(seqs, tokens);
      ByteBuffer decSlots = longs(0, 0, 0);
      dev.seqDecodeAsync(seqs, tokens, addr(decSlots), 3, 0);
      dev.synchronize(0);
      assertArrayEquals(wantDecode, read(decSlots, 3));
      sameState("seqDecodeAsync", host, dev, a, b, c);

      // A slot count other than the batch's is rejected and changes nothing.
      List<Long> before = seqState(dev, a);
      expect(Status.INVALID_ARGUMENT, () -> dev.seqDecodeAsync(seqs, tokens, addr(decSlots), 2, 0));
      assertThrows(IllegalArgumentException.class, () -> dev.seqDecodeAsync(seqs, tokens, addr(decSlots), -1, 0));
      long d = dev.begin(PrefixCacheTest.tokens(300, 6), null).getSeq();
      ByteBuffer big = longs(new long[6]);
      expect(Status.INVALID_ARGUMENT, () -> dev.seqExtendAsync(new long[] {d}, new long[] {6}, addr(big), 5, 0));
      expect(Status.INVALID_ARGUMENT, () -> dev.seqExtendAsync(new long[] {d}, new long[] {6, 1}, addr(big), 6, 0));
      assertEquals(before, seqState(dev, a));
      assertEquals(0, dev.seqInfo(d).getComputed());
      PrefixCacheTest.accounting(dev);
      dev.seqExtendAsync(new long[] {d}, new long[] {6}, addr(big), 6, 0);
      for (long seq : seqs) {
        host.finish(seq, 11);
        dev.finish(seq, 11);
      }
      dev.abort(d);
      PrefixCacheTest.accounting(host);
      PrefixCacheTest.accounting(dev);
    }
  }

  @Test
  public void decodeGraphMatchesDecode() {
    try (Pool host = new Pool(Configs.PAGED); Pool dev = new Pool(Configs.PAGED); Pool swa = new Pool(Configs.SWA)) {
      // Three requests get their first 5, 3 and 2 tokens: pages 1-2, 3 and 4, 12 of the 16 pages
      // stay free.
      long[] prefix = {0, 0, 0};
      long[] first = {5, 3, 2};
      long[] none = {-1, -1, -1};
      long[] want = host.extend(prefix, first, none);
      assertArrayEquals(new long[] {4, 5, 6, 7, 8, 12, 13, 14, 16, 17}, want);
      assertArrayEquals(want, dev.extend(prefix, first, none));

      // Bad input is refused and takes nothing.
      ByteBuffer out = longs(-7);
      expect(Status.INVALID_ARGUMENT, () -> dev.decodeGraphAsync(1, addr(longs(0)), addr(longs(8)), addr(out), 0));
      expect(Status.INVALID_ARGUMENT, () -> dev.decodeGraphAsync(1, 0, addr(longs(8)), addr(out), 0));
      assertThrows(IllegalArgumentException.class,
          () -> dev.decodeGraphAsync(-1, addr(longs(6)), addr(longs(8)), addr(out), 0));
      assertArrayEquals(new long[] {-7}, read(out, 1));
      expect(Status.INVALID_ARGUMENT, () -> dev.decodeWatermark(new long[0]));  // an empty batch
      expect(Status.INVALID_ARGUMENT, () -> dev.decodeWatermark(new long[] {6, 0, 3}));  // a length of 0
      expect(Status.INVALID_ARGUMENT, () -> dev.decodeGraphAdvance(new long[] {0}, 1));
      assertThrows(IllegalArgumentException.class, () -> dev.decodeGraphAdvance(new long[] {6, 4, 3}, -1));
      assertThrows(NullPointerException.class, () -> dev.decodeWatermark(null));
      assertEquals(64 - 16, dev.available());

      // The steps start at lengths 6, 4 and 3; a request takes a page at lengths 5, 9, 13, ...:
      // 17 steps take the 12 free pages, an 18th would take a 13th.
      long[] seq = {6, 4, 3};
      long steps = dev.decodeWatermark(seq);
      assertEquals(17, steps);
      assertEquals(steps, host.decodeWatermark(seq));

      // The graph's buffers: the engine's kernel would make each step's slots the next step's
      // lastLocs and add one to every length.
      ByteBuffer seqDev = longs(seq);
      ByteBuffer lastDev = longs(8, 14, 17);
      ByteBuffer slotsDev = longs(0, 0, 0);
      long[] hostLast = {8, 14, 17};
      for (int k = 0; k < steps; k++) {
        long[] lens = read(seqDev, 3);
        long[] wantStep = host.decode(lens, hostLast);
        dev.decodeGraphAsync(seq.length, addr(seqDev), addr(lastDev), addr(slotsDev), 0);
        assertArrayEquals("step " + k, wantStep, read(slotsDev, 3));
        lastDev.asLongBuffer().put(wantStep);
        for (int i = 0; i < 3; i++) {
          lens[i]++;
        }
        seqDev.asLongBuffer().put(lens);
        hostLast = wantStep;
      }
      dev.synchronize(0);
      dev.decodeGraphAdvance(seq, steps);
      assertEquals(0, host.available());
      assertEquals(0, dev.available());

      // The step after the watermark does not fit, on either pool.
      long[] after = read(seqDev, 3);
      assertArrayEquals(new long[] {23, 21, 20}, after);
      expect(Status.OUT_OF_MEMORY, () -> dev.decodeGraphAsync(3, addr(seqDev), addr(lastDev), addr(slotsDev), 0));
      long[] lastLocs = hostLast;
      expect(Status.OUT_OF_MEMORY, () -> host.decode(after, lastLocs));
      assertEquals(0, dev.decodeWatermark(after));
      dev.check();

      // swa has no pages to count.
      expect(Status.UNSUPPORTED, () -> swa.decodeWatermark(new long[] {1}));
    }
  }
}
