package ai.kvpool.tests;

import static ai.kvpool.tests.Configs.expect;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertTrue;

import ai.kvpool.HybridRows;
import ai.kvpool.MambaSlots;
import ai.kvpool.Pool;
import ai.kvpool.Stats;
import ai.kvpool.Status;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.Test;

/** Mamba state slots and hybrid request rows (mamba.h). */
public class MambaTest {
  static final int CONV_BYTES = 4 * 3 * 4;      // conv_shape [4, 3] of f32
  static final int SSM_BYTES = 2 * 4 * 4 * 4;   // ssm_shape [2, 4, 4] of f32

  static byte[] floats(float[] values) {
    ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.nativeOrder());
    b.asFloatBuffer().put(values);
    return b.array();
  }

  @Test
  public void statesAndHybridRows() {
    try (Pool pool = new Pool(Configs.HYBRID)) {
      assertEquals(20, pool.mambaAvailable());
      int[] slots = pool.mambaAlloc(2);
      assertArrayEquals(new int[] {1, 2}, slots);
      assertEquals(18, pool.mambaAvailable());

      byte[] conv = new byte[CONV_BYTES];
      byte[] ssm = new byte[SSM_BYTES];
      pool.mambaRead(1, slots[0], conv, ssm);
      assertArrayEquals("fresh state is zero", new byte[CONV_BYTES], conv);
      byte[] wantConv = floats(Configs.ramp(12, 1));
      byte[] wantSsm = floats(Configs.ramp(32, -3));
      pool.mambaWrite(1, slots[0], wantConv, wantSsm);
      pool.mambaRead(1, slots[0], conv, ssm);
      assertArrayEquals(wantConv, conv);
      assertArrayEquals(wantSsm, ssm);
      pool.mambaRead(0, slots[0], conv, ssm);
      assertArrayEquals("other layers untouched", new byte[CONV_BYTES], conv);

      pool.mambaCopy(slots[0], slots[1]);
      pool.mambaRead(1, slots[1], conv, ssm);
      assertArrayEquals(wantConv, conv);
      assertArrayEquals(wantSsm, ssm);
      int fork = pool.mambaFork(slots[0]);
      assertEquals(3, fork);
      pool.mambaRead(1, fork, conv, ssm);
      assertArrayEquals(wantSsm, ssm);

      expect(Status.INVALID_ARGUMENT, () -> pool.mambaWrite(1, slots[0], new byte[4], wantSsm));
      expect(Status.INVALID_ARGUMENT, () -> pool.mambaRead(3, slots[0], new byte[CONV_BYTES], new byte[SSM_BYTES]));
      pool.mambaFree(new int[] {fork});
      expect(Status.INVALID_ARGUMENT, () -> pool.mambaFree(new int[] {fork}));
      expect(Status.OUT_OF_MEMORY, () -> pool.mambaAlloc(19));

      HybridRows hybrid = pool.reqAllocHybrid(new int[] {-1, slots[1]});
      int[] rows = hybrid.getRows();
      int[] states = hybrid.getSlots();
      assertEquals(2, rows.length);
      assertNotEquals(rows[0], rows[1]);
      assertEquals(slots[1], states[1]);
      assertTrue(states[0] >= 1 && states[0] != slots[0] && states[0] != slots[1]);
      MambaSlots ms = pool.reqMambaSlots(rows[0]);
      assertEquals(ms.toString(), states[0], ms.getSlot());
      assertArrayEquals(new int[] {-1, -1}, ms.getPingPong());
      expect(Status.INVALID_ARGUMENT, () -> pool.mambaFree(new int[] {states[1]}));
      expect(Status.INVALID_ARGUMENT, () -> pool.reqFree(new int[] {rows[0]}));
      String report = pool.check();
      assertTrue(report, report.startsWith("ok: 0 slots held, 64 free, 2 rows held, 3 mamba slots held"));

      pool.reqFreeHybrid(rows, true, -1);
      assertEquals(19, pool.mambaAvailable());
      assertEquals(10, pool.reqAvailable());
      pool.mambaFree(new int[] {slots[0]});
      Stats stats = pool.stats();
      assertEquals(20, stats.getMambaCapacity());
      assertEquals(20, stats.getMambaAvailable());
      assertTrue(stats.getMambaBytes() > 0);
    }
    try (Pool paged = new Pool(Configs.PAGED)) {
      expect(Status.UNSUPPORTED, paged::mambaAvailable);
      expect(Status.UNSUPPORTED, () -> paged.mambaAlloc(1));
      expect(Status.UNSUPPORTED, () -> paged.reqAllocHybrid(new int[] {-1}));
    }
  }
}
