package ai.kvpool.tests;

import static ai.kvpool.tests.Configs.expect;
import static ai.kvpool.tests.Configs.ramp;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertThrows;

import ai.kvpool.BufferInfo;
import ai.kvpool.BufferKind;
import ai.kvpool.DType;
import ai.kvpool.Pool;
import ai.kvpool.Status;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import org.junit.Test;

/** KV buffers: descriptors, set/get, move, host copies (buffers.h). */
public class BuffersTest {
  static final int ROW = 2 * 8;  // floats of one token of K (or V) in one layer

  static byte[] bytes(float[] values) {
    return MambaTest.floats(values);
  }

  @Test
  public void setGetKvRoundTrip() {
    try (Pool pool = new Pool(Configs.PAGED)) {
      long[] slots = pool.alloc(4);
      long[] three = Arrays.copyOf(slots, 3);
      float[] k = ramp(3 * ROW, 1);
      float[] v = ramp(3 * ROW, 100);

      // float[] overloads (f32)
      pool.setKv(0, three, k, v);
      float[] gotK = new float[k.length];
      float[] gotV = new float[v.length];
      pool.getKv(0, three, gotK, gotV);
      assertArrayEquals(k, gotK, 0f);
      assertArrayEquals(v, gotV, 0f);

      // byte[] overloads, converted on the way out: 1.0 and 100.0 in bf16
      byte[] kb = new byte[ROW * 2];
      byte[] vb = new byte[ROW * 2];
      pool.getKv(0, new long[] {slots[0]}, kb, vb, DType.BF16);
      assertEquals((byte) 0x80, kb[0]);
      assertEquals((byte) 0x3f, kb[1]);
      assertEquals((byte) 0xc8, vb[0]);
      assertEquals((byte) 0x42, vb[1]);
      pool.setKv(1, three, bytes(v), bytes(k), DType.F32, 1.0f, 1.0f);
      byte[] rawK = new byte[3 * ROW * 4];
      byte[] rawV = new byte[3 * ROW * 4];
      pool.getKv(1, three, rawK, rawV, DType.F32);
      assertArrayEquals(bytes(v), rawK);
      assertArrayEquals(bytes(k), rawV);

      // direct ByteBuffers: the window position..limit, position unchanged
      ByteBuffer dk = ByteBuffer.allocateDirect(8 + ROW * 4).order(ByteOrder.nativeOrder());
      ByteBuffer dv = ByteBuffer.allocateDirect(ROW * 4).order(ByteOrder.nativeOrder());
      dk.position(8);
      pool.getKv(0, new long[] {slots[2]}, dk, dv, DType.F32);
      assertEquals(8, dk.position());
      assertEquals(k[2 * ROW], dk.getFloat(8), 0f);
      assertEquals(v[3 * ROW - 1], dv.getFloat(ROW * 4 - 4), 0f);
      dk.putFloat(8, -1.5f);
      pool.setKv(0, new long[] {slots[3]}, dk, dv, DType.F32, 1.0f, 1.0f);
      float[] one = new float[ROW];
      float[] oneV = new float[ROW];
      pool.getKv(0, new long[] {slots[3]}, one, oneV);
      assertEquals(-1.5f, one[0], 0f);
      assertEquals(k[2 * ROW + 1], one[1], 0f);
      assertThrows(IllegalArgumentException.class,
          () -> pool.getKv(0, new long[] {slots[2]}, ByteBuffer.allocate(ROW * 4), dv, DType.F32));

      expect(Status.INVALID_ARGUMENT, () -> pool.setKv(0, three, new float[5], v));
      expect(Status.INVALID_ARGUMENT, () -> pool.setKv(7, three, k, v));

      // moveKv copies every layer's rows
      pool.moveKv(new long[] {slots[3]}, new long[] {slots[0]});
      pool.getKv(1, new long[] {slots[3]}, one, oneV);
      assertArrayEquals(Arrays.copyOf(v, ROW), one, 0f);
      pool.getKv(0, new long[] {slots[3]}, one, oneV);
      assertArrayEquals(Arrays.copyOf(k, ROW), one, 0f);
    }
  }

  @Test
  public void bufferDescriptors() {
    try (Pool pool = new Pool(Configs.PAGED)) {
      BufferInfo k = pool.buffer(BufferKind.K, 0);
      assertEquals(k.toString(), DType.F32, k.getDtype());
      assertEquals(BufferInfo.DEVICE_CPU, k.getDeviceType());
      assertEquals(0, k.getDeviceId());
      assertEquals(3, k.getNdim());
      assertArrayEquals(new long[] {68, 2, 8}, k.getShape());
      assertArrayEquals(new long[] {16, 8, 1}, k.getStrides());
      assertEquals(68L * ROW * 4, k.getBytes());
      assertNotEquals(0, k.getData());
      assertNotEquals(k.getData(), pool.buffer(BufferKind.V, 1).getData());
      BufferInfo table = pool.buffer(BufferKind.REQ_TABLE, 0);
      assertEquals(DType.I32, table.getDtype());
      assertArrayEquals(new long[] {9, 64}, table.getShape());
      expect(Status.UNSUPPORTED, () -> pool.buffer(BufferKind.LABEL, 0));
      expect(Status.INVALID_ARGUMENT, () -> pool.buffer(BufferKind.K, 9));
    }
  }

