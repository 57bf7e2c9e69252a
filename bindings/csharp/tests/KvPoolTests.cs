// NUnit 2.6 tests of the C# binding (run by nunit-console under mono).
using System;
using System.Collections.Generic;
using System.IO;
using System.Reflection;
using System.Threading;
using KvPool;
using NUnit.Framework;

namespace KvPool.Tests {

  [TestFixture]
  public class KvPoolTests {
    // A valid MHA configuration; its plan numbers are checked in PlanNumbers().
    const string Valid =
        "{\"model\":{\"num_layers\":32,\"attention\":\"mha\",\"kv_heads\":8,\"head_dim\":128}," +
        "\"pool\":{\"kv_dtype\":\"bf16\",\"page_size\":16,\"max_total_tokens\":100000," +
        "\"max_running_requests\":8,\"max_context_len\":4096}}";

    // Valid with one "key":value pair replaced.
    static string With(string from, string to) {
      Assert.That(Valid.Contains(from), "test bug: " + from);
      return Valid.Replace(from, to);
    }

    // Runs body, which must throw KvPoolException with the given status.
    static KvPoolException Expect(Status status, TestDelegate body) {
      KvPoolException e = Assert.Throws<KvPoolException>(body);
      Assert.AreEqual(status, e.Status, e.ToString());
      Assert.AreEqual((int)status, e.Code);
      return e;
    }

    [Test]
    public void Version() {
      Assert.AreEqual(100u, Kvpool.Version());
      Assert.AreEqual("0.1.0", Kvpool.VersionString());
      // The loaded library matches the headers the binding was generated from.
      Assert.AreEqual(Kvpool.KVPOOL_VERSION_STRING, Kvpool.VersionString());
      Assert.AreEqual((uint)Kvpool.KVPOOL_VERSION_NUMBER, Kvpool.Version());
    }

    [Test]
    public void StatusCodesAndStrings() {
      Assert.AreEqual(0, (int)Status.Ok);
      Assert.AreEqual(1, (int)Status.InvalidArgument);
      Assert.AreEqual(2, (int)Status.Config);
      Assert.AreEqual(8, (int)Status.Io);
      Assert.AreEqual(9, (int)Status.HostMemory);
      Assert.AreEqual(10, (int)Status.CheckFailed);
      Assert.AreEqual(11, (int)Status.DeviceFault);
      // Every code the library knows has a PascalCase name (kvpool.i renames them).
      for (int i = 0; i < 256; i++) {
        if (Kvpool.StatusString((Status)i) == "unknown status") continue;
        string name = Enum.GetName(typeof(Status), i);
        Assert.IsNotNull(name, "status " + i + " is missing from the Status enum");
        Assert.IsFalse(name.StartsWith("KVPOOL_"), name + " needs a %rename in kvpool.i");
      }
      Assert.AreEqual("configuration error", Kvpool.StatusString(Status.Config));
      Assert.AreNotEqual(Kvpool.StatusString(Status.Io), Kvpool.StatusString(Status.Config));
      Assert.AreEqual("unknown status", Kvpool.StatusString((Status)12345));
      // A code newer than the binding keeps its number.
      KvPoolException future = new KvPoolException(999, "");
      Assert.AreEqual(999, future.Code);
      Assert.AreEqual("unknown status", future.Message);
    }

    [Test]
    public void CreateAndDisposeTwice() {
      Pool pool = new Pool(Valid);
      Assert.AreEqual("cpu", pool.Backend());
      pool.Dispose();
      pool.Dispose();
      using (Pool scoped = new Pool(Valid)) {
        Assert.AreEqual("cpu", scoped.Backend());
      }
    }

    // Undisposed pools and plans are released by their finalizers, on the
    // finalizer thread, without disturbing pools still in use.
    [Test]
    public void FinalizersReleaseUndisposedObjects() {
      using (Pool kept = new Pool(Valid)) {
        for (int i = 0; i < 20; i++) {
          CreateAndForget();
        }
        GC.Collect();
        GC.WaitForPendingFinalizers();
        GC.Collect();
        Assert.AreEqual("cpu", kept.Backend());
        Assert.AreEqual(6250ul, kept.Plan().NumPages);
      }
    }

    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    static void CreateAndForget() {
      new Pool(Valid).Plan();
    }

    [Test]
    public void DisposedPoolThrowsInvalidArgument() {
      Pool pool = new Pool(Valid);
      pool.Dispose();
      Expect(Status.InvalidArgument, () => pool.Backend());
      Expect(Status.InvalidArgument, () => pool.Plan());
    }

    [Test]
    public void ConfigErrorNamesTheJsonPath() {
      KvPoolException e = Expect(Status.Config, () => new Pool(With("\"page_size\":16", "\"page_size\":12")).Dispose());
      StringAssert.Contains("$.pool.page_size", e.Message);
      e = Expect(Status.Config, () => Pool.Plan(With("\"page_size\":16", "\"page_size\":12")));
      StringAssert.Contains("$.pool.page_size", e.Message);
    }

