# Sourced by bindings/install_check.sh and bindings/csharp/package_check.sh, which build
# and run a small program against a binding from outside the build tree: the pool the
# program opens, what it must print, and the C# program both build.
# shellcheck shell=bash

# A tiny mha pool: 16 pages of 4 tokens. The programs allocate 8 slots (2 pages) and free
# one of them, so kvpool_check's report starts with smoke_want.
# shellcheck disable=SC2034  # read by the scripts that source this file
smoke_config='{"model":{"num_layers":2,"kv_heads":2,"head_dim":8},"pool":{"kv_dtype":"f32","page_size":4,"max_total_tokens":64,"max_running_requests":8,"max_context_len":64}}'
smoke_want='ok: 1 pages held, 15 free, 0 rows held'

# fail MESSAGE: "<check_name>: FAIL: MESSAGE" on stderr, exit 1 (the caller sets check_name).
fail() {
  echo "${check_name:-smoke_check}: FAIL: $*" >&2
  exit 1
}

# expect_smoke WHO OUTPUT: WHO (the program's runtime) printed the report smoke_want begins.
expect_smoke() {
  [[ $2 == "$smoke_want"* ]] || fail "$1 printed: $2"
}

# write_csharp_smoke FILE: the C# program (KvPool.Pool opened with args[0]: Alloc, Free, Check).
write_csharp_smoke() {
  cat >"$1" <<'EOF'
using KvPool;

public static class Smoke {
  public static void Main(string[] args) {
    using (Pool pool = new Pool(args[0])) {
      long[] slots = pool.Alloc(8);
      pool.Free(new long[] { slots[0] });
      System.Console.WriteLine(pool.Check());
    }
  }
}
EOF
}