  @Test
  public void hostCopyRoundTrip() {
    try (Pool pool = new Pool(Configs.PAGED)) {
      long[] slots = pool.alloc(8);
      long[] src = Arrays.copyOfRange(slots, 0, 3);
      long[] dst = Arrays.copyOfRange(slots, 4, 7);
      float[] k = ramp(3 * ROW, 1);
      float[] v = ramp(3 * ROW, -50);
      pool.setKv(0, src, k, v);
      pool.setKv(1, src, v, k);
      long n = pool.hostCopyBytes(3);
      assertEquals(2 * 2 * 3 * ROW * 4, n);  // layers x (K, V) x tokens x row bytes
      byte[] host = pool.copyToHost(src);
      assertEquals(n, host.length);
      byte[] again = new byte[(int) n];
      pool.copyToHost(src, again);
      assertArrayEquals(host, again);
      ByteBuffer direct = ByteBuffer.allocateDirect((int) n);
      pool.copyToHost(src, direct);
      byte[] fromDirect = new byte[(int) n];
      direct.get(fromDirect);
      assertArrayEquals(host, fromDirect);

      pool.loadFromHost(dst, host);
      float[] gotK = new float[k.length];
      float[] gotV = new float[v.length];
      pool.getKv(1, dst, gotK, gotV);
      assertArrayEquals(v, gotK, 0f);
      assertArrayEquals(k, gotV, 0f);
      direct.rewind();
      pool.loadFromHost(new long[] {slots[7], slots[3], slots[6]}, direct);
      pool.getKv(0, new long[] {slots[7]}, new float[ROW], new float[ROW]);
      expect(Status.INVALID_ARGUMENT, () -> pool.loadFromHost(dst, Arrays.copyOf(host, host.length - 1)));
    }
  }

  @Test
  public void mlaRows() {
    try (Pool pool = new Pool(Configs.MLA)) {
      long[] slots = pool.alloc(4);
      long[] three = Arrays.copyOf(slots, 3);
      float[] nope = ramp(3 * 16, 1);
      float[] rope = ramp(3 * 8, 200);
      pool.setMlaKv(0, three, bytes(nope), bytes(rope), DType.F32);
      byte[] rows = new byte[3 * 24 * 4];
      pool.getKv(0, three, rows, null, DType.F32);
      ByteBuffer b = ByteBuffer.wrap(rows).order(ByteOrder.nativeOrder());
      for (int i = 0; i < 3; i++) {
        assertEquals(nope[i * 16], b.getFloat((i * 24) * 4), 0f);
        assertEquals(nope[i * 16 + 15], b.getFloat((i * 24 + 15) * 4), 0f);
        assertEquals(rope[i * 8], b.getFloat((i * 24 + 16) * 4), 0f);
        assertEquals(rope[i * 8 + 7], b.getFloat((i * 24 + 23) * 4), 0f);
      }
      float[] whole = ramp(24, -9);
      pool.setKv(1, new long[] {slots[3]}, bytes(whole), null, DType.F32);
      float[] got = new float[24];
      pool.getKv(1, new long[] {slots[3]}, got, null);
      assertArrayEquals(whole, got, 0f);
      assertArrayEquals(new long[] {68, 1, 24}, pool.buffer(BufferKind.K, 0).getShape());
    }
    try (Pool mha = new Pool(Configs.PAGED)) {
      expect(Status.UNSUPPORTED, () -> mha.setMlaKv(0, new long[] {4}, new byte[64], new byte[32], DType.F32));
    }
  }

  @Test
  public void labelsAndIndexer() {
    try (Pool pool = new Pool(Configs.DOUBLE_SPARSE)) {
      long[] slots = pool.alloc(2);
      pool.setLabel(0, slots, bytes(ramp(2 * 2 * 4, 7)));
      BufferInfo labels = pool.buffer(BufferKind.LABEL, 0);
      assertArrayEquals(new long[] {65, 2, 4}, labels.getShape());
      expect(Status.INVALID_ARGUMENT, () -> pool.setLabel(0, slots, new byte[3]));
    }
    try (Pool pool = new Pool(Configs.NSA)) {
      long[] slots = pool.alloc(64);
      byte[] keys = new byte[2 * 128];
      for (int i = 0; i < keys.length; i++) {
        keys[i] = (byte) (i * 7 + 3);
      }
      pool.setIndexer(0, Arrays.copyOf(slots, 2), keys, new float[] {0.5f, 2f});
      assertEquals(DType.U8, pool.buffer(BufferKind.INDEXER, 0).getDtype());
      expect(Status.INVALID_ARGUMENT, () -> pool.setIndexer(0, Arrays.copyOf(slots, 2), keys, new float[] {1f}));
    }
    try (Pool mha = new Pool(Configs.PAGED)) {
      expect(Status.UNSUPPORTED, () -> mha.setLabel(0, new long[] {4}, new byte[32]));
      expect(Status.UNSUPPORTED, () -> mha.setIndexer(0, new long[] {4}, new byte[128], new float[] {1f}));
    }
  }
}