    [Test]
    public void MalformedJsonIsAConfigError() {
      foreach (string text in new string[] { "{\"model\": ", "{x", "", "[]" }) {
        Expect(Status.Config, () => new Pool(text).Dispose());
      }
      Assert.Throws<ArgumentNullException>(() => new Pool(null).Dispose());
      Assert.Throws<ArgumentException>(() => new Pool(Valid + "\0").Dispose());
    }

    [Test]
    public void FromFile() {
      string dir = Path.Combine(Path.GetTempPath(), "kvpool-cs-" + Guid.NewGuid().ToString("N"));
      Directory.CreateDirectory(dir);
      try {
        string file = Path.Combine(dir, "pool.json");
        File.WriteAllText(file, Valid);
        using (Pool pool = Pool.FromFile(file)) {
          Assert.AreEqual("cpu", pool.Backend());
        }
        string missing = Path.Combine(dir, "does-not-exist-\u00e9.json");
        KvPoolException e = Expect(Status.Io, () => Pool.FromFile(missing).Dispose());
        StringAssert.Contains(missing, e.Message);
      } finally {
        Directory.Delete(dir, true);
      }
    }

    [Test]
    public void PlanNumbers() {
      CheckPlan(Pool.Plan(Valid), 100000, 6250);  // a multiple of the page size
      // 99999 is rounded down to whole pages of 16.
      CheckPlan(Pool.Plan(With("\"max_total_tokens\":100000", "\"max_total_tokens\":99999")), 99984, 6249);
    }

    static void CheckPlan(PlanInfo info, ulong maxTokens, ulong pages) {
      Assert.AreEqual(16u, info.PageSize);
      Assert.AreEqual(131072ul, info.KvBytesPerToken);  // 32 layers * 2 (K,V) * 8 heads * 128 * 2 bytes
      Assert.AreEqual(maxTokens, info.MaxTotalTokens);
      Assert.AreEqual(pages, info.NumPages);
      Assert.AreEqual(9u, info.ReqRows);  // 8 + reserved row 0
      Assert.AreEqual((maxTokens + 16) * 131072ul, info.KvMemoryBytes);
      Assert.AreEqual(32u, info.NumLayers);
      Assert.AreEqual(8u, info.KvHeadsPerRank);
      Assert.AreEqual(info.KvMemoryBytes + info.ReqTableBytes + info.MambaMemoryBytes, info.TotalMemoryBytes);
    }

    [Test]
    public void PoolPlanEqualsStaticPlan() {
      PlanInfo expected = Pool.Plan(Valid);
      using (Pool pool = new Pool(Valid)) {
        PlanInfo actual = pool.Plan();
        // Every public property, so fields added later are compared too.
        int compared = 0;
        foreach (PropertyInfo p in typeof(PlanInfo).GetProperties(BindingFlags.Public | BindingFlags.Instance)) {
          Assert.AreEqual(p.GetValue(expected, null), p.GetValue(actual, null), p.Name);
          compared++;
        }
        Assert.GreaterOrEqual(compared, 19);
      }
    }

    // Each failure carries its own message, also under concurrency.
    [Test]
    public void MessagesStayWithTheirCall() {
      List<string> failures = new List<string>();
      List<Thread> threads = new List<Thread>();
      foreach (int size in new int[] { 3, 5, 6, 7, 9, 10, 11, 12 }) {
        string config = With("\"page_size\":16", "\"page_size\":" + size);
        string want = "got " + size + ",";
        Thread t = new Thread(() => {
          for (int i = 0; i < 200; i++) {
            try {
              Pool.Plan(config);
              lock (failures) failures.Add("page_size " + size + " accepted");
              return;
            } catch (KvPoolException e) {
              if (!e.Message.Contains(want)) {
                lock (failures) failures.Add("page_size " + size + ": " + e.Message);
                return;
              }
            }
          }
        });
        threads.Add(t);
        t.Start();
      }
      foreach (Thread t in threads) t.Join();
      Assert.IsEmpty(failures, string.Join("; ", failures.ToArray()));
    }

    [Test]
    public void CudaDeviceCount() {
      int n = Kvpool.CudaDeviceCount();
      if (Environment.GetEnvironmentVariable("KVPOOL_REQUIRE_GPU") == "1") {
        Assert.GreaterOrEqual(n, 1, "KVPOOL_REQUIRE_GPU=1");
      } else if (!File.Exists("/dev/nvidiactl")) {
        Assert.AreEqual(0, n, "no NVIDIA driver here");  // no driver node: no usable GPU
      } else {
        Assert.GreaterOrEqual(n, 0);
      }
    }
  }
}
