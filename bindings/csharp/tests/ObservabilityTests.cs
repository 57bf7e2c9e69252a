using System;
using System.Collections.Generic;
using System.Linq;
using System.Text.RegularExpressions;
using System.Threading;
using NUnit.Framework;

namespace KvPool.Tests {

  // Pool.MetricsText (metrics.h) and Log.SetCallback (log.h).
  [TestFixture]
  public class ObservabilityTests {
    static readonly Regex SampleLine =
        new Regex("^(kvpool_[a-zA-Z0-9_]*)(\\{[a-z_]+=\"[^\"\\\\]*\"(,[a-z_]+=\"[^\"\\\\]*\")*\\})? ([0-9]+)$");
    static readonly Regex TypeLine = new Regex("^# TYPE (kvpool_[a-zA-Z0-9_]*) (counter|gauge)$");
    static readonly Regex HelpLine = new Regex("^# HELP (kvpool_[a-zA-Z0-9_]*) .+$");

    // Checks the exposition format and returns the samples by series.
    static Dictionary<string, ulong> Parse(string text) {
      Assert.IsTrue(text.EndsWith("\n"), "ends with a newline");
      var samples = new Dictionary<string, ulong>();
      var families = new HashSet<string>();
      string family = "", helped = "";
      foreach (string line in text.Substring(0, text.Length - 1).Split('\n')) {
        Match m = HelpLine.Match(line);
        if (m.Success) {
          helped = m.Groups[1].Value;
          continue;
        }
        m = TypeLine.Match(line);
        if (m.Success) {
          Assert.AreEqual(helped, m.Groups[1].Value, "HELP before TYPE: " + line);
          Assert.IsTrue(families.Add(m.Groups[1].Value), "each family once: " + line);
          Assert.AreEqual(m.Groups[2].Value == "counter", m.Groups[1].Value.EndsWith("_total"), line);
          family = m.Groups[1].Value;
          continue;
        }
        m = SampleLine.Match(line);
        Assert.IsTrue(m.Success, "a sample: " + line);
        Assert.AreEqual(family, m.Groups[1].Value, "inside its family: " + line);
        samples.Add(m.Groups[1].Value + m.Groups[2].Value, ulong.Parse(m.Groups[4].Value));
      }
      return samples;
    }

    static ulong At(Dictionary<string, ulong> m, string series) {
      Assert.IsTrue(m.ContainsKey(series), "no sample " + series);
      return m[series];
    }

    // A dictionary under a lock; puts fail while Fail is set.
    class DictBackend : StorageBackend {
      readonly Dictionary<string, byte[]> values = new Dictionary<string, byte[]>();
      internal volatile bool Fail;
      public override void Put(string[] keys, byte[][] batch, StorageResult[] results) {
        if (Fail) return;  // every result stays Error
        lock (values) {
          for (int i = 0; i < keys.Length; i++) {
            values[keys[i]] = batch[i];
            results[i] = StorageResult.Ok;
          }
        }
      }
      public override void Get(string[] keys, byte[][] batch, StorageResult[] results) {
        lock (values) {
          for (int i = 0; i < keys.Length; i++) {
            byte[] v;
            results[i] = values.TryGetValue(keys[i], out v) ? StorageResult.Ok : StorageResult.Miss;
            batch[i] = v;
          }
        }
      }
      public override int ExistsPrefix(string[] keys) {
        lock (values) {
          int n = 0;
          while (n < keys.Length && values.ContainsKey(keys[n])) n++;
          return n;
        }
      }
    }

    static void Store(Pool pool, int[] prompt) {
      SeqBegin s = pool.Begin(prompt);
      pool.SeqExtend(new[] { s.Seq }, new long[] { prompt.Length - (long)s.Cached });
      pool.Finish(s.Seq, (ulong)prompt.Length);
      pool.StorageFlush();
    }

    [TearDown]
    public void ClearCallback() {
      Log.SetCallback(null, LogLevel.Error);
    }

    [Test]
    public void MetricsEqualTheStats() {
      int[] prompt = PrefixCacheTests.Tokens(11, 41);
      var backend = new DictBackend();
      using (Pool a = Pool.WithStorage(StorageBackendTests.Custom, backend))
      using (Pool b = Pool.WithStorage(StorageBackendTests.Custom, backend)) {
        Store(a, prompt);
        ulong id = b.StoragePrefetch(prompt).Id;
        Assert.AreNotEqual(0UL, id);
        while (!b.StoragePrefetchPoll(id).IsDone) Thread.Yield();
        b.StoragePrefetchEnd(id);
        SeqBegin sb = b.Begin(prompt);
        ulong storageHit = b.SeqInfo(sb.Seq).StorageHit;
        Assert.Greater(storageHit, 0UL);
        b.Abort(sb.Seq);
        foreach (Pool p in new[] { a, b }) {
          var m = Parse(p.MetricsText());
          Stats s = p.Stats();
          HostStats h = p.HostStats();
          StorageStats st = p.StorageStats();
          Assert.AreEqual(s.TokenCapacity, At(m, "kvpool_capacity_tokens{tier=\"device\"}"));
          Assert.AreEqual(s.TokenHeld, At(m, "kvpool_used_tokens{tier=\"device\"}"));
          Assert.AreEqual(h.CapacityTokens, At(m, "kvpool_capacity_tokens{tier=\"host\"}"));
          Assert.AreEqual(h.Backups, At(m, "kvpool_transfers_total{direction=\"device_to_host\"}"));
          Assert.AreEqual(h.BytesToDevice, At(m, "kvpool_transfer_bytes_total{direction=\"host_to_device\"}"));
          Assert.AreEqual(st.BackupBytes, At(m, "kvpool_transfer_bytes_total{direction=\"host_to_storage\"}"));
          Assert.AreEqual(st.PrefetchBytes, At(m, "kvpool_transfer_bytes_total{direction=\"storage_to_host\"}"));
          Assert.AreEqual(st.StorageHitTokens, At(m, "kvpool_prefix_hit_tokens_total{tier=\"storage\"}"));
          Assert.AreEqual(st.StorePutErrors, At(m, "kvpool_storage_operation_errors_total{operation=\"put\"}"));
        }
        Assert.AreEqual(storageHit, At(Parse(b.MetricsText()), "kvpool_prefix_hit_tokens_total{tier=\"storage\"}"));
      }
    }

