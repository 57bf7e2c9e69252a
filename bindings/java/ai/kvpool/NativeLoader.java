package ai.kvpool;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * Loads the JNI library, libkvpool_jni.so, once, before the first native call.
 *
 * <p>The first of these that applies wins:
 *
 * <ol>
 *   <li>the system property {@code kvpool.jni.library}: an absolute path, loaded as it is;
 *   <li>{@code libkvpool_jni.so} on {@code java.library.path} (an installed prefix's
 *       {@code <libdir>/kvpool/java}; it finds libkvpool.so.0 through its RUNPATH);
 *   <li>the copy inside the jar ({@code ai/kvpool/native/linux-<os.arch>/}, in the jar that
 *       bindings/java/pom.xml builds), with the libkvpool.so.0 bundled beside it: both are
 *       extracted into a fresh temporary folder, loaded from there (libkvpool.so.0 first,
 *       so the JNI library's dependency is already satisfied) and deleted at once.
 * </ol>
 *
 * <p>When none works, the {@link UnsatisfiedLinkError} names what was tried.
 */
final class NativeLoader {
  static final String PROPERTY = "kvpool.jni.library";
  static final String JNI_NAME = "kvpool_jni";
  /** Bundled in this order: a library before the libraries that need it. */
  private static final String[] BUNDLED = {"libkvpool.so.0", "libkvpool_jni.so"};

  private NativeLoader() {}

  static void load() {
    String path = System.getProperty(PROPERTY);
    if (path != null && !path.isEmpty()) {
      System.load(path);
      return;
    }
    UnsatisfiedLinkError fromLibraryPath;
    try {
      System.loadLibrary(JNI_NAME);
      return;
    } catch (UnsatisfiedLinkError e) {
      fromLibraryPath = e;
    }
    String folder = bundledFolder();
    if (NativeLoader.class.getResource(folder + "libkvpool_jni.so") == null) {
      UnsatisfiedLinkError error = new UnsatisfiedLinkError(
          "kvpool: libkvpool_jni.so is not on java.library.path (" + fromLibraryPath.getMessage()
          + ") and this jar bundles none for " + folder + "; set -Djava.library.path=<libdir>/kvpool/java"
          + " or -D" + PROPERTY + "=<path to libkvpool_jni.so>");
      error.initCause(fromLibraryPath);
      throw error;
    }
    try {
      loadBundled(folder);
    } catch (IOException e) {
      UnsatisfiedLinkError error = new UnsatisfiedLinkError(
          "kvpool: cannot extract the JNI library bundled in the jar: " + e);
      error.initCause(e);
      throw error;
    }
  }

  /** The jar folder of this platform's native libraries, e.g. /ai/kvpool/native/linux-amd64/. */
  static String bundledFolder() {
    String os = System.getProperty("os.name", "").toLowerCase(java.util.Locale.ROOT);
    return "/ai/kvpool/native/" + (os.startsWith("linux") ? "linux" : os) + "-"
        + System.getProperty("os.arch") + "/";
  }

  private static void loadBundled(String folder) throws IOException {
    Path dir = Files.createTempDirectory("kvpool-jni");
    try {
      for (String name : BUNDLED) {
        try (InputStream in = NativeLoader.class.getResourceAsStream(folder + name)) {
          if (in == null) {
            continue;  // a jar without libkvpool.so.0 relies on the system's
          }
          Path file = dir.resolve(name);
          Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
          System.load(file.toString());
        }
      }
    } finally {
      // Loaded libraries stay mapped after their files are gone: nothing is left behind.
      try (Stream<Path> files = Files.walk(dir)) {
        files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }
}
