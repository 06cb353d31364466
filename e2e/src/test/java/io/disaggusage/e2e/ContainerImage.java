package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.GZIPInputStream;
import org.apache.commons.compress.archivers.tar.TarArchiveEntry;
import org.apache.commons.compress.archivers.tar.TarArchiveInputStream;

/**
 * The container image the build wrote ({@code image/target/disagg-usage-extproc-image.tar}, the file
 * {@code docker load} takes), read as a container engine reads it: the manifest's tags and layers, the
 * config, every layer's entries; and unpacked, layer over layer, into a root filesystem in which its
 * entrypoint runs as a container runtime would run it — own mount and PID namespaces, {@code /proc},
 * the usual {@code /dev} nodes, the image's user and working directory ({@link #launcher}). No engine
 * runs on the build machines; {@code unshare} from util-linux does what matters here (as root).
 */
final class ContainerImage {
  private static final ObjectMapper JSON = new ObjectMapper();
  /** What every container runtime creates in {@code /dev}: name, major, minor. */
  private static final List<String[]> DEVICES = List.of(
      new String[] {"null", "1", "3"}, new String[] {"zero", "1", "5"}, new String[] {"full", "1", "7"},
      new String[] {"random", "1", "8"}, new String[] {"urandom", "1", "9"});

  /** One file, folder or link of a layer, as its tar header has it. */
  record Entry(String path, int mode, long uid, long gid, boolean directory, boolean link, long size) {}

  private final Path tar;
  private final JsonNode manifest;
  private final JsonNode config;
  /** The gzipped layer tars, bottom first. */
  private final List<byte[]> layers;

  private ContainerImage(Path tar, JsonNode manifest, JsonNode config, List<byte[]> layers) {
    this.tar = tar;
    this.manifest = manifest;
    this.config = config;
    this.layers = layers;
  }

  /** The image this build wrote; fails saying how to build it when it is missing. */
  static ContainerImage built() {
    Path tar = Tools.root().resolve("image/target/disagg-usage-extproc-image.tar");
    if (!Files.isRegularFile(tar)) {
      throw new AssertionError(tar + " is missing: the test command builds it (scripts/test runs mvn -Pcontainer-image); "
          + "alone: mvn -B -Pcontainer-image -pl image -am package -DskipTests (Debian, apt-get and dpkg-deb)");
    }
    Map<String, byte[]> files = new LinkedHashMap<>(); // manifest, config and layers: the file is read once
    try (InputStream raw = Files.newInputStream(tar); TarArchiveInputStream in = new TarArchiveInputStream(raw)) {
      for (TarArchiveEntry e = in.getNextEntry(); e != null; e = in.getNextEntry()) {
        files.put(e.getName(), in.readAllBytes());
      }
      JsonNode manifest = JSON.readTree(files.get("manifest.json")).get(0);
      JsonNode config = JSON.readTree(files.get(manifest.get("Config").asText()));
      List<byte[]> layers = new ArrayList<>();
      manifest.get("Layers").forEach(layer -> layers.add(files.get(layer.asText())));
      return new ContainerImage(tar, manifest, config, layers);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  List<String> repoTags() {
    List<String> tags = new ArrayList<>();
    manifest.get("RepoTags").forEach(t -> tags.add(t.asText()));
    return tags;
  }

  /** The config's {@code config} object: Entrypoint, User, WorkingDir, Env, ExposedPorts, Labels. */
  JsonNode config() {
    return config.get("config");
  }

  List<String> entrypoint() {
    List<String> entrypoint = new ArrayList<>();
    config().get("Entrypoint").forEach(a -> entrypoint.add(a.asText()));
    return entrypoint;
  }

  /** Every layer's entries, bottom layer first, paths without a leading slash or {@code ./}. */
  List<Entry> entries() {
    List<Entry> entries = new ArrayList<>();
    for (byte[] gzipped : layers) {
      try (TarArchiveInputStream in = new TarArchiveInputStream(new GZIPInputStream(new java.io.ByteArrayInputStream(gzipped)))) {
        for (TarArchiveEntry e = in.getNextEntry(); e != null; e = in.getNextEntry()) {
          String path = e.getName().replaceFirst("^\\./", "").replaceFirst("^/", "").replaceFirst("/$", "");
          entries.add(new Entry(path, e.getMode() & 07777, e.getLongUserId(), e.getLongGroupId(), e.isDirectory(),
              e.isSymbolicLink() || e.isLink(), e.getSize()));
        }
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    return entries;
  }

  /**
   * Unpacks every layer, in order, into {@code rootfs} (which must not exist) and adds what a runtime
   * mounts or creates: {@code /proc} (mounted by {@link #launcher}) and the {@code /dev} nodes. Without
   * {@code /dev/urandom} the JVM seeds its random generator by itself: a ten-second start.
   */
  void unpackInto(Path rootfs) {
    try {
      Files.createDirectories(rootfs);
      for (byte[] layer : layers) {
        Path gzipped = Files.createTempFile(rootfs.getParent(), "layer", ".tar.gz");
        Files.write(gzipped, layer);
        RouterClients.run(List.of("tar", "--warning=no-unknown-keyword", "--numeric-owner", "-xzf", gzipped.toString(),
            "-C", rootfs.toString()));
        Files.delete(gzipped);
      }
      Files.createDirectories(rootfs.resolve("proc"));
      Files.createDirectories(rootfs.resolve("dev"));
      for (String[] device : DEVICES) {
        RouterClients.run(List.of("mknod", "-m", "666", rootfs.resolve("dev/" + device[0]).toString(), "c", device[1], device[2]));
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * The command that runs the entrypoint in {@code rootfs} (arguments follow it) as the image's
   * user, in its working directory, in new mount and PID namespaces with {@code /proc} mounted. Stop it
   * with {@link Processes#stop}, which signals the entrypoint too (unshare's own parent-death signal
   * does not survive the change of user). The environment is the caller's plus the image's {@code Env}.
   */
  List<String> launcher(Path rootfs) {
    if (!"root".equals(System.getProperty("user.name"))) {
      throw new AssertionError("running the image's entrypoint needs root (unshare --mount --pid, mknod), as CI runs; "
          + "or load " + tar + " into an engine: docker load -i " + tar);
    }
    String[] user = config().get("User").asText().split(":");
    // the image has no env program: this host's sets the image's variables, and unshare passes them on
    List<String> command = new ArrayList<>(List.of("env"));
    config().get("Env").forEach(v -> command.add(v.asText()));
    command.addAll(List.of("unshare", "--mount", "--pid", "--fork", "--mount-proc", "--root=" + rootfs,
        "--wd=" + config().get("WorkingDir").asText(),
        "--setuid=" + user[0], "--setgid=" + (user.length > 1 ? user[1] : user[0])));
    command.addAll(entrypoint());
    return command;
  }
}