    [Test]
    public void MetricsOfADisposedPoolThrow() {
      Pool p = new Pool(Configs.Paged);
      Assert.IsFalse(Parse(p.MetricsText()).ContainsKey("kvpool_capacity_tokens{tier=\"host\"}"));
      p.Dispose();
      var e = Assert.Throws<KvPoolException>(() => p.MetricsText());
      Assert.AreEqual(Status.InvalidArgument, e.Status);
    }

    class Recorder {
      internal readonly List<string> Messages = new List<string>();
      internal readonly HashSet<int> Threads = new HashSet<int>();
      internal void Log(LogLevel level, string message) {
        lock (this) {
          Messages.Add(level + ": " + message);
          Threads.Add(Thread.CurrentThread.ManagedThreadId);
        }
      }
      internal int Count(string part) {
        lock (this) return Messages.Count(m => m.Contains(part));
      }
    }

    [Test]
    public void CallbackGetsMessagesByLevel() {
      var info = new Recorder();
      Log.SetCallback(info.Log, LogLevel.Info);
      using (Pool p = new Pool(Configs.Paged)) {
        Assert.AreEqual(1, info.Count("Info: pool created: model \"\""));
        Assert.Throws<KvPoolException>(() => p.Free(new long[] { 5 }));
        Assert.AreEqual(0, info.Count("Debug"));
        var debug = new Recorder();
        Log.SetCallback(debug.Log, LogLevel.Debug);
        var e = Assert.Throws<KvPoolException>(() => p.Free(new long[] { 5 }));
        Assert.AreEqual(1, debug.Count("Debug: failed call (invalid argument): " + e.Message), string.Join("\n", debug.Messages));
        Log.SetCallback(null, LogLevel.Debug);
        Assert.Throws<KvPoolException>(() => p.Free(new long[] { 5 }));
        Assert.AreEqual(1, debug.Count("Debug"));
      }
      Assert.AreEqual(0, info.Count("destroying pool"));
    }

    [Test]
    public void CallbackCannotSetTheCallback() {
      Exception inner = null;
      int calls = 0;
      Log.SetCallback((level, message) => {
        if (Interlocked.Increment(ref calls) == 1) {
          try {
            Log.SetCallback(null, LogLevel.Error);
          } catch (Exception e) {
            inner = e;
          }
        }
      }, LogLevel.Debug);
      using (Pool p = new Pool(Configs.Paged)) {
        Assert.IsInstanceOf<KvPoolException>(inner);
        Assert.AreEqual(Status.InvalidArgument, ((KvPoolException)inner).Status);
        Assert.Throws<KvPoolException>(() => p.Free(new long[] { 5 }));
        Assert.GreaterOrEqual(calls, 2, "still set");
      }
    }

    [Test]
    public void ThrowingCallbackDoesNotBreakTheCall() {
      Log.SetCallback((level, message) => { throw new InvalidOperationException("callback failed"); }, LogLevel.Debug);
      using (Pool p = new Pool(Configs.Paged)) {
        var e = Assert.Throws<KvPoolException>(() => p.Free(new long[] { 5 }));
        Assert.AreEqual(Status.InvalidArgument, e.Status);
      }
    }

    [Test]
    public void StorageThreadsLogThroughTheCallback() {
      var r = new Recorder();
      Log.SetCallback(r.Log, LogLevel.Warn);
      var backend = new DictBackend { Fail = true };
      using (Pool p = Pool.WithStorage(StorageBackendTests.Custom, backend)) {
        Store(p, PrefixCacheTests.Tokens(11, 41));
      }
      Assert.GreaterOrEqual(r.Count("Warn: storage backend, storing pages: since the last report"), 1,
                            string.Join("\n", r.Messages));
      Assert.IsTrue(r.Threads.Any(id => id != Thread.CurrentThread.ManagedThreadId), "from the storage thread");

      // Replacing the callback while threads log: a replaced callback never runs again.
      int late = 0;
      bool stop = false;
      using (Pool p = new Pool(Configs.Paged)) {
        var threads = Enumerable.Range(0, 3).Select(_ => new Thread(() => {
          while (!Volatile.Read(ref stop)) {
            try {
              p.Free(new long[] { 7 });
            } catch (KvPoolException) {
              // the failure is the message
            }
          }
        })).ToList();
        threads.ForEach(t => t.Start());
        for (int i = 0; i < 50; i++) {
          var retired = new StrongBox();
          Log.SetCallback((level, message) => {
            if (Volatile.Read(ref retired.Value)) Interlocked.Increment(ref late);
          }, LogLevel.Debug);
          Thread.Sleep(1);
          Log.SetCallback(null, LogLevel.Debug);
          Volatile.Write(ref retired.Value, true);
        }
        Volatile.Write(ref stop, true);
        threads.ForEach(t => t.Join());
      }
      Assert.AreEqual(0, late);
    }

    class StrongBox {
      internal bool Value;
    }
  }
}
