#!/usr/bin/env bash
# java.maven: bindings/java/pom.xml builds the jar from this build tree,
# offline, and a program outside the repository uses that jar the way
# docs/services.md#packages says: javac/java with only the jar on the class
# path. It checks where the JNI library came from (/proc/self/maps):
#   - no java.library.path: the copy bundled in the jar, extracted to a
#     temporary folder that is gone afterwards;
#   - -Djava.library.path=<build>/bindings/java: that folder's library.
#
#   maven_check.sh BUILD_DIR WORK_DIR MVN JAVA JAVAC
# MAVEN_REPO: the Maven repository to resolve plugins from, offline
# (default /usr/share/maven-repo, Debian's; "" = Maven's own settings, online).
set -euo pipefail

build=$1 work=$2 mvn=$3 java=$4 javac=$5
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
maven_repo=${MAVEN_REPO-/usr/share/maven-repo}

fail() { echo "maven_check: FAIL: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work/tmp" "$work/smoke"
offline=()
if [[ -n $maven_repo ]]; then
  offline=(-o "-Dmaven.repo.local=$maven_repo")
fi
# A fresh output folder, so a stale jar cannot pass. Maven's own JVM with C1
# only starts in half the time (this short build never needs C2); Maven 3.8
# prints colour resets even in batch mode: sed drops them.
export MAVEN_OPTS=${MAVEN_OPTS:--XX:TieredStopAtLevel=1}
"$mvn" -B -q "${offline[@]}" -f "$repo/bindings/java/pom.xml" \
  -Dkvpool.build="$build" -Dkvpool.maven.target="$work/maven" package 2>&1 | sed 's/\x1b\[[0-9;]*m//g' ||
  fail "mvn package"
version=$(sed -n 's/^#define KVPOOL_VERSION_STRING "\(.*\)"/\1/p' "$repo/include/kvpool/version.h")
jar=$work/maven/kvpool-$version.jar
[[ -f $jar ]] || fail "no $jar (the pom's version must be the library's, $version)"
echo "maven_check: built $(basename "$jar")"

cat >"$work/smoke/Smoke.java" <<'EOF'
import ai.kvpool.Pool;
import java.nio.file.Files;
import java.nio.file.Path;

public class Smoke {
  public static void main(String[] args) throws Exception {
    try (Pool pool = new Pool(args[0])) {
      long[] slots = pool.alloc(8);
      pool.free(new long[] {slots[0]});
      System.out.println(pool.check());
    }
    for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
      if (line.contains("/libkvpool_jni.so")) {
        System.out.println("jni: " + line.substring(line.indexOf('/')));
        break;
      }
    }
  }
}
EOF
"$javac" -Xlint:all -Werror --release 17 -cp "$jar" -d "$work/smoke" "$work/smoke/Smoke.java"

config='{"model":{"num_layers":2,"kv_heads":2,"head_dim":8},"pool":{"kv_dtype":"f32","page_size":4,"max_total_tokens":64,"max_running_requests":8,"max_context_len":64}}'
want='ok: 1 pages held, 15 free, 0 rows held'
unset LD_LIBRARY_PATH

# From the jar: no java.library.path entry holds libkvpool_jni.so.
out=$(cd "$work" && "$java" -Xcheck:jni -Djava.io.tmpdir="$work/tmp" -cp "$jar:$work/smoke" Smoke "$config")
echo "$out"
[[ $out == "$want"* ]] || fail "from the jar: printed $out"
grep -q "^jni: $work/tmp/kvpool-jni[^/]*/libkvpool_jni.so (deleted)$" <<<"$out" ||
  fail "the JNI library was not the jar's extracted copy"
[[ -z $(ls -A "$work/tmp") ]] || fail "the extracted libraries were left in $work/tmp: $(ls -A "$work/tmp")"

# From java.library.path, which comes before the jar.
out=$(cd "$work" && "$java" -Xcheck:jni -Djava.library.path="$build/bindings/java" -cp "$jar:$work/smoke" Smoke "$config")
echo "$out"
[[ $out == "$want"* ]] || fail "from java.library.path: printed $out"
grep -q "^jni: $build/bindings/java/libkvpool_jni.so$" <<<"$out" ||
  fail "java.library.path did not win over the jar"
echo "maven_check: OK"
