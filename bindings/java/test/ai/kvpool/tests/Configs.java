package ai.kvpool.tests;

import static org.junit.Assert.assertEquals;

import ai.kvpool.KvPoolException;
import ai.kvpool.Status;
import java.util.stream.LongStream;
import org.junit.Assert;
import org.junit.function.ThrowingRunnable;

/** Small CPU pools and helpers shared by the tests. */
final class Configs {
  private Configs() {
  }

  /** page_size 4, 64 tokens = pages 1..16 (slots 4..67), 2 layers of 2 heads x 8 f32. */
  static final String PAGED = "{\"model\":{\"num_layers\":2,\"kv_heads\":2,\"head_dim\":8},"
      + "\"pool\":{\"kv_dtype\":\"f32\",\"page_size\":4,\"max_total_tokens\":64,\"max_running_requests\":8,"
      + "\"max_context_len\":64}}";
  /** page_size 1: the token allocator. */
  static final String TOKEN = PAGED.replace("\"page_size\":4,\"max_total_tokens\":64", "\"page_size\":1,\"max_total_tokens\":16");
  /** Deferred, sorted frees (need_sort). */
  static final String PREFILL = PAGED.replace("\"max_context_len\":64}", "\"max_context_len\":64,\"disaggregation_mode\":\"prefill\"}");
  /** 16 full + 16 window slots. */
  static final String SWA = "{\"model\":{\"num_layers\":4,\"attention\":\"swa\",\"kv_heads\":2,\"head_dim\":8,"
      + "\"sliding_window\":4,\"swa_layer_pattern\":\"SF\"},\"pool\":{\"kv_dtype\":\"f32\",\"max_total_tokens\":16,"
      + "\"swa_full_tokens_ratio\":1.0,\"max_running_requests\":8,\"max_context_len\":64}}";
  /** Layers 0-2 mamba (conv 4x3, ssm 2x4x4, f32), layer 3 full attention. */
  static final String HYBRID = "{\"model\":{\"num_layers\":4,\"attention\":\"hybrid_linear\",\"kv_heads\":2,"
      + "\"head_dim\":8,\"full_attention_layers\":[3],\"mamba\":{\"conv_shape\":[4,3],\"ssm_shape\":[2,4,4],"
      + "\"conv_dtype\":\"f32\",\"ssm_dtype\":\"f32\"}},\"pool\":{\"kv_dtype\":\"f32\",\"max_total_tokens\":64,"
      + "\"max_running_requests\":10,\"mamba_cache_size\":20,\"max_context_len\":32},\"prefix_cache\":{\"kind\":\"none\"}}";
  static final String MLA = "{\"model\":{\"num_layers\":2,\"attention\":\"mla\",\"kv_lora_rank\":16,\"qk_rope_head_dim\":8},"
      + "\"pool\":{\"kv_dtype\":\"f32\",\"page_size\":4,\"max_total_tokens\":64,\"max_running_requests\":8,"
      + "\"max_context_len\":64}}";
  static final String DOUBLE_SPARSE = "{\"model\":{\"num_layers\":2,\"attention\":\"double_sparse\",\"kv_heads\":2,"
      + "\"head_dim\":8,\"heavy_channels\":4},\"pool\":{\"kv_dtype\":\"f32\",\"max_total_tokens\":64,"
      + "\"max_running_requests\":8,\"max_context_len\":64}}";
  static final String NSA = "{\"model\":{\"num_layers\":2,\"attention\":\"nsa\",\"kv_lora_rank\":128,"
      + "\"qk_rope_head_dim\":64},\"pool\":{\"kv_dtype\":\"bf16\",\"page_size\":64,\"max_total_tokens\":128,"
      + "\"max_running_requests\":4,\"max_context_len\":128}}";

  /** Runs body, which must throw KvPoolException with the given status and a message. */
  static KvPoolException expect(Status status, ThrowingRunnable body) {
    KvPoolException e = Assert.assertThrows(KvPoolException.class, body);
    assertEquals(e.toString(), status, e.getStatus());
    Assert.assertFalse("no message", e.getMessage().isEmpty());
    return e;
  }

  /** from, from+1, ..., to. */
  static long[] range(long from, long to) {
    return LongStream.rangeClosed(from, to).toArray();
  }

  static float[] ramp(int n, float base) {
    float[] f = new float[n];
    for (int i = 0; i < n; i++) {
      f[i] = base + i * 0.5f;
    }
    return f;
  }
}
